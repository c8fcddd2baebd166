"""Read what a ``.tflite`` file is without running it: tensors, quantization, operators.

Parses the flatbuffer with the schema module that ships with LiteRT
(``ai_edge_litert.schema_py_generated``, pure Python; TensorFlow is not
imported). From it come the input/output types and quantization parameters
(what a benchmark must feed), the operator list (an ``edgetpu-custom-op`` marks
a file compiled by ``edgetpu_compiler``), and the kind of variant (fp32, int8,
dynamic-range, fp16, int16x8) inferred from the tensor types, and a full-integer
MLP policy's per-feature input normalization (:class:`InputNormalization`, a metadata
entry of the file). Also here: the normalize / quantize / dequantize arithmetic between
raw observations and those tensors (:func:`input_encoder`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.errors import EdgeTpuModelOnCpuError

EDGETPU_CUSTOM_OP = "edgetpu-custom-op"

# tflite::TensorType codes (schema.fbs) -> numpy dtype names.
_TENSOR_TYPES = {
    0: "float32",
    1: "float16",
    2: "int32",
    3: "uint8",
    4: "int64",
    5: "string",
    6: "bool",
    7: "int16",
    9: "int8",
    10: "float64",
    15: "uint32",
    16: "uint16",
    17: "int4",
}
_WEIGHT_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"})


@dataclass(frozen=True)
class TensorInfo:
    """One input or output tensor of a TFLite model."""

    name: str
    index: int
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name: float32, uint8, int8, int16, ...
    scales: tuple[float, ...] = ()  # empty: not quantized
    zero_points: tuple[int, ...] = ()

    @property
    def quantized(self) -> bool:
        """True when the tensor holds integers with a (scale, zero point) mapping."""
        return bool(self.scales) and self.dtype not in ("float32", "float16")

    @property
    def scale(self) -> float | None:
        """Per-tensor scale (None when not quantized)."""
        return float(self.scales[0]) if self.quantized else None

    @property
    def zero_point(self) -> int | None:
        """Per-tensor zero point (None when not quantized)."""
        if not self.quantized:
            return None
        return int(self.zero_points[0]) if self.zero_points else 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["shape"] = list(self.shape)
        out["scale"] = self.scale
        out["zero_point"] = self.zero_point
        del out["scales"], out["zero_points"]
        return out


@dataclass(frozen=True)
class TfliteModelInfo:
    """What a ``.tflite`` file contains (subgraph 0, the one an interpreter runs)."""

    path: str | None
    size_bytes: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    operators: tuple[str, ...]  # op names in execution order; custom ops by custom code
    subgraphs: int
    variant: str  # fp32 | fp16 | dynamic | int8 | int16x8 | edgetpu | unknown
    description: str = ""
    # Applied to each observation before the input tensor's quantization (per feature).
    input_normalization: InputNormalization | None = None
    # Tensor bytes of subgraph 0: constants (weights), variables (the arena's upper bound).
    constant_tensor_bytes: int | None = None
    variable_tensor_bytes: int | None = None

    @property
    def op_counts(self) -> dict[str, int]:
        """How many operators of each kind."""
        return dict(Counter(self.operators))

    @property
    def edgetpu_custom_ops(self) -> int:
        """Number of ``edgetpu-custom-op`` nodes (= Edge TPU subgraphs of a compiled file)."""
        return self.operators.count(EDGETPU_CUSTOM_OP)

    @property
    def is_edgetpu_compiled(self) -> bool:
        """True for a file from ``edgetpu_compiler`` (runs only with the Edge TPU runtime)."""
        return self.edgetpu_custom_ops > 0

    @property
    def cpu_ops_outside_edgetpu(self) -> dict[str, int]:
        """Operators of a compiled file that the compiler left for the CPU."""
        return {k: v for k, v in self.op_counts.items() if k != EDGETPU_CUSTOM_OP}

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "variant": self.variant,
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "op_counts": self.op_counts,
            "edgetpu_compiled": self.is_edgetpu_compiled,
            "edgetpu_subgraphs": self.edgetpu_custom_ops,
            "subgraphs": self.subgraphs,
            "tensor_bytes": {
                "constant": self.constant_tensor_bytes,
                "variable": self.variable_tensor_bytes,
            },
            "input_normalization": (
                None if self.input_normalization is None else self.input_normalization.to_dict()
            ),
        }


#: The metadata entry of a ``.tflite`` file holding its :class:`InputNormalization`.
INPUT_NORMALIZATION_METADATA = "rlperf_input_normalization"


@dataclass(frozen=True)
class InputNormalization:
    """Per-feature scaling of a Box observation, done outside the graph: ``(obs - center)
    / half_width`` maps each feature's calibrated range [low, high] onto [-1, 1]; the
    model's first layer holds the inverse, folded into its weights and bias.

    TFLite quantizes an input tensor with one scale. Features of different ranges (a
    pendulum's cos and sin within ±1 beside its angular velocity within ±8; HalfCheetah's
    angles and velocities) would share it, and the narrow ones keep few levels. Normalized,
    every feature spans the input's whole int8 range. Written into the file as metadata
    (:data:`INPUT_NORMALIZATION_METADATA`), so every reader of the file applies it."""

    center: tuple[float, ...]
    half_width: tuple[float, ...]
    shape: tuple[int, ...]  # of one observation

    @classmethod
    def of_range(cls, low: np.ndarray, high: np.ndarray) -> InputNormalization:
        """The normalization of the per-feature range [``low``, ``high``] (a feature whose
        range is a single value keeps half-width 1: it is only shifted)."""
        low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        half = (high - low) / 2.0
        half = np.where(half > 0, half, 1.0)
        return cls(
            tuple(float(v) for v in ((low + high) / 2.0).ravel()),
            tuple(float(v) for v in half.ravel()),
            tuple(int(d) for d in low.shape),
        )

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(center, half_width) as float32 arrays of the observation's shape."""
        return (
            np.asarray(self.center, np.float32).reshape(self.shape),
            np.asarray(self.half_width, np.float32).reshape(self.shape),
        )

    def apply(self, observations: np.ndarray) -> np.ndarray:
        """Normalized float32 observations (one, or stacked on a leading axis)."""
        center, half = self.arrays()
        return (np.asarray(observations, np.float32) - center) / half

    def to_dict(self) -> dict[str, Any]:
        return {"center": list(self.center), "half_width": list(self.half_width),
                "shape": list(self.shape)}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InputNormalization:
        return cls(tuple(d["center"]), tuple(d["half_width"]), tuple(d["shape"]))


def with_input_normalization(data: bytes, normalization: InputNormalization) -> bytes:
    """The ``.tflite`` bytes ``data`` with ``normalization`` as a metadata entry (any entry of
    that name replaced); the graph is unchanged."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    payload = list(json.dumps(normalization.to_dict()).encode())
    model.buffers, model.metadata = list(model.buffers or []), list(model.metadata or [])
    entry = next((m for m in model.metadata if _text(m.name) == INPUT_NORMALIZATION_METADATA), None)
    if entry is None:  # a new entry and buffer; else its buffer rewritten
        entry = schema.MetadataT()
        entry.name, entry.buffer = INPUT_NORMALIZATION_METADATA, len(model.buffers)
        model.buffers.append(schema.BufferT())
        model.metadata.append(entry)
    model.buffers[entry.buffer].data = payload
    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _input_normalization(model: Any) -> InputNormalization | None:
    """The file's :class:`InputNormalization` metadata entry, if it has one."""
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if _text(entry.Name()) == INPUT_NORMALIZATION_METADATA:
            raw = model.Buffers(entry.Buffer()).DataAsNumpy()
            return InputNormalization.from_dict(json.loads(bytes(raw).decode()))
    return None


def _builtin_names() -> dict[int, str]:
    from ai_edge_litert import schema_py_generated as schema

    return {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}


def _tensor_info(schema_tensor: Any, index: int) -> TensorInfo:
    q = schema_tensor.Quantization()
    scales: tuple[float, ...] = ()
    zps: tuple[int, ...] = ()
    if q is not None and q.ScaleLength() > 0:
        scales = tuple(float(s) for s in q.ScaleAsNumpy())
        zps = tuple(int(z) for z in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else (0,)
    shape = (
        tuple(int(d) for d in schema_tensor.ShapeAsNumpy()) if schema_tensor.ShapeLength() else ()
    )
    name = schema_tensor.Name()
    return TensorInfo(
        name=name.decode() if isinstance(name, bytes) else str(name or ""),
        index=index,
        shape=shape,
        dtype=_TENSOR_TYPES.get(schema_tensor.Type(), f"type{schema_tensor.Type()}"),
        scales=scales,
        zero_points=zps,
    )


def read_tflite(source: Path | str | bytes) -> TfliteModelInfo:
    """Parse a ``.tflite`` file (path or bytes) into a :class:`TfliteModelInfo`.

    Raises:
        ValueError: the bytes are not a TFLite flatbuffer (no ``TFL3`` identifier).
    """
    from ai_edge_litert import schema_py_generated as schema

    if isinstance(source, bytes | bytearray):
        buf, path = bytes(source), None
    else:
        path = str(source)
        buf = Path(source).read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ValueError(f"{path or '<bytes>'} is not a TensorFlow Lite flatbuffer")
    model = schema.Model.GetRootAs(buf, 0)
    names = _builtin_names()
    codes: list[str] = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        # Since schema v3a, codes above 127 live in BuiltinCode, the old field saturates.
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        custom = oc.CustomCode()
        if custom:
            codes.append(custom.decode() if isinstance(custom, bytes) else str(custom))
        else:
            codes.append(names.get(code, f"BUILTIN_{code}"))
    sg = model.Subgraphs(0)
    tensors = [sg.Tensors(i) for i in range(sg.TensorsLength())]
    ops = [sg.Operators(j) for j in range(sg.OperatorsLength())]
    op_names = tuple(codes[op.OpcodeIndex()] for op in ops)
    inputs = tuple(
        _tensor_info(tensors[sg.Inputs(j)], sg.Inputs(j)) for j in range(sg.InputsLength())
    )
    outputs = tuple(
        _tensor_info(tensors[sg.Outputs(j)], sg.Outputs(j)) for j in range(sg.OutputsLength())
    )
    variant = _classify(op_names, ops, tensors)
    desc = model.Description()
    constant, variable = _tensor_bytes(model, tensors)
    return TfliteModelInfo(
        path=path,
        size_bytes=len(buf),
        inputs=inputs,
        outputs=outputs,
        operators=op_names,
        subgraphs=int(model.SubgraphsLength()),
        variant=variant,
        description=desc.decode(errors="replace") if isinstance(desc, bytes) else str(desc or ""),
        input_normalization=_input_normalization(model),
        constant_tensor_bytes=constant,
        variable_tensor_bytes=variable,
    )


def _tensor_bytes(model: Any, tensors: list[Any]) -> tuple[int, int]:
    """Bytes of subgraph 0's tensors: constant ones (weights, biases, quantization tables:
    data in the file's buffers) and variable ones (input, activations, output: what the
    interpreter's arena holds before its planner lets tensors of disjoint lifetimes share
    memory, so the arena is at most this)."""
    constant = variable = 0
    for t in tensors:
        shape = t.ShapeAsNumpy() if t.ShapeLength() else np.zeros(0, np.int64)
        count = int(np.prod(np.maximum(shape, 1))) if len(shape) else 1
        dtype = _TENSOR_TYPES.get(t.Type(), "")
        size = count // 2 if dtype == "int4" else count * _itemsize(dtype)
        buffer = int(t.Buffer())
        has_data = 0 < buffer < model.BuffersLength() and model.Buffers(buffer).DataLength() > 0
        if has_data:
            constant += size
        else:
            variable += size
    return constant, variable


def _itemsize(dtype: str) -> int:
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:  # "string", an unknown type: not a tensor rlperf's models have
        return 0


def _classify(op_names: tuple[str, ...], ops: list[Any], tensors: list[Any]) -> str:
    """Variant from the first weighted op's activation and weight types."""
    if EDGETPU_CUSTOM_OP in op_names:
        return "edgetpu"
    producer: dict[int, int] = {}
    for j, op in enumerate(ops):
        for k in range(op.OutputsLength()):
            producer[int(op.Outputs(k))] = j
    for j, name in enumerate(op_names):
        if name not in _WEIGHT_OPS or ops[j].InputsLength() < 2:
            continue
        act = _TENSOR_TYPES.get(tensors[ops[j].Inputs(0)].Type())
        w_index = int(ops[j].Inputs(1))
        weight = _TENSOR_TYPES.get(tensors[w_index].Type())
        src = producer.get(w_index)
        if src is not None and op_names[src] == "DEQUANTIZE":
            # fp16 models store float16 weights and dequantize them once at load.
            weight = _TENSOR_TYPES.get(tensors[ops[src].Inputs(0)].Type())
        if act in ("int8", "uint8"):
            return "int8"
        if act == "int16":
            return "int16x8"
        if act == "float32":
            return {"float32": "fp32", "float16": "fp16", "int8": "dynamic"}.get(
                weight or "", "unknown"
            )
    return "unknown"


def ensure_cpu_runnable(info: TfliteModelInfo, backend: str) -> None:
    """Refuse an Edge-TPU-compiled file on a CPU backend with a message that says why.

    Raises:
        EdgeTpuModelOnCpuError: ``info`` contains ``edgetpu-custom-op``.
    """
    if info.is_edgetpu_compiled:
        raise EdgeTpuModelOnCpuError(
            f"{info.path or 'this model'} was compiled for the Edge TPU (it contains "
            f"{info.edgetpu_custom_ops} {EDGETPU_CUSTOM_OP} node(s)) and cannot run on the CPU "
            f"(backend={backend}); TFLite would fail with 'unresolved custom op'. Benchmark it "
            f"with backend=edgetpu, or give the uncompiled file (without the _edgetpu suffix) "
            f"to a CPU backend."
        )


def _int_range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def is_lossless_input(tensor: TensorInfo) -> bool:
    """True when raw uint8 frames map exactly onto the input: scale 1 with uint8 zero point 0
    (the frame as it is) or int8 zero point -128 (the frame with its top bit flipped)."""
    if tensor.scale != 1.0:
        return False
    return (tensor.dtype, tensor.zero_point) in (("uint8", 0), ("int8", -128))


def quantize_input(obs: np.ndarray, tensor: TensorInfo) -> np.ndarray:
    """Raw observation values (0..255 pixels) -> what ``tensor`` expects.

    Float tensors get the pixel values as floats (rlperf's exported models take
    raw 0..255 pixels and scale inside, like the torch module). Quantized
    tensors get ``round(x / scale) + zero_point`` clipped to the type's range;
    a uint8 tensor with scale 1 and zero point 0 gets the frame unchanged (an
    int8 one with zero point -128 gets it with the top bit flipped).
    """
    return input_quantizer(tensor)(obs)


def input_encoder(info: TfliteModelInfo) -> Callable[[np.ndarray], np.ndarray]:
    """What an actor does to a raw observation before ``set_tensor``, inside its timed
    action: the file's per-feature normalization, where it has one, then
    :func:`input_quantizer` of its input tensor."""
    quantize = input_quantizer(info.inputs[0])
    if info.input_normalization is None:
        return quantize
    center, half = info.input_normalization.arrays()
    inverse = np.float32(1.0) / half
    return lambda obs: quantize((np.asarray(obs, np.float32) - center) * inverse)


def input_quantizer(tensor: TensorInfo) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`quantize_input` for one tensor, its constants computed once: what an actor
    calls inside its timed action (a small policy's invoke takes a few microseconds, so
    the quantization's own cost shows in ``action_ms``)."""
    dtype = np.dtype(tensor.dtype)
    if not tensor.quantized:
        return lambda obs: np.asarray(obs, dtype=dtype)
    assert tensor.scale is not None and tensor.zero_point is not None
    lossless, flip = is_lossless_input(tensor), tensor.dtype != "uint8"
    scale, zero = np.float32(tensor.scale), np.float32(tensor.zero_point)
    lo, hi = (np.float32(v) for v in _int_range(tensor.dtype))

    def quantize(obs: np.ndarray) -> np.ndarray:
        if lossless and obs.dtype == np.uint8:
            # x - 128 in two's complement is x with its top bit flipped.
            return (obs ^ np.uint8(0x80)).view(np.int8) if flip else obs
        q = np.rint(np.asarray(obs, dtype=np.float32) / scale) + zero
        return np.clip(q, lo, hi).astype(dtype)

    return quantize


def dequantize_output(values: np.ndarray, tensor: TensorInfo) -> np.ndarray:
    """A (possibly quantized) output tensor -> float32 values."""
    return output_dequantizer(tensor)(values)


def output_dequantizer(tensor: TensorInfo) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`dequantize_output` for one tensor, its constants computed once."""
    if not tensor.quantized:
        return lambda values: np.asarray(values, dtype=np.float32)
    assert tensor.scale is not None and tensor.zero_point is not None
    scale, zero = np.float32(tensor.scale), np.float32(tensor.zero_point)
    return lambda values: (np.asarray(values, dtype=np.float32) - zero) * scale


def input_distortion(tensor: TensorInfo, pixel_values: np.ndarray | None = None) -> dict[str, Any]:
    """How far feeding raw bytes (as the study did) is from the values the model expects.

    Returns the largest absolute pixel error when raw uint8 pixels are written
    into ``tensor`` without quantizing them, over ``pixel_values`` (default: all
    of 0..255) — 0 for a lossless input — and the error left by correct
    quantization (half a step for a scale above 1).
    """
    if not tensor.quantized:
        return {"lossless": True, "raw_bytes_max_err": 0.0, "quantized_max_err": 0.0}
    px = np.arange(256, dtype=np.float32) if pixel_values is None else np.asarray(pixel_values)
    px = np.unique(px.astype(np.float32))
    assert tensor.scale is not None and tensor.zero_point is not None
    raw = (px - tensor.zero_point) * tensor.scale  # raw bytes read back through the mapping
    q = quantize_input(px.astype(np.uint8), tensor).astype(np.float32)
    back = (q - tensor.zero_point) * tensor.scale
    return {
        "lossless": bool(is_lossless_input(tensor)),
        "raw_bytes_max_err": float(np.max(np.abs(raw - px))),
        "quantized_max_err": float(np.max(np.abs(back - px))),
    }


def logits_output(info: TfliteModelInfo, num_actions: int | None) -> TensorInfo:
    """The output holding the policy logits: the first whose size is ``num_actions``.

    rlperf's exports put the logits first; the study's files do too (logits
    ``(1, 1, 1, 6)``, value ``(1, 1)``). With ``num_actions`` None, the largest output.
    """
    if num_actions is not None:
        for out in info.outputs:
            if int(np.prod(out.shape)) == num_actions:
                return out
        raise ValueError(
            f"{info.path or 'model'}: no output has {num_actions} values (outputs: "
            f"{[list(o.shape) for o in info.outputs]}); is this a policy for this env?"
        )
    return max(info.outputs, key=lambda t: int(np.prod(t.shape)))


def gzip_size(path: Path | str) -> int:
    """Bytes of the file gzip-compressed (level 9): what zeros of a pruned model save in a
    download or on flash, where the ``.tflite`` itself stores them dense."""
    import gzip

    return len(gzip.compress(Path(path).read_bytes(), compresslevel=9))


def weight_sparsity(source: Path | str | bytes) -> dict[str, Any]:
    """Zero weights in a ``.tflite`` file as stored: every constant tensor of 2 or more
    dimensions (kernels; biases and shapes are left out). A quantized weight is zero when it
    equals its zero point; a tensor in TFLite's sparse format counts the values it does not
    store as zeros."""
    from ai_edge_litert import schema_py_generated as schema

    buf = bytes(source) if isinstance(source, bytes | bytearray) else Path(source).read_bytes()
    model = schema.Model.GetRootAs(buf, 0)
    sg = model.Subgraphs(0)
    total = zeros = 0
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        data = model.Buffers(t.Buffer()).DataAsNumpy() if t.Buffer() > 0 else 0
        dtype = _TENSOR_TYPES.get(t.Type())
        if isinstance(data, int) or t.ShapeLength() < 2 or dtype not in _WEIGHT_DTYPES:
            continue
        values = np.frombuffer(data.tobytes(), dtype=dtype)
        size = int(np.prod(t.ShapeAsNumpy()))
        info = _tensor_info(t, i)
        zp = info.zero_points[0] if len(set(info.zero_points)) == 1 else 0
        total += size
        zeros += int((values == zp).sum()) + (size - values.size if t.Sparsity() else 0)
    return {
        "weights": total,
        "zero_weights": zeros,
        "sparsity": zeros / total if total else float("nan"),
    }


_WEIGHT_DTYPES = ("float32", "float16", "int8", "uint8", "int16")
