"""The library entry point: :func:`build_report` reads cells and writes the report.

Steps: :func:`~rlperf.report.read.collect.read_cells` (discover and read; corrupt cells
are skipped and listed) → :func:`~rlperf.report.compare.comparison.compare_cells` (group by
comparison family and into configurations, repeats pooled; choose the axes that
vary and build labels, compare fingerprints: ``strict`` refuses mixtures) →
:func:`~rlperf.report.compare.comparison.analyse` (estimates, ranks, speedups and findings) →
:func:`gate_against` (``--gate``: regressions against a baseline folder) →
:func:`write_tables` → :func:`~rlperf.report.figures.registry.draw_figures` → what each
section collects, and its figures (:mod:`rlperf.report.sections.base`) → the document
(:mod:`rlperf.report.document`) rendered as report.md and report.html.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.report.compare import gate as gate_mod
from rlperf.report.compare.comparison import (
    Comparison,
    analyse,
    compare_cells,
    configuration_labels,
)
from rlperf.report.compare.findings import FamilyAnalysis
from rlperf.report.compare.gate import DEFAULT_TOLERANCE, GateResult
from rlperf.report.document import document
from rlperf.report.export import render
from rlperf.report.figures.registry import draw_figures
from rlperf.report.figures.serve import draw_serve_figures
from rlperf.report.read.cells import Cell
from rlperf.report.read.collect import Progress, read_cells
from rlperf.report.result import ReportResult
from rlperf.report.sections.base import Inputs, Section, registered
from rlperf.report.stats.targets import targets_table
from rlperf.report.tables import tidy
from rlperf.report.tables.serve import write_serve_tables
from rlperf.report.tables.tidy import Tables
from rlperf.vocabulary import Family


def default_out_dir(first_path: Path) -> Path:
    """``report/`` inside the first input folder (next to it for a file)."""
    first = first_path.resolve()
    return (first if first.is_dir() else first.parent) / "report"


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
    runs = tidy.runs_table(cells, plans, fps, analyses)
    data = Tables(
        runs=runs,
        configurations=tidy.configurations_table(runs, analyses, plans),
        iterations=tidy.iterations_table(cells, plans, fps),
        latency=tidy.latency_table(cells, plans, fps),
        files=[],
    )
    data.targets = targets_table(cells, runs)
    data.env_windows = tidy.env_windows_table(cells, plans, fps)
    for name in ("runs", "configurations", "iterations", "latency", "targets", "env_windows"):
        df = getattr(data, name)
        if name == "runs" or not df.empty:
            data.files += tidy.write_table(df, out_dir, name)
    if judged is not None:
        data.files += tidy.write_table(gate_mod.table(judged), out_dir, "gate")
    return data


def build_report(
    paths: Sequence[Path | str],
    out: Path | str | None = None,
    baseline: dict[str, str] | str | None = None,
    strict: bool = False,
    *,
    figures: bool = True,
    gate: Path | str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    objective: str | None = None,
    progress: Progress | None = None,
) -> ReportResult:
    """Read every cell under ``paths`` and write the report into ``out``.

    ``out`` defaults to ``report/`` inside the first path. ``baseline`` selects
    one configuration per model (``{"gpu_layout": "none", "workers": "8"}`` or
    the ``key=value,...`` string of ``--baseline``); without it speedups are
    relative to the slowest configuration of each comparison set. ``strict`` raises
    :class:`MixedFingerprintsError` before writing anything when a table
    would compare cells of different hardware or software. ``gate`` names a
    baseline folder to judge regressions against (``result.gate``, see
    :mod:`rlperf.report.compare.gate`; ``tolerance`` as a fraction). ``objective``
    (``--objective``) ranks training on ``env_steps``, ``trained_steps``, ``iter_s`` or
    ``time_to_target`` instead of each comparison's own (:mod:`rlperf.report.stats.objectives`;
    :class:`ObjectiveError` where it does not fit).
    Raises :class:`NoRunsFoundError` for a path without runs.
    """
    say = progress or _quiet
    in_paths = [Path(p) for p in paths]
    found, cells, skipped = read_cells(in_paths, say)
    out_dir = Path(out) if out is not None else default_out_dir(in_paths[0])
    comparison = compare_cells(cells, strict)
    comparison.warnings += all_excluded_warnings(cells)
    analyses = analyse(comparison, baseline, objective)
    judged = None
    if gate is not None:
        judged = gate_against(Path(gate), comparison, analyses, tolerance, strict)
    data = write_tables(comparison, analyses, out_dir, say, judged)
    serving = write_serve_tables(cells, comparison.plans, out_dir)
    drawn, undrawn = draw_figures(comparison, analyses, data, out_dir, say) if figures else ({}, {})
    if figures:
        serve_drawn, serve_undrawn = draw_serve_figures(serving, out_dir / "figures")
        drawn, undrawn = {**drawn, **serve_drawn}, {**undrawn, **serve_undrawn}
    result = ReportResult(
        out=out_dir, cells=cells, skipped=skipped, runs=data.runs,
        configurations=data.configurations, iterations=data.iterations, latency=data.latency,
        targets=data.targets, env_windows=data.env_windows,
        figures=drawn, figures_skipped=undrawn,
        findings=[f for a in analyses.values() for f in a.findings], warnings=comparison.warnings,
        fingerprint_groups=comparison.groups, mixed=comparison.mixed, analyses=analyses,
        gate=judged, serve=serving,
    )  # fmt: skip
    inputs = Inputs(result, comparison, in_paths, found.sweeps)
    unlisted = collect_sections(inputs, out_dir / "figures" if figures else None)
    result.files = [*data.files, *serving.files, *_with_svg(drawn.values()), *_with_svg(unlisted)]
    blocks = document(inputs)
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
) -> GateResult:
    """Read the baseline folder the same way as the candidate and judge every configuration
    of the candidate against it (:mod:`rlperf.report.compare.gate`)."""
    _, base_cells, _ = read_cells([baseline_dir])
    base = compare_cells(base_cells, strict=False)
    candidate_side = gate_mod.Side(analyses, configuration_labels(comparison))
    baseline_side = gate_mod.Side(analyse(base, None), configuration_labels(base))
    return gate_mod.compare(candidate_side, baseline_side, baseline_dir, tolerance, strict)


def collect_sections(inputs: Inputs, figures_dir: Path | None) -> list[Path]:
    """What each registered section collects, into ``result.sections``; then, with figures,
    each section's own figures (added to ``result.figures`` where the section lists them).
    Returns the figures drawn but not listed."""
    result = inputs.result
    sections = registered()
    for section in _by_needs(sections):
        if section.collect is not None:
            result.sections[section.name] = section.collect(inputs)
    unlisted: list[Path] = []
    if figures_dir is None:
        return unlisted
    for section in sections:
        if section.draw is not None:
            shown = section.draw(result.sections[section.name], figures_dir)
            if section.listed:
                result.figures.update(shown)
            else:
                unlisted += shown.values()
    return unlisted


def _by_needs(sections: Sequence[Section]) -> list[Section]:
    """``sections`` in registry order, except that one needing another's data (a name in its
    ``needs``) comes after it (the answers read the scaling curves)."""
    names = {s.name for s in sections}
    done: list[Section] = []
    pending = list(sections)
    while pending:
        ready = next(s for s in pending
                     if not (set(s.needs) & names) - {d.name for d in done} - {s.name})  # fmt: skip
        done.append(ready)
        pending.remove(ready)
    return done


def all_excluded_warnings(cells: Sequence[Cell]) -> list[str]:
    """A warning (and a note in the cell's ``notes``) for every completed training cell
    whose iterations were all excluded: it has no throughput figure and is not ranked,
    which must never happen silently (e.g. a warm-up rule that waits for a finished
    episode in runs too short to finish one). Cells with the same note share one warning
    that names them."""
    by_note: dict[str, list[str]] = {}
    for c in cells:
        df = c.iterations
        if c.family != Family.training or not c.completed or df is None or df.empty:
            continue
        if df[EXCLUDED_COLUMN].astype(str).ne("").all():
            reasons = df[EXCLUDED_COLUMN].value_counts()
            why = ", ".join(f"{k} {v}" for k, v in reasons.items())
            note = (
                f"all {len(df)} iterations excluded ({why}; warm-up {c.warmup_rule}): "
                "no throughput figure, not ranked"
            )
            c.notes.append(note)
            by_note.setdefault(note, []).append(c.id)
    return [
        f"{ids[0]}: {note}"
        if len(ids) == 1
        else f"{len(ids)} cells: {note}: " + ", ".join(f"`{i}`" for i in ids)
        for note, ids in by_note.items()
    ]


def _quiet(message: str) -> None:
    """The progress callback when nobody listens."""


def _with_svg(pngs: Iterable[Path]) -> list[Path]:
    """Every figure's PNG and the SVG next to it."""
    return [f for png in pngs for f in (png, png.with_suffix(".svg"))]
