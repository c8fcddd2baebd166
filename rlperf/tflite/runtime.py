"""Acting with one policy variant: a LiteRT interpreter (with its delegates) or the torch module.

Which kernels ran. LiteRT applies XNNPACK as a *default delegate* when the
interpreter is built with the builtin op resolver (``OpResolverType.AUTO``):
after ``allocate_tensors`` the execution plan holds one ``DELEGATE`` node per
partition that XNNPACK (or an explicit delegate such as the Edge TPU's)
claimed, appended after the model's own nodes. :func:`delegate_report`
attributes every original op to the partition that took it (walking back from
each ``DELEGATE`` node's outputs to its inputs) and reports the rest as
running on TFLite's builtin CPU kernels: status ``full`` (every op
delegated), ``partial`` (some ops on builtin kernels — never hidden) or
``none``. ``edge.xnnpack=false`` builds the interpreter with
``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` (TFLite's own kernels only).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.tflite.export import continuous_actions, torch_outputs
from rlperf.tflite.tflite_model import (
    EDGETPU_CUSTOM_OP,
    TfliteModelInfo,
    input_encoder,
    logits_output,
    output_dequantizer,
    read_tflite,
)


@dataclass
class DelegateReport:
    """Which delegates took which ops of a model, and what stayed on builtin kernels."""

    delegates: list[str]  # delegates asked for: "xnnpack" (default delegate), "edgetpu"
    status: str  # full | partial | none
    ops_total: int
    delegated_ops: dict[str, dict[str, int]] = field(default_factory=dict)  # delegate -> op counts
    cpu_ops: dict[str, int] = field(default_factory=dict)  # ops on TFLite builtin kernels
    partitions: dict[str, int] = field(default_factory=dict)  # delegate -> DELEGATE nodes
    op_resolver: str = "builtin"
    threads: int = 1
    # With the Edge TPU delegate: full (it took every op), partial (ops left on the
    # CPU, e.g. ops the compiler could not map) or none (it took nothing).
    edgetpu_status: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _partition_nodes(interp: Any, n_orig: int, node: int) -> set[int]:
    """Original nodes covered by the DELEGATE node ``node`` (walk back outputs -> inputs)."""
    w = interp._interpreter
    producer: dict[int, int] = {}
    for j in range(n_orig):
        for t in w.NodeOutputs(j):
            producer[int(t)] = j
    boundary = {int(t) for t in w.NodeInputs(node)}
    covered: set[int] = set()
    stack = [int(t) for t in w.NodeOutputs(node)]
    while stack:
        t = stack.pop()
        if t in boundary or t not in producer:
            continue
        j = producer[t]
        if j in covered:
            continue
        covered.add(j)
        stack.extend(int(x) for x in w.NodeInputs(j) if int(x) >= 0)
    return covered


def delegate_report(
    interp: Any, info: TfliteModelInfo, delegates: list[str], op_resolver: str, threads: int
) -> DelegateReport:
    """Attribute every op of ``info`` to a delegate partition or to the builtin kernels."""
    w = interp._interpreter
    n_orig = len(info.operators)
    n_nodes = int(w.NumNodes())
    covered_by: dict[int, str] = {}
    partitions: Counter[str] = Counter()
    for node in range(n_orig, n_nodes):
        covered = _partition_nodes(interp, n_orig, node)
        names = {info.operators[j] for j in covered}
        who = "edgetpu" if EDGETPU_CUSTOM_OP in names else "xnnpack"
        partitions[who] += 1
        for j in covered:
            covered_by[j] = who
    delegated: dict[str, Counter[str]] = {}
    cpu: Counter[str] = Counter()
    for j, name in enumerate(info.operators):
        if j in covered_by:
            delegated.setdefault(covered_by[j], Counter())[name] += 1
        else:
            cpu[name] += 1
    if not covered_by:
        status = "none"
    elif cpu:
        status = "partial"
    else:
        status = "full"
    note = ""
    if cpu:
        note = (
            f"{sum(cpu.values())} of {n_orig} ops run on TFLite's builtin CPU kernels: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(cpu.items()))
        )
    edgetpu_status = None
    if "edgetpu" in delegates:
        on_tpu = sum(delegated.get("edgetpu", Counter()).values())
        edgetpu_status = "none" if on_tpu == 0 else "full" if on_tpu == n_orig else "partial"
        if on_tpu == 0:
            note = (note + "; " if note else "") + "the Edge TPU delegate took no op"
        elif on_tpu < n_orig:
            note = (note + "; " if note else "") + (
                f"the Edge TPU runs {on_tpu} of {n_orig} ops, the rest run on the CPU"
            )
    return DelegateReport(
        delegates=delegates,
        status=status,
        ops_total=n_orig,
        delegated_ops={k: dict(v) for k, v in delegated.items()},
        cpu_ops=dict(cpu),
        partitions=dict(partitions),
        op_resolver=op_resolver,
        threads=threads,
        edgetpu_status=edgetpu_status,
        note=note,
    )


def open_interpreter(
    model_path: Path | str,
    threads: int = 1,
    xnnpack: bool = True,
    extra_delegates: list[tuple[str, Any]] | None = None,
) -> tuple[Any, TfliteModelInfo, DelegateReport]:
    """A LiteRT interpreter with ``threads`` threads, tensors allocated, and its delegate report.

    Args:
        extra_delegates: ``[(name, delegate object)]``, e.g. ``[("edgetpu", d)]``.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    info = read_tflite(Path(model_path))
    resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    extra = list(extra_delegates or [])
    interp = Interpreter(
        model_path=str(model_path),
        num_threads=int(threads),
        experimental_delegates=[d for _, d in extra] or None,
        experimental_op_resolver_type=resolver,
    )
    interp.allocate_tensors()
    names = [n for n, _ in extra] + (["xnnpack"] if xnnpack else [])
    report = delegate_report(
        interp,
        info,
        names,
        "builtin (XNNPACK default delegate)" if xnnpack else "builtin_without_default_delegates",
        int(threads),
    )
    return interp, info, report


class TfliteActor:
    """Greedy actions from a ``.tflite`` policy, one observation per invoke.

    ``act`` quantizes the raw uint8 frame for the input tensor (a no-op for
    rlperf's exact uint8 input; a Box observation normalized per feature first, where the
    file says so: :func:`~rlperf.tflite.tflite_model.input_encoder`), invokes, and takes
    the argmax of the (still quantized: the mapping is monotonic) logits; ``forward_ns`` is
    the invoke alone.
    A ``continuous`` (Box) policy's output is the action itself (``num_actions`` its
    dimensions): ``act`` returns it dequantized, float32.
    """

    def __init__(
        self,
        model_path: Path | str,
        num_actions: int | None,
        threads: int = 1,
        xnnpack: bool = True,
        extra_delegates: list[tuple[str, Any]] | None = None,
        continuous: bool = False,
    ) -> None:
        self.continuous = bool(continuous)
        self.interp, self.info, self.delegate = open_interpreter(
            model_path, threads, xnnpack, extra_delegates
        )
        self._extra = extra_delegates  # keep delegates alive as long as the interpreter
        self.input = self.info.inputs[0]
        self.output = logits_output(self.info, num_actions)
        self._in = self.input.index
        self._out = self.output.index
        self._quantize = input_encoder(self.info)  # per-feature normalization, quantization
        self._dequantize = output_dequantizer(self.output)
        self.forward_ns = 0

    def _input(self, obs: Any) -> np.ndarray:
        """One observation as the input tensor: reshaped to it (a Discrete state becomes
        ``(1, 1)``) and quantized where the tensor is."""
        return self._quantize(np.asarray(obs).reshape(self.input.shape))

    def act(self, obs: Any) -> Any:
        """The argmax (int), or a Box policy's action (float32 array)."""
        self.interp.set_tensor(self._in, self._input(obs))
        t0 = time.perf_counter_ns()
        self.interp.invoke()
        self.forward_ns = time.perf_counter_ns() - t0
        if self.continuous:
            out = self._dequantize(self.interp.get_tensor(self._out))
            return out.reshape(-1).astype(np.float32)
        return int(np.argmax(self.interp.get_tensor(self._out)))

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """Dequantized outputs for observations stacked as the env gives them: logits
        ``(N, A)``, or a Box policy's actions ``(N, d)``."""
        out = []
        for obs in observations:
            self.interp.set_tensor(self._in, self._input(obs))
            self.interp.invoke()
            out.append(self._dequantize(self.interp.get_tensor(self._out)).ravel())
        return np.stack(out)


class TorchActor:
    """Greedy actions from the torch policy (the ``rllib`` cell): batch 1, ``threads`` threads."""

    def __init__(self, policy_path: Path | str, threads: int = 1) -> None:
        # torch only for the torch cell: a TFLite benchmark process never loads it (its RSS).
        import torch

        from rlperf.models.policy_file import load_policy

        torch.set_num_threads(int(threads))
        self._torch = torch
        self.net = load_policy(policy_path)
        self.continuous = continuous_actions(self.net)
        self.forward_ns = 0
        self.delegate = None

    def act(self, obs: Any) -> Any:
        """The argmax (int), or a Box policy's reference action (float32 array)."""
        torch = self._torch
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(obs)).unsqueeze(0)
            t0 = time.perf_counter_ns()
            logits = self.net.logits(x)
            self.forward_ns = time.perf_counter_ns() - t0
            if self.continuous:
                return self.net.actions_of(logits.numpy())[0]
            return int(logits.argmax())

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """Logits ``(N, A)``, or a Box policy's reference actions ``(N, d)``."""

        return torch_outputs(self.net, observations)[0]
