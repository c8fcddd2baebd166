"""Edge TPU without the hardware: compiler log parsing, a stub runtime, a fake compiler.

The stub (tests/data/edgetpu_stub.c, built here with gcc) exports the TFLite
external-delegate entry points, so both failure paths of the real runtime are
exercised: library absent (OSError) and library present but the delegate not
created (ValueError), plus a delegate that loads and takes no op.
"""

from __future__ import annotations

import ctypes
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support.edge_kit import build_stub_runtime, install_fake_compiler, study_reference_file

from rlperf.edge.edgetpu import (
    EDGETPU_LIBRARY,
    INSTALL_HINT,
    compile_model,
    find_runtime,
    load_edgetpu_delegate,
    parse_compiler_output,
)
from rlperf.errors import EdgeTpuUnavailable, SkipCell
from tests.conftest import DATA

STUB_SOURCE = DATA / "edgetpu_stub.c"

FULL_LOG = textwrap.dedent(
    """\
    Edge TPU Compiler version 16.0.384591198
    Started a compilation timeout timer of 180 seconds.

    Model compiled successfully in 1234 ms.

    Input model: policy-int8-uint8-abc.tflite
    Input size: 1.00MiB
    Output model: out/policy-int8-uint8-abc_edgetpu.tflite
    Output size: 1.10MiB
    On-chip memory used for caching model parameters: 1.02MiB
    On-chip memory remaining for caching model parameters: 6.90MiB
    Off-chip memory used for streaming uncached model parameters: 0.00B
    Number of Edge TPU subgraphs: 1
    Total number of operations: 7
    Operation log: out/policy-int8-uint8-abc_edgetpu.log
    See the operation log file for individual operation details.
    Compilation child process completed within timeout period.
    Compilation succeeded!
    """
)

UNMAPPED = "Operation is otherwise supported, but not mapped due to some unspecified limitation"
PARTIAL_LOG = textwrap.dedent(
    """\
    Edge TPU Compiler version 16.0.384591198

    Model compiled successfully in 270 ms.

    Input model: conv_net.tflite
    Output model: conv_net_edgetpu.tflite
    Number of Edge TPU subgraphs: 1
    Total number of operations: 11
    Operation log: conv_net_edgetpu.log

    Model successfully compiled but not all operations are supported by the Edge TPU.
    Number of operations that will run on Edge TPU: 9
    Number of operations that will run on CPU: 2

    Operator                       Count      Status

    QUANTIZE                       1          Mapped to Edge TPU
    QUANTIZE                       1          {unmapped}
    CONV_2D                        8          Mapped to Edge TPU
    DEQUANTIZE                     1          Operation is working on an unsupported data type
    """
).format(unmapped=UNMAPPED)


def test_parse_fully_mapped_log() -> None:
    r = parse_compiler_output(FULL_LOG)
    assert r.version == "16.0.384591198"
    assert r.compiled
    assert (r.subgraphs, r.ops_total, r.ops_on_tpu, r.ops_on_cpu) == (1, 7, 7, 0)
    assert r.fully_mapped
    assert r.on_chip_memory == "1.02MiB" and r.off_chip_memory == "0.00B"
    assert r.output_model == "out/policy-int8-uint8-abc_edgetpu.tflite"


def test_parse_partially_mapped_log() -> None:
    r = parse_compiler_output(PARTIAL_LOG)
    assert (r.subgraphs, r.ops_total, r.ops_on_tpu, r.ops_on_cpu) == (1, 11, 9, 2)
    assert not r.fully_mapped
    assert r.cpu_ops == {"QUANTIZE": 1, "DEQUANTIZE": 1}
    assert [row["count"] for row in r.operators] == [1, 1, 8, 1]
    assert r.to_dict()["cpu_ops"] == {"QUANTIZE": 1, "DEQUANTIZE": 1}


def test_parse_table_only_log() -> None:
    """Old compilers print only the table: the counts come from it."""
    text = "Edge TPU Compiler version 2.0.267685300\n\nOperator  Count  Status\n\n" + (
        "CONV_2D                        46         Mapped to Edge TPU\n"
        "CONV_2D                        7          More than one subgraph is not supported\n"
    )
    r = parse_compiler_output(text)
    assert (r.ops_on_tpu, r.ops_on_cpu, r.ops_total) == (46, 7, 53)
    assert r.cpu_ops == {"CONV_2D": 7}


def test_install_hint_names_coral_packages() -> None:
    assert "libedgetpu1-std" in INSTALL_HINT and "edgetpu-compiler" in INSTALL_HINT
    assert "packages.cloud.google.com/apt" in INSTALL_HINT


@pytest.fixture(scope="module")
def stub_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lib = build_stub_runtime(STUB_SOURCE, tmp_path_factory.mktemp("stub"))
    if lib is None:
        pytest.skip("no C compiler to build the Edge TPU stub")
    return lib


def test_runtime_absent_is_reported_not_raised(tmp_path: Path) -> None:
    rt = find_runtime(str(tmp_path / "libedgetpu_missing.so.1"))
    assert not rt.available
    assert "not found" in (rt.reason or "")
    with pytest.raises(EdgeTpuUnavailable, match="not found") as info:
        load_edgetpu_delegate(str(tmp_path / "libedgetpu_missing.so.1"))
    assert isinstance(info.value, SkipCell)
    assert "libedgetpu1-std" in str(info.value)  # the install hint travels with the reason


def test_runtime_present_but_delegate_fails(stub_library: Path, monkeypatch) -> None:
    monkeypatch.setenv("EDGETPU_STUB_MODE", "fail")
    assert find_runtime(str(stub_library)).available
    with pytest.raises(EdgeTpuUnavailable, match="loaded but the delegate could not be created"):
        load_edgetpu_delegate(str(stub_library), device="usb:0")
    try:
        load_edgetpu_delegate(str(stub_library))
    except EdgeTpuUnavailable as exc:
        assert "stub: Failed to open Edge TPU device" in str(exc)  # the runtime's own words


def test_delegate_that_takes_no_op_is_reported(stub_library: Path, monkeypatch, tmp_path) -> None:
    """A loaded Edge TPU delegate that claims nothing must show as 'none', never as success."""
    from rlperf.tflite.runtime import TfliteActor

    monkeypatch.setenv("EDGETPU_STUB_MODE", "noop")
    lib = ctypes.CDLL(str(stub_library))
    calls_before = lib.stub_prepare_calls()
    model = _small_int8_model(tmp_path)
    delegate = load_edgetpu_delegate(str(stub_library))
    actor = TfliteActor(model, None, threads=1, extra_delegates=[("edgetpu", delegate)])
    assert lib.stub_prepare_calls() == calls_before + 1  # TFLite asked the delegate
    assert actor.delegate.edgetpu_status == "none"
    assert "edgetpu" not in actor.delegate.delegated_ops
    assert "Edge TPU delegate took no op" in actor.delegate.note
    assert actor.delegate.delegates == ["edgetpu", "xnnpack"]
    assert 0 <= actor.act(np.zeros((8, 8, 4), np.uint8)) < 3


def _small_int8_model(tmp_path: Path) -> Path:
    """A full-integer TFLite model (8x8x4 -> 3), converted here."""
    import keras

    from rlperf.tflite.convert import convert_keras

    inp = keras.Input((8, 8, 4), batch_size=1)
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Conv2D(3, 8)(x)
    model = keras.Model(inp, keras.layers.Reshape((3,))(x))
    calib = np.random.default_rng(0).integers(0, 256, (16, 8, 8, 4), dtype=np.uint8)
    path = tmp_path / "small-int8.tflite"
    path.write_bytes(convert_keras(model, "int8", calib))
    return path


def test_compile_model_with_fake_compiler(tmp_path: Path) -> None:
    src = tmp_path / "m.tflite"
    src.write_bytes(b"TFL3-not-really")
    compiler = install_fake_compiler(tmp_path / "bin", PARTIAL_LOG)
    out, report, text = compile_model(src, tmp_path / "out", compiler=str(compiler))
    assert out == tmp_path / "out" / "m_edgetpu.tflite" and out.is_file()
    assert report.compiled and report.ops_on_cpu == 2 and report.subgraphs == 1
    assert "operation log" in text


def test_compile_model_without_compiler_skips(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EdgeTpuUnavailable, match="edgetpu_compiler is not on PATH"):
        compile_model(tmp_path / "m.tflite", tmp_path / "out")


def test_compiler_failure_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "edgetpu_compiler"
    bad.write_text("#!/bin/sh\necho 'Internal compiler error. Aborting!'\nexit 1\n")
    bad.chmod(0o755)
    with pytest.raises(RuntimeError, match="Internal compiler error"):
        compile_model(tmp_path / "m.tflite", tmp_path / "out", compiler=str(bad))


@pytest.mark.edgetpu
def test_real_edgetpu_runs_study_model() -> None:
    """On a machine with a Coral device: the study's compiled model runs fully on the TPU."""
    path = study_reference_file("exported_models/model1_quant_edgetpu.tflite")
    if not find_runtime(EDGETPU_LIBRARY).available:
        pytest.skip(f"{EDGETPU_LIBRARY} is not installed (no Edge TPU runtime)")
    if path is None:
        pytest.skip("the study's reference files are absent")
    from rlperf.tflite.runtime import TfliteActor

    try:
        delegate = load_edgetpu_delegate(EDGETPU_LIBRARY)
    except EdgeTpuUnavailable as exc:
        pytest.skip(str(exc))
    actor = TfliteActor(path, 6, extra_delegates=[("edgetpu", delegate)])
    assert actor.delegate.edgetpu_status == "full"
    assert actor.act(np.full((84, 84, 4), 87, np.uint8)) in range(6)
