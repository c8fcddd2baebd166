"""``rlperf-report CANDIDATE --gate BASELINE``: performance regressions, for CI.

The candidate (the report's paths) is compared with a stored baseline folder
(an earlier run or sweep of the same configurations). Configurations are
matched on family and :func:`~rlperf.report.stats.repeats.configuration_key` (every
config value except ``seed``, input locations and the ``hydra`` / ``ray``
nodes), and each matched pair gets the speedup ``baseline / candidate`` of the
family's objective (time per iteration, latency per action) with its interval
(:func:`rlperf.stats.intervals.speedup`; run to run where a side ran several
times). With a tolerance ``t`` (default 5 %), a pair is a

- ``regression`` when the speedup's upper bound is below ``1 - t``: slower by
  more than the tolerance, beyond the noise;
- ``improvement`` when its lower bound is above ``1 + t``;
- ``tie`` otherwise (its interval reaches into the tolerance band).

Without an interval (a side with fewer than 2 samples) the point estimate
decides, as in rankings. A baseline configuration without a completed,
measured candidate run is ``missing``; a candidate configuration the baseline
lacks is ``new``. The gate fails on any regression or missing configuration
(``rlperf-report`` exits 1); ties, improvements and new configurations pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlperf.errors import GateError, MixedFingerprintsError
from rlperf.report.compare.findings import FamilyAnalysis
from rlperf.report.stats import estimates
from rlperf.report.stats.repeats import Configuration
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate

#: Default ``--tolerance``: slowdowns within 5 % never fail the gate.
DEFAULT_TOLERANCE = 0.05

#: Verdicts that fail the gate.
FAILING = ("regression", "missing")


def parse_tolerance(text: str | float) -> float:
    """``5%``, ``5 %`` or ``0.05`` -> 0.05; it must lie in [0, 1)."""
    raw = str(text).strip()
    try:
        value = float(raw.removesuffix("%").strip()) / (100 if raw.endswith("%") else 1)
    except ValueError as exc:
        raise GateError(f"--tolerance: expected e.g. 5% or 0.05, got {text!r}") from exc
    if not 0 <= value < 1:
        raise GateError(f"--tolerance must be at least 0% and below 100%, got {text!r}")
    return value


@dataclass
class Side:
    """One side of the gate: its analyses and configuration labels (id -> label)."""

    analyses: dict[str, FamilyAnalysis]
    labels: dict[str, str]

    def configurations(self) -> list[Configuration]:
        return [c for a in self.analyses.values() for c in a.configurations.values()]

    def estimate(self, conf: Configuration) -> Estimate | None:
        e = self.analyses[conf.family].estimates.get(conf.id)
        return e if e is not None and np.isfinite(e.value) else None


@dataclass
class GateRow:
    """One configuration's verdict."""

    verdict: str
    family: str
    model: str
    label: str
    candidate: Configuration | None
    baseline: Configuration | None
    speedup: Estimate | None = None
    candidate_estimate: Estimate | None = None
    baseline_estimate: Estimate | None = None
    note: str = ""


@dataclass
class GateResult:
    """Every verdict of a gate run, and whether it failed."""

    baseline: Path
    tolerance: float
    rows: list[GateRow] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        """How many configurations got ``verdict``."""
        return sum(r.verdict == verdict for r in self.rows)

    @property
    def failed(self) -> bool:
        """True on any regression or missing configuration."""
        return any(r.verdict in FAILING for r in self.rows)


def verdict(sp: Estimate, tolerance: float) -> str:
    """regression, improvement or tie of a speedup (baseline / candidate) at ``tolerance``."""
    low, high = (sp.low, sp.high) if sp.has_ci else (sp.value, sp.value)
    if high < 1 - tolerance:
        return "regression"
    if low > 1 + tolerance:
        return "improvement"
    return "tie"


def compare(
    candidate: Side, baseline: Side, baseline_path: Path, tolerance: float, strict: bool = False
) -> GateResult:
    """Match the two sides' configurations and judge each pair (see module docstring).

    Raises :class:`GateError` when no configuration matches, and
    :class:`MixedFingerprintsError` when ``strict`` and a pair was recorded on
    different hardware or software.
    """
    result = GateResult(baseline_path, tolerance)
    base_by_key: dict[tuple[str, str], list[Configuration]] = {}
    for conf in baseline.configurations():
        base_by_key.setdefault((conf.family, conf.key), []).append(conf)
    matched: set[str] = set()
    for conf in candidate.configurations():
        options = base_by_key.get((conf.family, conf.key), [])
        base = _same_machine(conf, options)
        if base is not None:
            matched.add(base.id)
        result.rows.append(_judge(conf, base, candidate, baseline, tolerance, strict))
    for conf in baseline.configurations():
        if conf.id not in matched and baseline.estimate(conf) is not None:
            result.rows.append(GateRow("missing", conf.family, conf.model,
                                       baseline.labels.get(conf.id, conf.id), None, conf,
                                       note="not in the candidate"))  # fmt: skip
    if not any(r.candidate is not None and r.baseline is not None for r in result.rows):
        raise GateError(
            f"--gate {baseline_path}: no configuration of the candidate is in the baseline "
            "(configurations match on every config value except seed, input locations and "
            "the hydra / ray nodes)"
        )
    order = {"regression": 0, "missing": 1, "tie": 2, "improvement": 3, "new": 4}
    result.rows.sort(key=lambda r: (order[r.verdict], r.family, r.model, r.label))
    return result


def _same_machine(conf: Configuration, options: list[Configuration]) -> Configuration | None:
    """The baseline configuration on the candidate's hardware and software, else the first."""
    fp = conf.cells[0].fingerprint
    same = [o for o in options if o.cells[0].fingerprint == fp]
    return next(iter(same or options), None)


def _judge(
    conf: Configuration,
    base: Configuration | None,
    candidate: Side,
    baseline: Side,
    tolerance: float,
    strict: bool,
) -> GateRow:
    """The verdict of one candidate configuration against its baseline match (or none)."""
    label = candidate.labels.get(conf.id, conf.id)
    row = GateRow("new", conf.family, conf.model, label, conf, base)
    if base is None:
        row.note = "not in the baseline"
        return row
    if base.cells[0].fingerprint != conf.cells[0].fingerprint:
        if strict:
            raise MixedFingerprintsError(
                f"--gate: `{label}` was recorded on different hardware or software than its "
                "baseline; --strict refuses to compare them"
            )
        row.note = "recorded on different hardware or software"
    row.candidate_estimate, row.baseline_estimate = (
        candidate.estimate(conf),
        baseline.estimate(base),
    )
    if row.candidate_estimate is None or row.baseline_estimate is None:
        row.verdict = "missing" if row.candidate_estimate is None else "new"
        row.note = "no completed, measured run in the " + (
            "candidate" if row.candidate_estimate is None else "baseline"
        )
        return row
    row.speedup = intervals.speedup(row.baseline_estimate, row.candidate_estimate)
    row.verdict = verdict(row.speedup, tolerance)
    return row


def _ratio(e: Estimate | None) -> str:
    if e is None:
        return ""
    if not e.has_ci:
        return f"{e.value:.3f}× (no interval)"
    note = f" ({estimates.ONE_RUN})" if e.one_run else ""
    return f"{e.value:.3f}× [{e.low:.3f}, {e.high:.3f}]{note}"


def _runs(e: Estimate | None) -> str:
    return "" if e is None else f"{e.runs} run" + ("s" if e.runs > 1 else "")


def lines(result: GateResult, units: dict[str, str]) -> list[str]:
    """What ``rlperf-report --gate`` prints: a headline, one line per configuration, the verdict."""
    verdicts = ("regression", "missing", "tie", "improvement", "new")
    counts = ", ".join(f"{result.count(v)} {v}" for v in verdicts)
    out = [
        f"gate: candidate vs baseline {result.baseline} (tolerance "
        f"{100 * result.tolerance:g}%, {100 * intervals.CONFIDENCE:g}% intervals): {counts}"
    ]
    for r in result.rows:
        unit = units.get(r.family, "")
        text = f"{r.verdict.upper():<12} {r.family} {r.label}"
        if r.speedup is not None and r.candidate_estimate and r.baseline_estimate:
            text += (
                f": speedup {_ratio(r.speedup)} (candidate {r.candidate_estimate.value:.4g} "
                f"{unit}, {_runs(r.candidate_estimate)}; baseline "
                f"{r.baseline_estimate.value:.4g} {unit}, {_runs(r.baseline_estimate)})"
            )
        out.append(text + (f" [{r.note}]" if r.note else ""))
    failing = [f"{result.count(v)} {v}" for v in FAILING if result.count(v)]
    out.append("gate: FAILED (" + ", ".join(failing) + ")" if failing else
               f"gate: passed (no regression beyond {100 * result.tolerance:g}%)")  # fmt: skip
    return out


def table(result: GateResult) -> pd.DataFrame:
    """``gate.csv``: one row per configuration with both sides' estimates and the speedup."""
    rows = []
    for r in result.rows:
        row: dict[str, object] = {
            "verdict": r.verdict, "family": r.family, "model": r.model, "label": r.label,
            "candidate": r.candidate.id if r.candidate else None,
            "baseline": r.baseline.id if r.baseline else None,
            "tolerance": result.tolerance, "note": r.note,
        }  # fmt: skip
        for name, e in (("speedup", r.speedup), ("candidate", r.candidate_estimate),
                        ("baseline", r.baseline_estimate)):  # fmt: skip
            value = "speedup" if name == "speedup" else f"{name}_value"
            row[value] = e.value if e else np.nan
            row[f"{name}_ci_low"] = e.low if e else np.nan
            row[f"{name}_ci_high"] = e.high if e else np.nan
            if name != "speedup":
                row[f"{name}_runs"] = e.runs if e else None
        rows.append(row)
    return pd.DataFrame(rows)
