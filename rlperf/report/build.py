"""The library entry point: :func:`build_report` reads cells and writes the report.

Steps, each a function here: :func:`read_cells` (discover and read; corrupt
cells are skipped and listed) → :func:`compare_cells` (group by comparison
family, choose the axes that vary and build labels, compare fingerprints:
``strict`` refuses mixtures) → :func:`analyse` (estimates, ranks, speedups and
findings) → :func:`write_tables` → :func:`draw_figures` → the document
(:mod:`rlperf.report.document`) rendered as report.md and report.html.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlperf.report import figures as figs
from rlperf.report import render, tables
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
from rlperf.report.legacy import is_legacy, load_legacy
from rlperf.report.load import CellError, load_rlperf_cell
from rlperf.report.serve import FAMILY as SERVE_FAMILY
from rlperf.report.serve import ServeTables, draw_serve_figures, write_serve_tables

Progress = Callable[[str], None]


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
    files: list[Path] = field(default_factory=list)
    serve: ServeTables | None = None
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
    """How the cells are compared: per family, on the axes that vary, within one fingerprint."""

    cells: list[Cell]
    families: dict[str, list[Cell]]
    plans: dict[str, AxisPlan]
    groups: dict[str, FingerprintGroup]
    fingerprint_of: dict[str, str]  # cell id -> fingerprint group name
    mixed: dict[tuple[str, str], list[str]]  # (family, model) -> fingerprints mixed there
    warnings: list[str] = field(default_factory=list)


def compare_cells(cells: list[Cell], strict: bool) -> Comparison:
    """Group cells by family, plan their axes and labels, and check their fingerprints.

    Raises :class:`MixedFingerprintsError` when ``strict`` and a table would mix
    fingerprints; otherwise that becomes a warning.
    """
    families: dict[str, list[Cell]] = {}
    for c in cells:
        families.setdefault(c.family, []).append(c)
    plans = {fam: plan_axes(cs) for fam, cs in families.items()}
    groups = group_cells(cells)
    fps = {cid: g.name for g in groups.values() for cid in g.cells}
    mixed = _mixed([c for c in cells if c.completed], fps)
    comparison = Comparison(cells, families, plans, groups, fps, mixed)
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
        fam: analyse_family(fam, cs, comparison.plans[fam], baselines.get(fam))
        for fam, cs in comparison.families.items()
        if fam != SERVE_FAMILY
    }


def _baselines(comparison: Comparison, spec: dict[str, str]) -> dict[str, dict[str, str]]:
    """The ``--baseline`` cell per model of every family; an error if no family has one."""
    baselines: dict[str, dict[str, str]] = {}
    misses = 0
    for fam, cs in comparison.families.items():
        completed = [c for c in cs if c.completed]
        try:
            baselines[fam] = select_baselines(completed, spec, comparison.warnings)
        except BaselineError:
            misses += 1
    if misses == len(comparison.families):
        raise BaselineError(f"--baseline {spec} matches no completed cell")
    return baselines


@dataclass
class Tables:
    """The report's tidy tables (docs/report.md) and the files they were written to."""

    runs: pd.DataFrame
    iterations: pd.DataFrame
    latency: pd.DataFrame
    files: list[Path]


def write_tables(
    comparison: Comparison,
    analyses: dict[str, FamilyAnalysis],
    out_dir: Path,
    progress: Progress | None = None,
) -> Tables:
    """runs, iterations and latency as CSV + Parquet (an empty table is not written)."""
    if progress is not None:
        progress("writing tables")
    out_dir.mkdir(parents=True, exist_ok=True)
    cells, plans, fps = comparison.cells, comparison.plans, comparison.fingerprint_of
    runs = tables.runs_table(cells, plans, fps, analyses)
    iterations = tables.iterations_table(cells, plans, fps)
    latency = tables.latency_table(cells, plans, fps)
    files = tables.write_table(runs, out_dir, "runs")
    if not iterations.empty:
        files += tables.write_table(iterations, out_dir, "iterations")
    if not latency.empty:
        files += tables.write_table(latency, out_dir, "latency")
    return Tables(runs, iterations, latency, files)


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
        iterations=_iterations_for_figures(comparison, data.iterations),
        latency=data.latency,
        runs=data.runs,
        order={
            (fam, m): o
            for fam, cs in comparison.families.items()
            for m, o in _order(analyses.get(fam), cs, comparison.plans[fam]).items()
        },
        config_colors=figs.config_palette(
            [comparison.plans[c.family].configs[c.id] for c in comparison.cells]
        ),
        mixed_note=_mixed_notes(comparison.mixed),
    )
    return figs.draw_all(ctx, out_dir / "figures")


def _iterations_for_figures(comparison: Comparison, iterations: pd.DataFrame) -> pd.DataFrame:
    """The iterations table plus each cell's configuration label without workers and seed."""
    if iterations.empty or "training" not in comparison.plans:
        return iterations
    plan = comparison.plans["training"]
    by_id = {c.id: c for c in comparison.cells}
    wo = {
        cid: plan.config_without({**by_id[cid].leaves, **by_id[cid].axes}, ["workers", "seed"])
        for cid in plan.labels
    }
    return iterations.assign(config_wo_workers=iterations["cell"].map(wo))


def _mixed_notes(mixed: dict[tuple[str, str], list[str]]) -> dict[str, str]:
    """family -> the warning printed under its figures when it mixes fingerprints."""
    return {
        fam: "Warning: mixed hardware/software fingerprints "
        + ", ".join(sorted({n for (f, _), ns in mixed.items() if f == fam for n in ns}))
        for fam in {f for f, _ in mixed}
    }


def _order(
    analysis: FamilyAnalysis | None, cells: Sequence[Cell], plan: AxisPlan
) -> dict[str, list[str]]:
    """Config labels per model, fastest first (cells without an estimate last)."""
    out: dict[str, list[str]] = {}
    for c in cells:
        if not c.completed:
            continue
        out.setdefault(str(c.axes.get("model")), []).append(c.id)
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
    progress: Progress | None = None,
) -> ReportResult:
    """Read every cell under ``paths`` and write the report into ``out``.

    ``out`` defaults to ``report/`` inside the first path. ``baseline`` selects
    one cell per model (``{"gpu_layout": "none", "workers": "8"}`` or the
    ``key=value,...`` string of ``--baseline``); without it speedups are
    relative to the slowest cell of each model. ``strict`` raises
    :class:`MixedFingerprintsError` before writing anything when a table
    would compare cells of different hardware or software.
    ``legacy_timers``: ``per_iteration`` (invert RLlib 1.x window means) or
    ``window``. Raises :class:`NoRunsFoundError` for a path without runs.
    """
    say = progress or _quiet
    in_paths = [Path(p) for p in paths]
    found, cells, skipped = read_cells(in_paths, legacy_timers, say)
    out_dir = Path(out) if out is not None else default_out_dir(in_paths[0])
    comparison = compare_cells(cells, strict)
    analyses = analyse(comparison, baseline)
    data = write_tables(comparison, analyses, out_dir, say)
    serving = write_serve_tables(cells, comparison.plans, out_dir)
    drawn, undrawn = draw_figures(comparison, analyses, data, out_dir, say) if figures else ({}, {})
    if figures:
        serve_drawn, serve_undrawn = draw_serve_figures(serving, out_dir / "figures")
        drawn, undrawn = {**drawn, **serve_drawn}, {**undrawn, **serve_undrawn}
    result = ReportResult(
        out=out_dir, cells=cells, skipped=skipped, runs=data.runs, iterations=data.iterations,
        latency=data.latency, figures=drawn, figures_skipped=undrawn,
        findings=[f for a in analyses.values() for f in a.findings], warnings=comparison.warnings,
        fingerprint_groups=comparison.groups, mixed=comparison.mixed, analyses=analyses,
        files=[*data.files, *serving.files, *_with_svg(drawn.values())], serve=serving,
    )  # fmt: skip
    blocks = document(result, comparison.plans, found.sweeps, in_paths)
    result.markdown, result.html = render.write(blocks, out_dir, "rlperf report")
    result.files += [result.markdown, result.html]
    say(f"report written to {out_dir}")
    return result


def _quiet(message: str) -> None:
    """The progress callback when nobody listens."""


def _with_svg(pngs: Iterable[Path]) -> list[Path]:
    """Every figure's PNG and the SVG next to it."""
    return [f for png in pngs for f in (png, png.with_suffix(".svg"))]
