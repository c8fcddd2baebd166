"""The compression study's table and its four claims, over trained policies
(``experiment=compression_mujoco`` then ``experiment=compression run=<that sweep>``).

An edge cell knows the training job its policy came from (``summary.json``
``source.identity``: ``algo`` and ``env_id``, and ``source.run``). Cells of one algorithm,
env and backend over several trained policies (seeds) form one row: the return difference
against each policy's own torch reference (``fidelity.return_diff``, paired on the same
seeded episodes) averaged per policy, then over policies as an IQM with its
stratified-bootstrap interval where there are 3 or more policies (a mean, without an
interval, where fewer); size, peak and model RSS, action latency p50/p99 and the CPU's
energy per 1 000 actions averaged over every cell of the row.

The claims of the study users bring (per algorithm and env):

1. dynamic-range PTQ keeps the return best of the quantized variants;
2. static (full-integer) PTQ keeps it worst;
3. quantized variants use more memory than fp32 (peak RSS, the ratio's interval over
   every run of both: :func:`rlperf.stats.intervals.speedup`);
4. pruning shrinks the model (gzip size) but barely moves speed (action p50 within
   ±10 % of fp32's) or energy.

Each is said to hold, not to hold, or not to be decided here (a variant missing, no
interval, energy not measured), with the numbers it rests on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlperf.report.compare.memory import quantized
from rlperf.report.read.cells import Cell
from rlperf.report.stats.robust import MIN_SEEDS, stratified_bootstrap_ci
from rlperf.results.columns import ACTION_MS
from rlperf.results.record import EdgeRecord
from rlperf.specs.backends import BACKENDS
from rlperf.stats import intervals

#: Latency ratio to fp32 within which pruning "barely moves" speed (claim 4).
BARELY = 0.10
_PRUNED = ("prune", "struct")


@dataclass
class StudyRow:
    """One algorithm x env x backend over its trained policies."""

    algo: str
    env: str
    backend: str
    variant: str
    policies: int
    cells: list[Cell] = field(default_factory=list)
    return_diff: float = np.nan
    return_low: float = np.nan
    return_high: float = np.nan
    statistic: str = "mean"  # IQM with >= 3 policies

    @property
    def reference(self) -> bool:
        """The torch policy in RLlib (``backend=rllib``): what the variants are judged by."""
        spec = BACKENDS.get(self.backend)
        return spec is not None and spec.in_rllib

    def values(self, path: tuple[str, ...]) -> list[float]:
        """The finite summary values at ``path`` of the row's cells."""
        got = [_at(c.summary, path) for c in self.cells]  # path: a declared key, then its own
        return [v for v in got if v is not None and np.isfinite(v)]

    def mean(self, path: tuple[str, ...]) -> float:
        """Their mean (NaN where no cell has one)."""
        finite = self.values(path)
        return float(np.mean(finite)) if finite else np.nan


def _at(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    node: Any = summary
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    try:
        return float(node)
    except (TypeError, ValueError):
        return None


PEAK = (EdgeRecord.memory.name, "peak_rss_mb")
MODEL_RSS = (EdgeRecord.memory.name, "model_rss_mb")
SIZE = (EdgeRecord.model_size_bytes.name,)
GZIP = (EdgeRecord.model_gzip_bytes.name,)
P50 = (EdgeRecord.latency.name, ACTION_MS, "p50")
P99 = (EdgeRecord.latency.name, ACTION_MS, "p99")
ENERGY = (EdgeRecord.energy.name, "cpu_energy_per_1k_actions_j")
RETURN_DIFF = (EdgeRecord.fidelity.name, "return_diff")


def _key(cell: Cell) -> tuple[str, str, str] | None:
    """(algo, env id, backend) of an edge cell of a trained policy, or None."""
    edge = cell.record_of(EdgeRecord)
    source = edge.source
    if edge.variant is None or not isinstance(source, dict):
        return None  # (an edge cell names its variant; a rollout's does not)
    identity = dict(source.get("identity") or {})
    for override in source.get("overrides") or ():  # edge cells from before the identity
        key, _, value = str(override).partition("=")  # named them: the training's axes
        identity.setdefault({"algo": "algo", "env.id": "env_id"}.get(key, ""), value)
    algo, env = identity.get("algo"), identity.get("env_id")
    backend = edge.backend
    if algo is None or env is None or backend is None:
        return None
    return str(algo), str(env), str(backend)


def _policy_run(cell: Cell) -> str:
    """The training run an edge cell's policy came from."""
    return str((cell.record_of(EdgeRecord).source or {}).get("run"))


def study_rows(cells: Sequence[Cell]) -> list[StudyRow]:
    """The study's rows, where two or more backends of one algorithm and env were run."""
    groups: dict[tuple[str, str, str], list[Cell]] = {}
    for cell in cells:
        key = _key(cell) if cell.completed else None
        if key is not None:
            groups.setdefault(key, []).append(cell)
    rows: list[StudyRow] = []
    for (algo, env, backend), group in sorted(groups.items()):
        if sum(1 for a, e, _ in groups if (a, e) == (algo, env)) < 2:
            continue
        variant = str(group[0].record_of(EdgeRecord).variant or "torch")
        by_policy: dict[str, list[float]] = {}
        for c in group:
            diff = _at(c.summary, RETURN_DIFF)
            if diff is not None and np.isfinite(diff):
                by_policy.setdefault(_policy_run(c), []).append(diff)
        policies = len({_policy_run(c) for c in group})
        row = StudyRow(algo, env, backend, variant, policies, group)
        per_policy = np.asarray([np.mean(v) for v in by_policy.values()], dtype=float)
        if len(per_policy) >= MIN_SEEDS:
            est = stratified_bootstrap_ci(per_policy, seed=len(rows))
            row.return_diff, row.return_low, row.return_high = est.value, est.low, est.high
            row.statistic = "IQM"
        elif len(per_policy):
            row.return_diff = float(per_policy.mean())
        rows.append(row)
    return rows


def _by_variant(rows: Sequence[StudyRow]) -> dict[str, StudyRow]:
    return {"torch" if r.reference else r.variant: r for r in rows}


def claims(rows: Sequence[StudyRow]) -> list[str]:
    """The four claims, one line each per algorithm x env."""
    out = []
    pairs = sorted({(r.algo, r.env) for r in rows})
    for algo, env in pairs:
        mine = [r for r in rows if (r.algo, r.env) == (algo, env)]
        byv = _by_variant(mine)
        out += [f"{algo} on {env}: " + line for line in _four(byv)]
    return out


def _diff(r: StudyRow) -> str:
    text = f"`{r.backend}` {r.return_diff:+.3g}"
    if np.isfinite(r.return_low):
        text += f" [{r.return_low:.3g}, {r.return_high:.3g}]"
    return text


def _four(byv: dict[str, StudyRow]) -> list[str]:
    quant = [r for v, r in byv.items() if quantized(v) and np.isfinite(r.return_diff)]
    lines = []
    dynamic, int8 = byv.get("dynamic"), byv.get("int8")
    ranked = sorted(quant, key=lambda r: r.return_diff)
    listing = ", ".join(_diff(r) for r in reversed(ranked))
    if dynamic is None or len(quant) < 2:
        lines.append("claim 1 (dynamic PTQ keeps the return best) not decided here: needs "
                     "tflite_dynamic and another quantized variant")  # fmt: skip
    else:
        best = ranked[-1] is dynamic
        lines.append(f"claim 1 (dynamic PTQ keeps the return best) {_verdict(best, ranked)}: "
                     f"{listing}")  # fmt: skip
    if int8 is None or len(quant) < 2:
        lines.append("claim 2 (static PTQ keeps it worst) not decided here: needs tflite_int8 "
                     "and another quantized variant")  # fmt: skip
    else:
        worst = ranked[0] is int8
        lines.append(f"claim 2 (static PTQ keeps it worst) {_verdict(worst, ranked)}: {listing}")
    lines.append(_memory_claim(byv))
    lines.append(_pruning_claim(byv))
    return lines


def _verdict(holds: bool, ranked: Sequence[StudyRow]) -> str:
    """``holds`` / ``does not hold``, and whether the intervals separate the two ends."""
    top, bottom = ranked[-1], ranked[0]
    separate = (
        np.isfinite(top.return_low)
        and np.isfinite(bottom.return_high)
        and (top.return_low > bottom.return_high)
    )
    word = "holds" if holds else "does not hold"
    if not np.isfinite(top.return_low):
        return f"{word} by the estimates (no interval: fewer than {MIN_SEEDS} policies)"
    return word if separate else f"{word} by the estimates, the intervals overlapping"


def _memory_claim(byv: dict[str, StudyRow]) -> str:
    fp32 = byv.get("fp32")
    quant = [r for v, r in byv.items() if quantized(v)]
    if fp32 is None or not quant:
        return "claim 3 (quantized uses more memory) not decided here: needs fp32 and a " \
               "quantized variant"  # fmt: skip
    base = intervals.across_runs(fp32.values(PEAK))
    parts, more, less, shown = [], [], [], 0
    for r in quant:
        ratio = intervals.speedup(intervals.across_runs(r.values(PEAK)), base)
        if not np.isfinite(ratio.value):
            continue
        text = f"`{r.backend}` {ratio.value:.3f}x"
        if ratio.has_ci:
            shown += 1
            text += f" [{ratio.low:.3f}, {ratio.high:.3f}]"
            if ratio.low > 1:
                more.append(r.backend)
            elif ratio.high < 1:
                less.append(r.backend)
        parts.append(text)
    if more:
        verdict = "holds for " + ", ".join(f"`{b}`" for b in more)
    elif shown and len(less) == shown:
        verdict = "does not hold: every quantized variant used less"
    elif shown:
        verdict = "not shown here (an interval holds 1)"
    else:
        verdict = "not decided here (one run each: no interval)"
    return f"claim 3 (quantized uses more memory than fp32, peak RSS) {verdict}: " + "; ".join(
        parts
    )


def _pruning_claim(byv: dict[str, StudyRow]) -> str:
    fp32 = byv.get("fp32")
    pruned = [r for v, r in byv.items() if v.startswith(_PRUNED)]
    if fp32 is None or not pruned:
        return "claim 4 (pruning shrinks the model, barely moves speed or energy) not decided " \
               "here: needs fp32 and a pruned variant"  # fmt: skip
    parts, holds = [], True
    for r in pruned:
        size = r.mean(GZIP) / fp32.mean(GZIP)
        speed = r.mean(P50) / fp32.mean(P50)
        holds = holds and size < 1 and abs(speed - 1) <= BARELY
        energy = r.mean(ENERGY) / fp32.mean(ENERGY)
        parts.append(f"`{r.backend}` gzip {size:.2f}x, action p50 {speed:.2f}x"
                     + (f", energy {energy:.2f}x" if np.isfinite(energy) else ""))  # fmt: skip
    measured = np.isfinite(fp32.mean(ENERGY))
    word = "holds" if holds else "does not hold"
    tail = "" if measured else " (energy not measured here: speed and size only)"
    return (f"claim 4 (pruning shrinks the model, barely moves speed or energy: p50 within "
            f"±{BARELY:.0%} of fp32's) {word}{tail}: " + "; ".join(parts))  # fmt: skip
