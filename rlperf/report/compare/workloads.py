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

A workload's label names the model and each other part that varies between the family's
workloads where the parts before it do not determine it (the model alone when nothing
else does), so one sweep keeps its one table per model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlperf.report.read.cells import Cell
from rlperf.results.protocol import protocol_key, protocol_text

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

    @property
    def key(self) -> str:
        """A stable key: equal for cells that do the same work."""
        return json.dumps(self.values)


def _batch(cell: Cell) -> Any:
    return cell.leaves.get("algo.train_batch_size")


def _target(cell: Cell) -> Any:
    return (cell.summary.get("stop") or {}).get("episode_return")


def workload_of(cell: Cell) -> Workload:
    """The cell's workload (:data:`PARTS` for training, :data:`INFERENCE_PARTS` else)."""
    protocol = cell.env_protocol
    env_text = protocol_text(protocol) if protocol else str(cell.axes.get("env") or "env unknown")
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
    names = PARTS if cell.family == "training" else INFERENCE_PARTS
    return Workload(tuple((n, parts[n][0]) for n in names), {n: parts[n][1] for n in names})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def workload_labels(cells: Sequence[Cell]) -> dict[str, str]:
    """cell id -> its workload's label within ``cells`` (one family): the model, then each
    other part whose value differs between the cells' workloads."""
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
    labels = {
        cid: " · ".join(w.texts[n] for n in varying if n in w.texts) for cid, w in workloads.items()
    }
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
    return labels


def held_constant(cells: Sequence[Cell]) -> dict[str, str]:
    """What every cell of one comparison shares (part -> text), for its table's caption."""
    if not cells:
        return {}
    texts = [workload_of(c).texts for c in cells]
    first = texts[0]
    return {n: t for n, t in first.items() if all(x.get(n) == t for x in texts)}
