"""The library entry point: :func:`build_report` reads cells and writes the report.

Steps, each a function here: :func:`read_cells` (discover and read; corrupt
cells are skipped and listed) → :func:`compare_cells` (group by comparison
family and into configurations, repeats pooled; choose the axes that vary and
build labels, compare fingerprints: ``strict`` refuses mixtures) →
:func:`analyse` (estimates, ranks, speedups and findings) → :func:`gate_against`
(``--gate``: regressions against a baseline folder) → :func:`write_tables` →
:func:`draw_figures` → the document (:mod:`rlperf.report.document`) rendered
as report.md and report.html.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlperf.config.names import REMOVED_IN
from rlperf.report import energy, render, tables
from rlperf.report import figures as figs
from rlperf.report import gate as gate_mod
from rlperf.report.axes import AxisPlan, BaselineError, parse_baseline, plan_axes, select_baselines
from rlperf.report.cells import Cell
from rlperf.report.discover import CellRef, Discovery, NoRunsFoundError, Skipped, discover
from rlperf.report.document import document
from rlperf.report.findings import FamilyAnalysis, Finding, analyse_family
from rlperf.report.fingerprints import (
    FingerprintGroup,
    MixedFingerprintsError,
    group_cells,
)
from rlperf.report.gate import DEFAULT_TOLERANCE, GateResult
from rlperf.report.legacy import is_legacy, load_legacy
from rlperf.report.load import CellError, load_rlperf_cell
from rlperf.report.repeats import Configuration, group_repeats
from rlperf.report.search import SearchResult, draw_search_figures, read_searches
from rlperf.report.serve import FAMILY as SERVE_FAMILY
from rlperf.report.serve import ServeTables, draw_serve_figures, write_serve_tables
from rlperf.report.targets import targets_table
from rlperf.runs.layout import EXCLUDED_COLUMN

Progress = Callable[[str], None]

log = logging.getLogger("rlperf")


@dataclass
class ReportResult:
    """Everything a report produced (tables in memory and the files written)."""

    out: Path
    cells: list[Cell]
    skipped: list[Skipped]
    runs: pd.DataFrame
    iterations: pd.DataFrame
    latency: pd.DataFrame
    figures: dict[str, Path]
    figures_skipped: dict[str, str]
    findings: list[Finding]
    warnings: list[str]
    fingerprint_groups: dict[str, FingerprintGroup]
    mixed: dict[tuple[str, str], list[str]]
    analyses: dict[str, FamilyAnalysis]
    configurations: pd.DataFrame = field(default_factory=pd.DataFrame)
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)  # rlperf.report.targets
    gate: GateResult | None = None
    files: list[Path] = field(default_factory=list)
    serve: ServeTables | None = None
    searches: list[SearchResult] = field(default_factory=list)  # rlperf.report.search
    markdown: Path | None = None
    html: Path | None = None


def load_cells(
    refs: Sequence[CellRef], progress: Progress | None = None, legacy_timers: str = "per_iteration"
) -> tuple[list[Cell], list[Skipped]]:
    """Read every cell; a cell that fails to read is returned as :class:`Skipped`."""
    cells: list[Cell] = []
    skipped: list[Skipped] = []
    step = max(1, len(refs) // 10)
    for i, ref in enumerate(refs, 1):
        try:
            cell = load_legacy(ref, legacy_timers) if is_legacy(ref) else load_rlperf_cell(ref)
        except CellError as exc:
            skipped.append(Skipped(ref.path, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a broken cell must never break the report
            skipped.append(Skipped(ref.path, f"unexpected {exc.__class__.__name__}: {exc}"))
        else:
            cells.append(cell)
        if progress is not None and (i % step == 0 or i == len(refs)):
            progress(f"read {i}/{len(refs)} cells ({len(skipped)} skipped)")
    return dedupe(cells, skipped)


def dedupe(cells: list[Cell], skipped: list[Skipped]) -> tuple[list[Cell], list[Skipped]]:
    """Keep one copy of a run found twice (same ``run_key``); list the others as skipped.

    The 2021 study's ``volta1_cpus/*_no_cpu_limit_8_workers`` runs are byte-identical
    copies of ``volta1_def/*_8_workers`` runs; counting them twice would bias rankings.
    """
    kept: list[Cell] = []
    first: dict[str, Cell] = {}
    for cell in cells:
        other = first.get(cell.run_key) if cell.run_key else None
        if other is None:
            if cell.run_key:
                first[cell.run_key] = cell
            kept.append(cell)
        else:
            skipped.append(
                Skipped(
                    cell.path,
                    f"same run as `{other.id}` ({cell.run_key}); counted once",
                    duplicate=True,
                )
            )
    return kept, skipped


def read_cells(
    paths: Sequence[Path], legacy_timers: str, progress: Progress | None = None
) -> tuple[Discovery, list[Cell], list[Skipped]]:
    """Discover and read every cell under ``paths``; raise if none could be read."""
    found = discover(paths, progress)
    cells, skipped = load_cells(found.refs, progress, legacy_timers)
    skipped = [*found.skipped, *skipped]
    if not cells:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:5])
        raise NoRunsFoundError(f"no readable cell under {', '.join(map(str, paths))} ({reasons})")
    return found, cells, skipped


def default_out_dir(first_path: Path) -> Path:
    """``report/`` inside the first input folder (next to it for a file)."""
    first = first_path.resolve()
    return (first if first.is_dir() else first.parent) / "report"


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
    mixed: dict[tuple[str, str], list[str]]  # (family, model) -> fingerprints mixed there
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
    plans = {fam: plan_axes(cs, confs[fam]) for fam, cs in families.items()}
    mixed = _mixed([c for c in cells if c.completed], fps)
    comparison = Comparison(cells, families, confs, plans, groups, fps, mixed)
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


def _mixed(cells: Sequence[Cell], fps: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    keys: dict[tuple[str, str], set[str]] = {}
    for c in cells:
        keys.setdefault((c.family, str(c.axes.get("model"))), set()).add(fps[c.id])
    for k, names in keys.items():
        if len(names) > 1:
            out[k] = sorted(names)
    return out


def analyse(
    comparison: Comparison, baseline: dict[str, str] | str | None
) -> dict[str, FamilyAnalysis]:
    """Estimates, ranks, speedups and findings of every family (see :mod:`.findings`); serve
    cells are judged by their rate under the latency bound instead (:mod:`.serve`)."""
    spec = parse_baseline(baseline) if isinstance(baseline, str) else baseline
    baselines = _baselines(comparison, spec) if spec else {}
    return {
        fam: analyse_family(fam, confs, comparison.plans[fam], baselines.get(fam))
        for fam, confs in comparison.configurations.items()
        if fam != SERVE_FAMILY
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
            baselines[fam] = select_baselines(completed, spec, comparison.warnings, first_of)
        except BaselineError:
            misses += 1
    if misses == len(comparison.families):
        wanted = ",".join(f"{k}={v}" for k, v in spec.items())
        raise BaselineError(f"--baseline {wanted} matches no completed cell")
    return baselines


@dataclass
class Tables:
    """The report's tidy tables (docs/report.md) and the files they were written to."""

    runs: pd.DataFrame
    configurations: pd.DataFrame
    iterations: pd.DataFrame
    latency: pd.DataFrame
    files: list[Path]
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)


def write_tables(
    comparison: Comparison,
    analyses: dict[str, FamilyAnalysis],
    out_dir: Path,
    progress: Progress | None = None,
    judged: GateResult | None = None,
) -> Tables:
    """runs, configurations, iterations and latency as CSV + Parquet (an empty table is not
    written)."""
    if progress is not None:
        progress("writing tables")
    out_dir.mkdir(parents=True, exist_ok=True)
    cells, plans, fps = comparison.cells, comparison.plans, comparison.fingerprint_of
    runs = tables.runs_table(cells, plans, fps, analyses)
    data = Tables(
        runs=runs,
        configurations=tables.configurations_table(runs, analyses, plans),
        iterations=tables.iterations_table(cells, plans, fps),
        latency=tables.latency_table(cells, plans, fps),
        files=[],
    )
    data.targets = targets_table(cells, runs)
    for name in ("runs", "configurations", "iterations", "latency", "targets"):
        df = getattr(data, name)
        if name == "runs" or not df.empty:
            data.files += tables.write_table(df, out_dir, name)
    if judged is not None:
        data.files += tables.write_table(gate_mod.table(judged), out_dir, "gate")
    return data


def draw_figures(
    comparison: Comparison,
    analyses: dict[str, FamilyAnalysis],
    data: Tables,
    out_dir: Path,
    progress: Progress | None = None,
) -> tuple[dict[str, Path], dict[str, str]]:
    """Draw every figure that applies into ``out_dir/figures`` (see :mod:`.figures`).

    Returns (name -> PNG path, name -> why it was not drawn).
    """
    if progress is not None:
        progress("drawing figures")
    ctx = figs.FigureContext(
        iterations=_without_workers(comparison, data.iterations, "cell"),
        latency=data.latency,
        runs=data.runs,
        order={
            (fam, m): o
            for fam, cs in comparison.configurations.items()
            for m, o in _order(analyses.get(fam), cs, comparison.plans[fam]).items()
        },
        config_colors=figs.config_palette(
            [comparison.plans[c.family].configs[c.id] for c in comparison.cells]
        ),
        mixed_note=_mixed_notes(comparison.mixed),
        configurations=_without_workers(comparison, data.configurations, "configuration"),
    )
    ctx.power, ctx.power_note = _power(comparison)
    return figs.draw_all(ctx, out_dir / "figures")


def _without_workers(comparison: Comparison, df: pd.DataFrame, id_col: str) -> pd.DataFrame:
    """``df`` plus each row's training configuration label without workers and seed
    (``config_wo_workers``; ``id_col`` holds a cell id)."""
    if df.empty or "training" not in comparison.plans:
        return df
    plan = comparison.plans["training"]
    by_id = {c.id: c for c in comparison.cells}
    wo = {
        cid: plan.config_without({**by_id[cid].leaves, **by_id[cid].axes}, ["workers", "seed"])
        for cid in plan.labels
    }
    return df.assign(config_wo_workers=df[id_col].map(wo))


def _power(comparison: Comparison) -> tuple[pd.DataFrame, str]:
    """Every completed run's GPU power over time (telemetry.csv), and, when no run has
    any, why (the runs' reasons, e.g. the fingerprint's nvml_unavailable_reason)."""
    frames: list[pd.DataFrame] = []
    reasons: dict[str, int] = {}
    for c in comparison.cells:
        if not c.completed:
            continue
        timeline = energy.power_timeline(c.telemetry)
        if timeline.empty:
            why = energy.unavailable_reason(c) or "no GPU power in telemetry.csv"
            reasons[why] = reasons.get(why, 0) + 1
            continue
        plan = comparison.plans[c.family]
        frames.append(
            timeline.assign(
                cell=c.id,
                label=plan.labels[c.id],
                family=c.family,
                config=plan.configs[c.id],
                model=str(c.axes.get("model")),
            )
        )
    note = "no GPU power recorded: " + "; ".join(f"{why} ({n} runs)" for why, n in reasons.items())
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), note


def _mixed_notes(mixed: dict[tuple[str, str], list[str]]) -> dict[str, str]:
    """family -> the warning printed under its figures when it mixes fingerprints."""
    return {
        fam: "Warning: mixed hardware/software fingerprints "
        + ", ".join(sorted({n for (f, _), ns in mixed.items() if f == fam for n in ns}))
        for fam in {f for f, _ in mixed}
    }


def _order(
    analysis: FamilyAnalysis | None, confs: Sequence[Configuration], plan: AxisPlan
) -> dict[str, list[str]]:
    """Configuration labels per model, fastest first (those without an estimate last)."""
    out: dict[str, list[str]] = {}
    for conf in confs:
        if conf.completed:
            out.setdefault(conf.model, []).append(conf.id)
    est = analysis.estimates if analysis else {}

    def key(cid: str) -> tuple[float, str]:
        e = est.get(cid)
        v = e.value if e is not None and np.isfinite(e.value) else np.inf
        return v, plan.configs[cid]

    return {m: [plan.configs[i] for i in sorted(ids, key=key)] for m, ids in out.items()}


def build_report(
    paths: Sequence[Path | str],
    out: Path | str | None = None,
    baseline: dict[str, str] | str | None = None,
    strict: bool = False,
    *,
    legacy_timers: str = "per_iteration",
    figures: bool = True,
    gate: Path | str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Progress | None = None,
) -> ReportResult:
    """Read every cell under ``paths`` and write the report into ``out``.

    ``out`` defaults to ``report/`` inside the first path. ``baseline`` selects
    one configuration per model (``{"gpu_layout": "none", "workers": "8"}`` or
    the ``key=value,...`` string of ``--baseline``); without it speedups are
    relative to the slowest configuration of each model. ``strict`` raises
    :class:`MixedFingerprintsError` before writing anything when a table
    would compare cells of different hardware or software. ``gate`` names a
    baseline folder to judge regressions against (``result.gate``, see
    :mod:`rlperf.report.gate`; ``tolerance`` as a fraction). ``legacy_timers``
    (deprecated): ``per_iteration`` (invert RLlib 1.x window means) or
    ``window``. Raises :class:`NoRunsFoundError` for a path without runs.
    """
    say = progress or _quiet
    in_paths = [Path(p) for p in paths]
    found, cells, skipped = read_cells(in_paths, legacy_timers, say)
    out_dir = Path(out) if out is not None else default_out_dir(in_paths[0])
    comparison = compare_cells(cells, strict)
    comparison.warnings += _deprecations(legacy_timers) + all_excluded_warnings(cells)
    analyses = analyse(comparison, baseline)
    judged = None
    if gate is not None:
        judged = gate_against(Path(gate), comparison, analyses, tolerance, strict, legacy_timers)
    data = write_tables(comparison, analyses, out_dir, say, judged)
    serving = write_serve_tables(cells, comparison.plans, out_dir)
    drawn, undrawn = draw_figures(comparison, analyses, data, out_dir, say) if figures else ({}, {})
    if figures:
        serve_drawn, serve_undrawn = draw_serve_figures(serving, out_dir / "figures")
        drawn, undrawn = {**drawn, **serve_drawn}, {**undrawn, **serve_undrawn}
    searches = read_searches(found.sweeps)
    if figures:
        draw_search_figures(searches, out_dir / "figures")
    result = ReportResult(
        out=out_dir, cells=cells, skipped=skipped, runs=data.runs,
        configurations=data.configurations, iterations=data.iterations, latency=data.latency,
        targets=data.targets,
        figures=drawn, figures_skipped=undrawn,
        findings=[f for a in analyses.values() for f in a.findings], warnings=comparison.warnings,
        fingerprint_groups=comparison.groups, mixed=comparison.mixed, analyses=analyses,
        gate=judged, files=[*data.files, *serving.files, *_with_svg(drawn.values()),
               *_with_svg(s.figure for s in searches if s.figure is not None)],
        serve=serving, searches=searches,
    )  # fmt: skip
    blocks = document(result, comparison.plans, found.sweeps, in_paths)
    result.markdown, result.html = render.write(blocks, out_dir, "rlperf report")
    result.files += [result.markdown, result.html]
    say(f"report written to {out_dir}")
    return result


def gate_against(
    baseline_dir: Path,
    comparison: Comparison,
    analyses: dict[str, FamilyAnalysis],
    tolerance: float,
    strict: bool,
    legacy_timers: str = "per_iteration",
) -> GateResult:
    """Read the baseline folder the same way as the candidate and judge every configuration
    of the candidate against it (:mod:`rlperf.report.gate`)."""
    _, base_cells, _ = read_cells([baseline_dir], legacy_timers)
    base = compare_cells(base_cells, strict=False)
    candidate_side = gate_mod.Side(analyses, _configuration_labels(comparison))
    baseline_side = gate_mod.Side(analyse(base, None), _configuration_labels(base))
    return gate_mod.compare(candidate_side, baseline_side, baseline_dir, tolerance, strict)


def _configuration_labels(comparison: Comparison) -> dict[str, str]:
    return {
        k: v for plan in comparison.plans.values() for k, v in plan.configuration_labels.items()
    }


def all_excluded_warnings(cells: Sequence[Cell]) -> list[str]:
    """A warning (and a note in the cell's ``notes``) for every completed training cell
    whose iterations were all excluded: it has no throughput figure and is not ranked,
    which must never happen silently (e.g. a warm-up rule that waits for a finished
    episode in runs too short to finish one)."""
    out = []
    for c in cells:
        df = c.iterations
        if c.family != "training" or not c.completed or df is None or df.empty:
            continue
        if df[EXCLUDED_COLUMN].astype(str).ne("").all():
            reasons = df[EXCLUDED_COLUMN].value_counts()
            why = ", ".join(f"{k} {v}" for k, v in reasons.items())
            note = (
                f"all {len(df)} iterations excluded ({why}; warm-up {c.warmup_rule}): "
                "no throughput figure, not ranked"
            )
            c.notes.append(note)
            out.append(f"{c.id}: {note}")
    return out


def _deprecations(legacy_timers: str) -> list[str]:
    """Warnings for deprecated options (also logged, for callers of the library)."""
    if legacy_timers == "per_iteration":
        return []
    note = (
        f"--legacy-timers / legacy_timers={legacy_timers!r} is deprecated and will be removed "
        f"in rlperf {REMOVED_IN}: the report now gives RLlib 1.x phase times both ways (the "
        "study's window means and rlperf's per-iteration times, side by side)"
    )
    log.warning(note)
    return [note]


def _quiet(message: str) -> None:
    """The progress callback when nobody listens."""


def _with_svg(pngs: Iterable[Path]) -> list[Path]:
    """Every figure's PNG and the SVG next to it."""
    return [f for png in pngs for f in (png, png.with_suffix(".svg"))]
