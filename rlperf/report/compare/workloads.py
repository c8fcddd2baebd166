"""Comparison sets: cells are ranked against each other only when they do the same work.

A cell's *workload* is what defines the work it measures (SPEC §5): its model, its
env protocol (``summary.json`` ``env_protocol``: the env id and version, frameskip,
sticky actions, life loss, reward clipping, observation; :mod:`rlperf.results.protocol`)
and, for training, its algorithm, the work it asks of an iteration
(``algo.train_batch_size``) and its target return. Configurations of one family and one
workload form one comparison: one table, one ranking, one set of findings. Cells of
different workloads are never ranked against each other; the report puts them side by
side only on a work-normalised throughput that fits both (emulator frames per second,
:mod:`rlperf.report.compare.across`).

A workload's label is a short name: the model and each other part that varies between
the family's workloads where the parts before it do not determine it (the model alone when
nothing else does), so one sweep keeps its one table per model; and of the env protocol
only its name and the fields that differ between protocols of that name (``model1 · Pong
v0``, not the protocol's seven fields). :func:`workload_legend` maps each short name to the
whole workload, which the report gives once (the title's *Workloads* legend).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlperf.report.read.cells import Cell
from rlperf.results.protocol import protocol_key, protocol_parts
from rlperf.results.record import TrainRecord
from rlperf.vocabulary import Family

#: The parts of a workload, in the order labels name them.
PARTS = ("model", "algo", "env", "batch", "target")

#: The parts that define an inference cell's work (a latency per action: the algorithm
#: that trained the policy and its training batch do not change the work of one action).
INFERENCE_PARTS = ("model", "env")


@dataclass(frozen=True)
class Workload:
    """One cell's workload: ``values`` (part -> comparable value) and their ``texts``."""

    values: tuple[tuple[str, str], ...]
    texts: dict[str, str]
    #: The env protocol's parts (:func:`~rlperf.results.protocol.protocol_parts`), its
    #: name first: what the short name picks from.
    env_parts: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """A stable key: equal for cells that do the same work."""
        return json.dumps(self.values)


def _batch(cell: Cell) -> Any:
    return cell.leaves.get("algo.train_batch_size")


def _target(cell: Cell) -> Any:
    return (cell.record_of(TrainRecord).stop or {}).get("episode_return")


def workload_of(cell: Cell) -> Workload:
    """The cell's workload (:data:`PARTS` for training, :data:`INFERENCE_PARTS` else)."""
    protocol = cell.env_protocol
    env_parts = (protocol_parts(protocol) if protocol
                 else [str(cell.axes.get("env") or "env unknown")])  # fmt: skip
    env_text = " · ".join(env_parts)
    env_key = protocol_key(protocol) if protocol else env_text
    batch, target = _batch(cell), _target(cell)
    parts: dict[str, tuple[str, str]] = {
        "model": (str(cell.axes.get("model")), str(cell.axes.get("model"))),
        "algo": (str(cell.axes.get("algo") or ""), str(cell.axes.get("algo") or "algo unknown")),
        "env": (env_key, env_text),
        "batch": (str(batch), f"{int(batch):,} env steps per batch" if _number(batch)
                  else "batch unknown"),
        "target": (str(target), f"target {float(target):g}" if _number(target) else "no target"),
    }  # fmt: skip
    names = PARTS if cell.family == Family.training else INFERENCE_PARTS
    return Workload(tuple((n, parts[n][0]) for n in names), {n: parts[n][1] for n in names},
                    tuple(env_parts))  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def workload_labels(cells: Sequence[Cell]) -> dict[str, str]:
    """cell id -> its workload's short name within ``cells`` (one family): the model, then
    each other part whose value differs between the cells' workloads, the env by its
    :func:`short_env_texts`."""
    return {cid: short for cid, (short, _) in _names(cells).items()}


def workload_legend(cells: Sequence[Cell]) -> dict[str, str]:
    """short name -> the whole workload (every part, the full env protocol), for the
    workloads of ``cells`` (one family)."""
    return dict(_names(cells).values())


def _names(cells: Sequence[Cell]) -> dict[str, tuple[str, str]]:
    """cell id -> (short name, whole workload)."""
    workloads = {c.id: workload_of(c) for c in cells}
    # A part is named where it is not already determined by the parts named before it
    # (the model's observation size is part of the protocol: a 252 px model1 is not
    # another env).
    varying = ["model"]
    for name in PARTS[1:]:
        seen: dict[tuple[str | None, ...], set[str | None]] = {}
        for w in workloads.values():
            values = dict(w.values)
            seen.setdefault(tuple(values.get(n) for n in varying), set()).add(values.get(name))
        if any(len(v) > 1 for v in seen.values()):
            varying.append(name)
    envs = _short_envs(list(workloads.values()))

    def short(w: Workload) -> str:
        texts = {**w.texts, "env": envs.get(w.env_parts, w.texts.get("env", ""))}
        return " · ".join(texts[n] for n in varying if n in texts)

    labels = {cid: short(w) for cid, w in workloads.items()}
    # Two workloads whose texts read alike (a protocol field the text leaves out) stay apart.
    keys_of: dict[str, list[str]] = {}
    for cid, w in workloads.items():
        keys = keys_of.setdefault(labels[cid], [])
        if w.key not in keys:
            keys.append(w.key)
    for cid, w in workloads.items():
        keys = keys_of[labels[cid]]
        if len(keys) > 1:
            labels[cid] += f" #{keys.index(w.key) + 1}"
    return {cid: (labels[cid], " · ".join(w.texts.values())) for cid, w in workloads.items()}


def short_env_texts(cells: Sequence[Cell]) -> dict[tuple[str, ...], str]:
    """env protocol parts -> the protocol's short name among ``cells``' protocols."""
    return _short_envs([workload_of(c) for c in cells])


def _short_envs(workloads: Sequence[Workload]) -> dict[tuple[str, ...], str]:
    """Each protocol by its name and the parts that not every protocol of that name shares
    (``Pong v0 · 252px`` beside ``Pong v0`` at 84 px): what tells it from the others."""
    by_name: dict[str, set[tuple[str, ...]]] = {}
    for w in workloads:
        if w.env_parts:
            by_name.setdefault(w.env_parts[0], set()).add(w.env_parts)
    out: dict[tuple[str, ...], str] = {}
    for name, protocols in by_name.items():
        shared = set.intersection(*(set(p[1:]) for p in protocols))
        for p in protocols:
            out[p] = " · ".join([name, *(x for x in p[1:] if x not in shared)])
    return out
