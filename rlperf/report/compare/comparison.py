"""How the cells are compared: :func:`compare_cells` groups them by comparison family
and into configurations (repeats pooled), plans the axes that vary and their labels,
and checks their fingerprints; :func:`analyse` estimates, ranks and compares every
family's configurations (:mod:`.findings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rlperf.errors import BaselineError, MixedFingerprintsError
from rlperf.report.compare.axes import AxisPlan, parse_baseline, plan_axes, select_baselines
from rlperf.report.compare.findings import FamilyAnalysis, analyse_family
from rlperf.report.compare.workloads import workload_labels, workload_legend
from rlperf.report.read.cells import Cell
from rlperf.report.read.fingerprints import FingerprintGroup, group_cells
from rlperf.report.stats.repeats import Configuration, group_repeats
from rlperf.vocabulary import Family


@dataclass
class Comparison:
    """How the cells are compared: per family, as configurations (repeats pooled), on the
    axes that vary, within one fingerprint."""

    cells: list[Cell]
    families: dict[str, list[Cell]]
    configurations: dict[str, list[Configuration]]  # family -> its configurations
    plans: dict[str, AxisPlan]
    groups: dict[str, FingerprintGroup]
    fingerprint_of: dict[str, str]  # cell id -> fingerprint group name
    mixed: dict[tuple[str, str], list[str]]  # (family, workload) -> fingerprints mixed there
    workload_of: dict[str, str] = field(default_factory=dict)  # cell id -> workload label
    #: family -> {a workload's short name (its label) -> the whole workload}.
    workload_legend: dict[str, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def configuration_of(self) -> dict[str, Configuration]:
        """cell id -> the configuration it is a run of."""
        return {c.id: conf for confs in self.configurations.values() for conf in confs
                for c in conf.cells}  # fmt: skip


def compare_cells(cells: list[Cell], strict: bool) -> Comparison:
    """Group cells by family and into configurations (repeats: cells that differ only in
    seed, on one fingerprint), plan their axes and labels, and check their fingerprints.

    Raises :class:`MixedFingerprintsError` when ``strict`` and a table would mix
    fingerprints; otherwise that becomes a warning.
    """
    families: dict[str, list[Cell]] = {}
    for c in cells:
        families.setdefault(c.family, []).append(c)
    groups = group_cells(cells)
    fps = {cid: g.name for g in groups.values() for cid in g.cells}
    confs = {fam: group_repeats(cs, fps) for fam, cs in families.items()}
    workload = {cid: w for cs in families.values() for cid, w in workload_labels(cs).items()}
    for fam_confs in confs.values():
        for conf in fam_confs:
            conf.workload = workload[conf.id]
    plans = {fam: plan_axes(cs, confs[fam]) for fam, cs in families.items()}
    mixed = _mixed([c for c in cells if c.completed], fps, workload)
    comparison = Comparison(
        cells,
        families,
        confs,
        plans,
        groups,
        fps,
        mixed,
        workload,
        {fam: workload_legend(cs) for fam, cs in families.items()},
    )
    if mixed:
        where = ", ".join(f"{fam} {model}" for fam, model in sorted(mixed))
        msg = (
            f"cells recorded on different hardware or software are compared in: {where} "
            f"({len(groups)} fingerprints)"
        )
        if strict:
            raise MixedFingerprintsError(msg + "; --strict refuses to compare them")
        comparison.warnings.append(msg + ". Affected tables say so.")
    return comparison


def _mixed(
    cells: Sequence[Cell], fps: dict[str, str], workload: dict[str, str]
) -> dict[tuple[str, str], list[str]]:
    """(family, workload) -> the fingerprints whose cells meet in that comparison."""
    out: dict[tuple[str, str], list[str]] = {}
    keys: dict[tuple[str, str], set[str]] = {}
    for c in cells:
        keys.setdefault((c.family, workload[c.id]), set()).add(fps[c.id])
    for k, names in keys.items():
        if len(names) > 1:
            out[k] = sorted(names)
    return out


def analyse(
    comparison: Comparison, baseline: dict[str, str] | str | None, objective: str | None = None
) -> dict[str, FamilyAnalysis]:
    """Estimates, ranks, speedups and findings of every family (see :mod:`.findings`), each
    workload on its objective (``objective``: ``--objective`` for training); serve cells are
    judged by their rate under the latency bound instead (:mod:`.serve`)."""
    spec = parse_baseline(baseline) if isinstance(baseline, str) else baseline
    baselines = _baselines(comparison, spec) if spec else {}
    return {
        fam: analyse_family(
            fam,
            confs,
            comparison.plans[fam],
            baselines.get(fam),
            objective if fam == Family.training else None,
        )  # fmt: skip
        for fam, confs in comparison.configurations.items()
        if fam != Family.serve
    }


def _baselines(comparison: Comparison, spec: dict[str, str]) -> dict[str, dict[str, str]]:
    """The ``--baseline`` configuration per model of every family; an error if no family has
    one."""
    baselines: dict[str, dict[str, str]] = {}
    misses = 0
    first_of = {cid: conf.id for cid, conf in comparison.configuration_of.items()}
    for fam, cs in comparison.families.items():
        completed = [c for c in cs if c.completed]
        try:
            baselines[fam] = select_baselines(
                completed, spec, comparison.warnings, first_of, comparison.workload_of
            )
        except BaselineError:
            misses += 1
    if misses == len(comparison.families):
        wanted = ",".join(f"{k}={v}" for k, v in spec.items())
        raise BaselineError(f"--baseline {wanted} matches no completed cell")
    return baselines


def configuration_labels(comparison: Comparison) -> dict[str, str]:
    """configuration id -> its label, over every family."""
    return {
        k: v for plan in comparison.plans.values() for k, v in plan.configuration_labels.items()
    }
