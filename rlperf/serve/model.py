"""The served policy as one function of a batch of observations, the same in-process and in
a replica.

:class:`ModelSpec` is plain data (it travels to the replicas); :func:`load_model`
builds the :class:`BatchModel` it names: the torch policy of ``rlperf_policy.pt``
(``backend=rllib``, one forward per batch), a TFLite variant (one interpreter
invoke per observation: the variants have a batch-1 input), or no model at all
(``echo``: the transport baseline, action 0). :meth:`BatchModel.act` returns the
greedy actions (a Box policy's: its reference actor's action vectors) and the model
time of the call: the forward (or the invokes) with its input conversion and the
argmax (or the output's dequantization), nothing of the transport.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlperf.tflite.runtime import open_interpreter
from rlperf.tflite.tflite_model import input_encoder, logits_output, output_dequantizer

#: ``ModelSpec.kind`` values.
KINDS = ("torch", "tflite", "echo")


@dataclass(frozen=True)
class ModelSpec:
    """What a replica (or the driver) loads: ``kind`` in :data:`KINDS` and its file."""

    kind: str
    path: str | None
    obs_shape: tuple[int, ...]
    obs_dtype: str
    num_actions: int  # Discrete: actions; Box: action dimensions
    threads: int = 1
    xnnpack: bool = True
    continuous: bool = False  # Box actions: float32 vectors, not argmax

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "obs_shape": list(self.obs_shape)}


class BatchModel:
    """Greedy actions for a batch ``(B, *obs_shape)``; :meth:`act` times itself."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._act = _loader(spec.kind)(spec)

    def act(self, batch: np.ndarray) -> tuple[np.ndarray, float]:
        """(greedy actions ``(B,)`` int64, or a Box policy's ``(B, d)`` float32; model
        milliseconds for the whole batch)."""
        t0 = time.perf_counter_ns()
        actions = self._act(batch)
        return actions, (time.perf_counter_ns() - t0) / 1e6


def load_model(spec: ModelSpec) -> BatchModel:
    """The :class:`BatchModel` of ``spec`` (loads torch or LiteRT as needed)."""
    if spec.kind not in KINDS:
        raise ValueError(f"unknown model kind {spec.kind!r}; expected one of {KINDS}")
    return BatchModel(spec)


def _loader(kind: str) -> Any:
    return {"torch": _torch_act, "tflite": _tflite_act, "echo": _echo_act}[kind]


def _echo_act(spec: ModelSpec) -> Any:
    def act(batch: np.ndarray) -> np.ndarray:
        if spec.continuous:
            return np.zeros((len(batch), spec.num_actions), dtype=np.float32)
        return np.zeros(len(batch), dtype=np.int64)

    return act


def _torch_act(spec: ModelSpec) -> Any:
    # torch only for backend=rllib: a TFLite or echo replica never loads it.
    import torch

    from rlperf.models.policy_file import load_policy

    torch.set_num_threads(int(spec.threads))
    assert spec.path is not None
    net = load_policy(Path(spec.path))

    def act(batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            # Decoded bodies are read-only views of the request bytes: torch wants writable.
            logits = net.logits(torch.from_numpy(np.require(batch, requirements=["C", "W"])))
            if spec.continuous:  # the reference actor (rlperf.models.actor)
                return np.asarray(net.actions_of(logits.numpy()))
            return logits.argmax(dim=1).numpy().astype(np.int64)

    return act


def _tflite_act(spec: ModelSpec) -> Any:

    assert spec.path is not None
    interp, info, _ = open_interpreter(spec.path, spec.threads, spec.xnnpack)
    tensor_in = info.inputs[0]
    output = logits_output(info, spec.num_actions)
    out_index = output.index
    quantize, dequantize = input_encoder(info), output_dequantizer(output)

    def act(batch: np.ndarray) -> np.ndarray:
        if spec.continuous:  # the output is the action: dequantized
            vectors = np.empty((len(batch), spec.num_actions), dtype=np.float32)
            for i, obs in enumerate(batch):
                interp.set_tensor(tensor_in.index, quantize(obs[None]))
                interp.invoke()
                vectors[i] = dequantize(interp.get_tensor(out_index)).ravel()
            return vectors
        actions = np.empty(len(batch), dtype=np.int64)
        for i, obs in enumerate(batch):
            interp.set_tensor(tensor_in.index, quantize(obs[None]))
            interp.invoke()
            actions[i] = int(np.argmax(interp.get_tensor(out_index)))
        return actions

    return act
