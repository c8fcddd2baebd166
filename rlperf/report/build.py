"""The library entry point: :func:`build_report` reads cells and writes the report.

Steps: discover cells → read them (corrupt ones are skipped and listed) →
group by comparison family (training / inference) → choose the axes that vary
and build labels → compare fingerprints (``strict`` refuses mixtures) → rank
and compute speedups → write tables, figures, report.md and report.html.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.report import figures as figs
from rlperf.report import render, tables
from rlperf.report.axes import AxisPlan, BaselineError, parse_baseline, plan_axes, select_baselines
from rlperf.report.cells import PHASES, Cell
from rlperf.report.discover import CellRef, NoRunsFoundError, Skipped, discover
from rlperf.report.findings import OBJECTIVES, FamilyAnalysis, Finding, analyse_family
from rlperf.report.fingerprints import (
    FingerprintGroup,
    MixedFingerprintsError,
    differing_keys,
    group_cells,
)
from rlperf.report.legacy import is_legacy, load_legacy
from rlperf.report.load import CellError, load_rlperf_cell, read_yaml

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


def _mixed(cells: Sequence[Cell], fps: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    keys: dict[tuple[str, str], set[str]] = {}
    for c in cells:
        keys.setdefault((c.family, str(c.axes.get("model"))), set()).add(fps[c.id])
    for k, names in keys.items():
        if len(names) > 1:
            out[k] = sorted(names)
    return out


def _mixed_text(names: list[str], groups: dict[str, FingerprintGroup]) -> str:
    desc = "; ".join(
        f"{n} = {groups[n].machine or 'unknown'} ({len(groups[n].cells)} cells)" for n in names
    )
    diff = differing_keys(groups[n].fingerprint for n in names)
    return (
        f"rows of this table were recorded on different hardware or software: {desc}. "
        f"Differing fingerprint fields: {', '.join(diff) or 'n/a'}."
    )


def _concurrency(cells: Sequence[Cell]) -> tuple[str, int]:
    timed = [c for c in cells if c.started_at is not None and c.ended_at is not None]
    if not timed:
        return "no start / end times recorded, so concurrency cannot be checked", 0
    pairs: list[tuple[str, str]] = []
    by_host: dict[str, list[Cell]] = {}
    for c in timed:
        by_host.setdefault(c.host or "?", []).append(c)
    for group in by_host.values():
        group.sort(key=lambda c: c.started_at or 0.0)
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if (b.started_at or 0.0) >= (a.ended_at or 0.0) - 1.0:
                    break
                pairs.append((a.id, b.id))
    if not pairs:
        return (
            f"{len(timed)} of {len(cells)} cells recorded start and end times; none "
            "overlapped another on the same host (they ran one at a time)"
        ), 0
    first, second = pairs[0]
    return (
        f"{len(pairs)} pair(s) of cells overlapped in time on the same host (e.g. `{first}` "
        f"and `{second}`): their timings may have interfered"
    ), len(pairs)


def _launchers(sweeps: Sequence[Path]) -> list[str]:
    out = []
    for sweep in sweeps:
        try:
            cfg = read_yaml(sweep / "multirun.yaml")
        except CellError:
            continue
        launcher = ((cfg or {}).get("hydra") or {}).get("launcher") or {}
        if not isinstance(launcher, dict) or not launcher:
            continue
        target = launcher.get("_target_", "?")
        knobs = {
            k: v
            for k, v in launcher.items()
            if any(t in k for t in ("concurren", "parallel", "n_jobs", "max"))
        }
        extra = ", ".join(f"{k}={v}" for k, v in knobs.items())
        out.append(f"`{sweep.name}`: launcher `{target}`" + (f" ({extra})" if extra else ""))
    return out


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
    in_paths = [Path(p) for p in paths]
    disc = discover(in_paths, progress)
    cells, skipped = load_cells(disc.refs, progress, legacy_timers)
    skipped = [*disc.skipped, *skipped]
    if not cells:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:5])
        raise NoRunsFoundError(
            f"no readable cell under {', '.join(map(str, in_paths))} ({reasons})"
        )
    first = in_paths[0].resolve()
    out_dir = (
        Path(out) if out is not None else (first if first.is_dir() else first.parent) / "report"
    )

    warnings: list[str] = []
    families: dict[str, list[Cell]] = {}
    for c in cells:
        families.setdefault(c.family, []).append(c)
    plans = {fam: plan_axes(cs) for fam, cs in families.items()}

    groups = group_cells(cells)
    fps = {cid: g.name for g in groups.values() for cid in g.cells}
    mixed = _mixed([c for c in cells if c.completed], fps)
    if mixed:
        where = ", ".join(f"{fam} {model}" for fam, model in sorted(mixed))
        msg = (
            f"cells recorded on different hardware or software are compared in: {where} "
            f"({len(groups)} fingerprints)"
        )
        if strict:
            raise MixedFingerprintsError(msg + "; --strict refuses to compare them")
        warnings.append(msg + ". Affected tables say so.")

    spec = parse_baseline(baseline) if isinstance(baseline, str) else baseline
    baselines: dict[str, dict[str, str]] = {}
    if spec:
        misses = 0
        for fam, cs in families.items():
            try:
                baselines[fam] = select_baselines([c for c in cs if c.completed], spec, warnings)
            except BaselineError:
                misses += 1
        if misses == len(families):
            raise BaselineError(f"--baseline {spec} matches no completed cell")
    analyses = {
        fam: analyse_family(fam, cs, plans[fam], baselines.get(fam)) for fam, cs in families.items()
    }
    findings = [f for a in analyses.values() for f in a.findings]

    if progress is not None:
        progress("writing tables")
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = tables.runs_table(cells, plans, fps, analyses)
    iterations = tables.iterations_table(cells, plans, fps)
    latency = tables.latency_table(cells, plans, fps)
    files: list[Path] = []
    files += tables.write_table(runs, out_dir, "runs")
    if not iterations.empty:
        files += tables.write_table(iterations, out_dir, "iterations")
    if not latency.empty:
        files += tables.write_table(latency, out_dir, "latency")

    drawn: dict[str, Path] = {}
    not_drawn: dict[str, str] = {}
    if figures:
        if progress is not None:
            progress("drawing figures")
        if not iterations.empty and "training" in plans:
            tplan = plans["training"]
            by_id = {c.id: c for c in cells}
            wo = {
                cid: tplan.config_without(
                    {**by_id[cid].leaves, **by_id[cid].axes}, ["workers", "seed"]
                )
                for cid in tplan.labels
            }
            iterations_fig = iterations.assign(config_wo_workers=iterations["cell"].map(wo))
        else:
            iterations_fig = iterations
        ctx = figs.FigureContext(
            iterations=iterations_fig,
            latency=latency,
            runs=runs,
            order={
                (fam, m): o
                for fam, cs in families.items()
                for m, o in _order(analyses.get(fam), cs, plans[fam]).items()
            },
            config_colors=figs.config_palette([plans[c.family].configs[c.id] for c in cells]),
            mixed_note={
                fam: "Warning: mixed hardware/software fingerprints "
                + ", ".join(sorted({n for (f, _), ns in mixed.items() if f == fam for n in ns}))
                for fam in {f for f, _ in mixed}
            },
        )
        drawn, not_drawn = figs.draw_all(ctx, out_dir / "figures")
        for p in drawn.values():
            files += [p, p.with_suffix(".svg")]

    result = ReportResult(
        out=out_dir,
        cells=cells,
        skipped=skipped,
        runs=runs,
        iterations=iterations,
        latency=latency,
        figures=drawn,
        figures_skipped=not_drawn,
        findings=findings,
        warnings=warnings,
        fingerprint_groups=groups,
        mixed=mixed,
        analyses=analyses,
        files=files,
    )
    blocks = _document(result, plans, disc.sweeps, in_paths)
    result.markdown, result.html = render.write(blocks, out_dir, "rlperf report")
    files += [result.markdown, result.html]
    if progress is not None:
        progress(f"report written to {out_dir}")
    return result


# --------------------------------------------------------------------------- document


def _f(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)) or v is pd.NA:
        return ""
    if isinstance(v, float | np.floating):
        return f"{v:.{digits}g}" if abs(float(v)) < 1000 else f"{v:,.0f}"
    return str(v)


def _ci(v: Any, lo: Any, hi: Any) -> str:
    if not _f(v):
        return ""
    if not _f(lo) or not _f(hi):
        return _f(v)
    return f"{_f(v)} [{_f(lo)}, {_f(hi)}]"


def _rank(r: pd.Series, best_rank: int = 1) -> str:
    rank = r.get("rank_in_model")
    if rank is None or pd.isna(rank):
        return ""
    return f"{int(rank)}"


def _col(rows: pd.DataFrame, name: str) -> pd.Series:
    """A column of the runs table, or NaN where no cell had it."""
    return rows[name] if name in rows else pd.Series(np.nan, index=rows.index, dtype=float)


def _fmt_col(rows: pd.DataFrame, name: str, digits: int = 3) -> np.ndarray:
    return _col(rows, name).map(lambda v: _f(v, digits)).to_numpy()


def _ci_col(rows: pd.DataFrame, prefix: str) -> list[str]:
    lo, hi = (
        ("speedup_ci_low", "speedup_ci_high")
        if prefix == "speedup"
        else ("objective_ci_low", "objective_ci_high")
    )
    value = "speedup" if prefix == "speedup" else "objective_value"
    return [_ci(v, a, b) for v, a, b in zip(_col(rows, value), _col(rows, lo), _col(rows, hi),
                                            strict=True)]  # fmt: skip


def _count(v: Any) -> str:
    return f"{int(v)}" if _f(v) else "0"


def _training_table(rows: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "rank": rows.apply(_rank, axis=1).to_numpy(),
            "configuration": rows["config"].to_numpy(),
            "cell": rows["cell"].map(lambda c: f"`{c}`").to_numpy(),
            "iters (warm-up)": [
                f"{_count(i)} ({_count(w)})"
                for i, w in zip(
                    _col(rows, "iterations"), _col(rows, "warmup_iterations"), strict=True
                )  # fmt: skip
            ],
            "time/iter s [95% CI]": _ci_col(rows, "objective"),
        }
    )
    for p in PHASES:
        out[p.removesuffix("_s") + " s"] = _fmt_col(rows, f"{p}_mean")
    out["env steps/s"] = _fmt_col(rows, "env_steps_per_s_mean", 4)
    out["CPU %"] = _fmt_col(rows, "cpu_util_pct_mean", 2)
    gpu_cols = [c for c in rows.columns if re.fullmatch(r"gpu\d+_util_pct_mean", c)
                and rows[c].notna().any()]  # fmt: skip
    for c in gpu_cols:
        out[f"GPU {c.split('_')[0].removeprefix('gpu')} %"] = _fmt_col(rows, c, 2)
    if "speedup" in rows:
        out["speedup [95% CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


_GRANULARITY = {"step": "steps", "episode_mean": "episode means", "run_mean": "run mean"}


def _inference_table(rows: pd.DataFrame) -> pd.DataFrame:
    m = "action_ms" if _col(rows, "action_ms_p50").notna().any() else "forward_ms"
    out = pd.DataFrame(
        {
            "rank": rows.apply(_rank, axis=1).to_numpy(),
            "configuration": rows["config"].to_numpy(),
            "cell": rows["cell"].map(lambda c: f"`{c}`").to_numpy(),
            "samples": [
                f"{_count(n)} {_GRANULARITY.get(str(g), '')}".strip()
                for n, g in zip(_col(rows, "samples"), _col(rows, "granularity"), strict=True)
            ],
            "p50 ms [95% CI]": _ci_col(rows, "objective"),
            "mean ms": _fmt_col(rows, f"{m}_mean"),
            "p90 ms": _fmt_col(rows, f"{m}_p90"),
            "p99 ms": _fmt_col(rows, f"{m}_p99"),
            "max ms": _fmt_col(rows, f"{m}_max"),
            "return": _fmt_col(rows, "return_mean"),
        }
    )
    if _col(rows, "fidelity_agreement").notna().any():
        out["agreement %"] = (_col(rows, "fidelity_agreement").astype(float) * 100).map(
            lambda v: _f(v, 4)).to_numpy()  # fmt: skip
    if "speedup" in rows:
        out["speedup [95% CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


def _methods(res: ReportResult, sweeps: Sequence[Path]) -> list[render.Block]:
    cells = res.cells
    blocks: list[render.Block] = [render.Heading("Methods", 2)]
    it = res.iterations
    text = []
    if not it.empty:
        ncells = it["cell"].nunique()
        nwarm = int(it["warmup"].sum())
        rules = sorted({c.warmup_rule for c in cells if c.family == "training"})
        text.append(
            f"**Warm-up.** Training iterations flagged as warm-up are kept in `iterations.csv` "
            f"(column `warmup`) but excluded from every mean, interval, ranking and figure: "
            f"{nwarm} of {len(it)} iterations in {ncells} training cells. Rules: "
            + "; ".join(rules)
            + "."
        )
    lat = res.latency
    if not lat.empty:
        nwarm = int(lat["warmup"].sum())
        text.append(
            f"Inference cells: the first steps flagged `warmup` in `steps.csv` are excluded "
            f"({nwarm} samples); the study's rollout files kept only per-episode or per-run "
            "means of every step, with nothing removed."
        )
    incomplete = [c for c in cells if not c.completed]
    dups = sum(s.duplicate for s in res.skipped)
    text.append(
        f"**Excluded.** {len(res.skipped) - dups} folder(s) or file(s) could not be read "
        f"(listed under *Skipped*); {dups} duplicate folder(s), copies of a run already "
        "read (same Tune experiment id, or same host and start time), count once; "
        f"{len(incomplete)} "
        "cell(s) did not complete (status failed, interrupted or partial): they appear in "
        "`runs.csv` and `iterations.csv` but are not ranked or plotted."
    )
    conc, _ = _concurrency(cells)
    ran_with = sorted({int(c.concurrent_cells) for c in cells if c.concurrent_cells})
    if ran_with:
        conc += (
            "; the launcher ran them with max_concurrent_trials="
            + "/".join(map(str, ran_with))
            + (" (cells shared the machine)" if max(ran_with) > 1 else " (one cell at a time)")
        )
    launch = _launchers(sweeps)
    text.append(
        f"**Concurrency.** {conc}." + (" Sweeps: " + "; ".join(launch) + "." if launch else "")
    )
    groups = res.fingerprint_groups
    fp_list = ", ".join(f"{g.name}: {g.machine or 'unknown'}" for g in groups.values())
    text.append(
        f"**Fingerprints.** {len(groups)} distinct hardware/software fingerprint(s) "
        f"({fp_list}); "
        "host names, start times, affinity masks and the config are not compared. "
        + (
            "Tables that mix fingerprints carry a warning."
            if res.mixed
            else "Every comparison is within one fingerprint."
        )
    )
    objs = "; ".join(f"{fam}: {a.statistic} of `{a.metric}`" for fam, a in res.analyses.items())
    text.append(
        f"**Statistics.** Cells are compared per model on {objs} over the non-warm-up "
        "iterations or steps. Intervals are 95% percentile-bootstrap intervals "
        "(`scipy.stats.bootstrap`, 1000 resamples, seeded by the cell id; a speedup's "
        "interval is that of the ratio of the two cells' independent bootstrap "
        "distributions). Two cells whose intervals overlap are called tied; a cell's rank is "
        "1 + the number of cells whose interval lies entirely below its own, so tied cells "
        "share a rank. Iterations of one run are autocorrelated, so the intervals describe "
        "that run rather than run-to-run variance (repeat cells to measure that). Speedups "
        "are baseline time / cell time (> 1: faster than the baseline)."
    )
    if any(c.source == "legacy" for c in cells):
        text.append(
            "**Legacy data.** RLlib 1.x runs (Tune `progress.csv` + `params.json`) are mapped "
            "onto the canonical columns (docs/report.md). Their `timers/*_time_ms` are means "
            "over a sliding window of the last 10 iterations; the report inverts the window "
            "(x_k = x_{k-10} + 10 (m_k - m_{k-1})) to recover per-iteration phase times, "
            "checks that they are non-negative and sum to at most `time_this_iter_s`, and "
            "keeps the window means as `*_win10` columns. GPU utilisation and GPU memory are "
            "GPUtil fractions converted to %, and the memory figure is occupancy "
            "(`gpu{i}_mem_used_pct`), not NVML's memory-bus utilisation. `episode_reward_mean` "
            "is smoothed over the last 100 episodes. The study's warm-up rule (drop iterations "
            "before the first finished episode) is applied. Config axes come from `params.json` "
            "and the run names; the machines' fingerprints from the study's README."
        )
    blocks += [render.Para(t) for t in text]
    return blocks


def _document(
    res: ReportResult, plans: dict[str, AxisPlan], sweeps: Sequence[Path], paths: Sequence[Path]
) -> list[render.Block]:
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    n_ok = sum(c.completed for c in res.cells)
    b: list[render.Block] = [
        render.Heading("rlperf report", 1),
        render.Para(
            f"Generated {now} from {len(res.cells)} cells ({n_ok} completed; "
            f"{sum(not s.duplicate for s in res.skipped)} unreadable and "
            f"{sum(s.duplicate for s in res.skipped)} duplicate folders skipped) under "
            + ", ".join(f"`{p}`" for p in paths)
            + "."
        ),
    ]
    b += [render.Warn(w) for w in res.warnings]
    b.append(render.Heading("Findings", 2))
    b.append(render.Bullets([f.text for f in res.findings] or ["No completed cell to compare."]))
    b += _methods(res, sweeps)
    groups = res.fingerprint_groups
    for fam in ("training", "inference", *[f for f in plans if f not in OBJECTIVES]):
        if fam not in plans:
            continue
        plan = plans[fam]
        rows_all = res.runs[(res.runs["family"] == fam) & (res.runs["status"] == "completed")]
        title = {"training": "Training", "inference": "Inference (rollout and edge)"}.get(fam, fam)
        b.append(render.Heading(title, 2))
        shown = [a for a in plan.axes if a != "model"]
        common = ", ".join(f"{k}={v}" for k, v in plan.constants.items() if v is not None)
        b.append(
            render.Para(
                "Configurations differ in: "
                + (", ".join(f"`{a}`" for a in shown) or "nothing")
                + (f". Common to all: {common}." if common else ".")
            )
        )
        a = res.analyses.get(fam)
        if a is not None and a.baselines:
            how = "`--baseline`" if a.baseline_chosen else "default: slowest cell of each model"
            b.append(
                render.Para(
                    f"Speedup baseline ({how}): "
                    + "; ".join(f"{m}: `{plan.configs[c]}`" for m, c in sorted(a.baselines.items()))
                    + "."
                )
            )
        for model in sorted(rows_all["model"].dropna().astype(str).unique()):
            rows = rows_all[rows_all["model"].astype(str) == model].sort_values(
                ["objective_value", "config"], na_position="last"
            )
            b.append(render.Heading(model, 3))
            if (fam, model) in res.mixed:
                b.append(render.Warn(_mixed_text(res.mixed[(fam, model)], groups)))
            tbl = _training_table(rows) if fam == "training" else _inference_table(rows)
            b.append(render.Table(tbl))
    b.append(render.Heading("Figures", 2))
    for name, (_, caption) in figs.FIGURES.items():
        if name in res.figures:
            b.append(render.Image(res.figures[name], caption))
    if not res.figures and not res.figures_skipped:
        b.append(render.Para("Figures were not drawn (`--no-figures`)."))
    if res.figures_skipped:
        b.append(
            render.Para(
                "Not drawn: "
                + "; ".join(f"{n} ({why})" for n, why in res.figures_skipped.items())
                + "."
            )
        )
    b.append(render.Heading("Fingerprints", 2))
    b.append(
        render.Table(
            pd.DataFrame(
                {
                    "fingerprint": [g.name for g in groups.values()],
                    "machine": [g.machine for g in groups.values()],
                    "cells": [len(g.cells) for g in groups.values()],
                    "fields": [
                        ", ".join(f"{k}={v}" for k, v in list(g.fingerprint.items())[:12])
                        for g in groups.values()
                    ],
                }
            )
        )
    )
    b.append(render.Heading("Cells", 2))
    cells_tbl = pd.DataFrame(
        {
            "cell": [f"`{c.id}`" for c in res.cells],
            "label": [plans[c.family].labels.get(c.id, "") for c in res.cells],
            "stage": [c.stage for c in res.cells],
            "source": [c.source for c in res.cells],
            "status": [c.status for c in res.cells],
            "fp": [next(g.name for g in groups.values() if c.id in g.cells) for c in res.cells],
            "notes": ["; ".join(c.notes) for c in res.cells],
        }
    )
    b.append(render.Table(cells_tbl))
    if res.skipped:
        b.append(render.Heading("Skipped", 3))
        b.append(render.Bullets([f"`{s.path}`: {s.reason}" for s in res.skipped]))
    b.append(
        render.Para(
            "Tables: `runs.csv` (one row per cell), `iterations.csv` (training, per iteration), "
            "`latency.csv` (inference samples), each also as Parquet. Figures: `figures/*.png` "
            "and `.svg`."
        )
    )
    return b
