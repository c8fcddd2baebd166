"""Did a quantized variant use more memory than fp32? The compression study's surprising
claim ("quantized models can use more memory than float ones: the libraries' overhead"),
confirmed or refuted per policy and env (one workload of the inference family).

Each quantized variant (dynamic-range, full int8, QAT, a pruned int8 file, int16x8) is set
against the fp32 variant of the same workload run with the same threads and heads, on the
peak RSS of the benchmark's own process (``summary.json`` ``memory.peak_rss_mb``: Python,
the env, the runtime and the model; each variant in a fresh process with
``edge.isolate=true``). The ratio quantized / fp32 has the interval of
:func:`rlperf.stats.intervals.speedup` over the two configurations' runs
(:func:`~rlperf.stats.intervals.across_runs`); with one run of either there is no
interval, and the finding says so: a difference of one run each is not evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlperf.report.read.cells import Cell
from rlperf.report.stats.repeats import Configuration
from rlperf.results.record import EdgeRecord
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate

#: ``summary.json`` ``variant`` names of the quantized variants (a pruned int8 file's is
#: ``prune75_int8``).
QUANTIZED = frozenset({"dynamic", "int8", "qat", "int16x8"})

#: The memory every verdict is on: ``summary.json`` ``memory.peak_rss_mb``.
MEMORY_KEY = "peak_rss_mb"


def quantized(variant: str) -> bool:
    """Whether a variant's weights (and maybe activations) are quantized."""
    return variant in QUANTIZED or variant.endswith("_int8")


def _variant(conf: Configuration) -> str:
    cell = conf.completed[0] if conf.completed else None
    return str(cell.record_of(EdgeRecord).variant or "") if cell is not None else ""


def _pairing(cell: Cell) -> tuple[object, object]:
    """What must match between a quantized variant and its fp32: threads and heads."""
    edge = cell.record_of(EdgeRecord)
    return edge.threads, edge.heads


def _memory(conf: Configuration) -> Estimate:
    values = [
        float((c.record_of(EdgeRecord).memory or {}).get(MEMORY_KEY, np.nan))
        for c in conf.completed
    ]
    return intervals.across_runs(values)


def memory_verdicts(
    group: Sequence[Configuration], label: dict[str, str]
) -> list[tuple[str, Estimate, str]]:
    """``(label, ratio quantized / fp32 of peak RSS, verdict)`` for every quantized
    configuration of ``group`` (one workload) with an fp32 configuration of the same threads
    and heads. ``verdict``: ``more`` or ``less`` where the ratio's interval excludes 1,
    ``no difference shown`` where it holds 1, ``one run`` where there is no interval."""
    fp32 = {_pairing(k.completed[0]): k for k in group if k.completed and _variant(k) == "fp32"}
    out = []
    for conf in group:
        if not conf.completed or not quantized(_variant(conf)):
            continue
        base = fp32.get(_pairing(conf.completed[0]))
        if base is None:
            continue
        ratio = intervals.speedup(_memory(conf), _memory(base))  # quantized / fp32
        if not np.isfinite(ratio.value):
            continue
        if not ratio.has_ci:
            verdict = "one run"
        elif ratio.low > 1:
            verdict = "more"
        elif ratio.high < 1:
            verdict = "less"
        else:
            verdict = "no difference shown"
        out.append((label[conf.id], ratio, verdict))
    return out


def _ratio_text(ratio: Estimate) -> str:
    text = f"{ratio.value:.3f}x"
    if ratio.has_ci:
        text += f" [{ratio.low:.3f}, {ratio.high:.3f}] (at least {ratio.runs} runs each)"
    return text


def memory_finding_texts(
    family: str, model: str, group: Sequence[Configuration], label: dict[str, str]
) -> tuple[list[str], str, str, tuple[float, ...]] | None:
    """The memory finding of one workload: (cells, text, headline, values), or None where
    it has no quantized variant beside an fp32 one."""
    verdicts = memory_verdicts(group, label)
    if not verdicts:
        return None
    more = [v for v in verdicts if v[2] == "more"]
    shown = [v for v in verdicts if v[2] in ("more", "less")]
    parts = "; ".join(f"`{name}` {_ratio_text(r)} ({verdict})" for name, r, verdict in verdicts)
    if more:
        claim = "confirmed here: " + ", ".join(f"`{n}`" for n, _, _ in more) + " used more"
    elif shown:
        claim = "refuted here: every quantized variant whose difference shows used less"
    else:
        claim = "not shown here (no interval excludes 1; repeat the cells: hydra.sweeper.repeats)"
    text = (
        f"{family.capitalize()}, {model}: peak memory (RSS of the benchmark process) of each "
        f"quantized variant against fp32's, as a ratio: {parts}. The study's claim that "
        f"quantized models can use more memory than float ones is {claim}."
    )
    top = max(verdicts, key=lambda v: v[1].value)
    name, ratio, verdict = top
    if more:
        headline = f"{ratio.value:.2f}x fp32's memory: `{name}` used more than fp32 in {model}."
    elif shown:
        headline = f"Quantized used less memory than fp32 in {model} ({_ratio_text(ratio)})."
    else:
        headline = (
            f"{ratio.value:.2f}x fp32's memory at most ({verdict}): no quantized variant of "
            f"{model} shown to use more."
        )
    named = {v[0] for v in verdicts} | {label[k.id] for k in group if _variant(k) == "fp32"}
    cells = [c.id for k in group for c in k.completed if label.get(k.id) in named]
    return cells, text, headline, tuple(v[1].value for v in verdicts)
