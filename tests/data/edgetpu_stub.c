/* A stand-in for libedgetpu.so.1 that exports the TFLite external-delegate
 * plugin entry points, so the Edge TPU delegate-loading code can be tested
 * without Coral hardware (tests/test_edge_edgetpu.py builds it with gcc).
 *
 * EDGETPU_STUB_MODE selects the behaviour of tflite_plugin_create_delegate:
 *   "fail" (default): report an error through the callback and return NULL,
 *                     as the real runtime does when no Edge TPU is attached;
 *   "noop":           return a delegate whose Prepare claims no node, so every
 *                     op stays on the CPU (a delegate that did nothing).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int TfLiteStatus; /* kTfLiteOk == 0 */

/* Layout of TfLiteDelegate (tensorflow/lite/core/c/common.h). */
typedef struct StubDelegate {
  void* data_;
  TfLiteStatus (*Prepare)(void* context, struct StubDelegate* delegate);
  void* CopyFromBufferHandle;
  void* CopyToBufferHandle;
  void* FreeBufferHandle;
  int64_t flags;
  void* opaque_delegate_builder;
} StubDelegate;

static int prepare_calls = 0;

static TfLiteStatus stub_prepare(void* context, StubDelegate* delegate) {
  (void)context;
  (void)delegate;
  prepare_calls++;
  return 0;
}

int stub_prepare_calls(void) { return prepare_calls; }

StubDelegate* tflite_plugin_create_delegate(char** keys, char** values, size_t n,
                                            void (*report_error)(const char*)) {
  (void)keys;
  (void)values;
  (void)n;
  const char* mode = getenv("EDGETPU_STUB_MODE");
  if (mode == NULL || strcmp(mode, "noop") != 0) {
    if (report_error != NULL) report_error("stub: Failed to open Edge TPU device (no device attached)");
    return NULL;
  }
  StubDelegate* d = (StubDelegate*)calloc(1, sizeof(StubDelegate));
  d->Prepare = stub_prepare;
  return d;
}

void tflite_plugin_destroy_delegate(StubDelegate* delegate) { free(delegate); }
