"""The text of the report: the blocks that :mod:`rlperf.report.render` writes as
``report.md`` and ``report.html``.

Sections, in reading order: what was read, warnings and findings → methods
(warm-up, exclusions, concurrency, fingerprints, statistics, legacy data) → one
section per comparison family with a table per model → figures → fingerprints
→ cells.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rlperf.report import figures as figs
from rlperf.report import gate, render
from rlperf.report.axes import AxisPlan
from rlperf.report.cells import PHASES, Cell
from rlperf.report.energy import energy_text
from rlperf.report.findings import FamilyAnalysis, level
from rlperf.report.fingerprints import FingerprintGroup, differing_keys
from rlperf.report.legacy_compare import side_by_side
from rlperf.report.load import CellError, read_yaml
from rlperf.report.objectives import OBJECTIVES
from rlperf.report.search import search_section
from rlperf.report.serve import CAPTION as SERVE_CAPTION
from rlperf.report.serve import FAMILY as SERVE_FAMILY
from rlperf.report.serve import FIGURE as SERVE_FIGURE
from rlperf.report.serve import serve_findings, serve_section
from rlperf.report.stats import N_RESAMPLES

if TYPE_CHECKING:
    from rlperf.report.build import ReportResult

_FAMILY_TITLES = {"training": "Training", "inference": "Inference (rollout and edge)"}

_GRANULARITY = {"step": "steps", "episode_mean": "episode means", "run_mean": "run mean"}

_STATISTICS = (
    "**Statistics.** Configurations are compared per model on {objectives} over the "
    "non-warm-up iterations or steps. Cells that differ only in `seed` (on one "
    "fingerprint) are runs of one configuration and are pooled: {repeats}. A configuration "
    "run several times is estimated on its runs' values (each run's mean or median, never "
    "the pooled iterations, which are not independent samples of the configuration): their "
    "geometric mean, with a {level} Student-t interval on their logarithms (run to run; "
    "it stays positive). A configuration run once has a "
    "{level} percentile-bootstrap interval over its run's samples (`scipy.stats.bootstrap`, "
    "{resamples} resamples, seeded by the cell id); iterations of one run are "
    "autocorrelated, so such an interval describes that run, not run-to-run variance. A "
    "speedup's interval is that of the ratio of the two estimates' independent sampling "
    "distributions. Two configurations whose intervals overlap are called tied; a rank is "
    "1 + the number of configurations whose interval lies entirely below its own, so tied "
    "configurations share a rank. Speedups are baseline time / configuration time (> 1: "
    "faster than the baseline). `runs.csv` keeps every run with its own within-run "
    "estimate; `configurations.csv` has the pooled rows."
)

_LEGACY_DATA = (
    "**Legacy data.** RLlib 1.x runs (Tune `progress.csv` + `params.json`) are mapped "
    "onto the canonical columns (docs/report.md). Their `timers/*_time_ms` are means "
    "over a sliding window of the last 10 iterations; the report inverts the window "
    "(x_k = x_{k-10} + 10 (m_k - m_{k-1})) to recover per-iteration phase times, "
    "checks that they are non-negative and sum to at most `time_this_iter_s`, and "
    "keeps the window means as `*_win10` columns. Phase times are given both ways: the "
    "study's (the mean of the window means over the non-warm-up iterations, "
    "`<phase>_study_mean` in the tables) and rlperf's (the mean of the per-iteration "
    "values over the same iterations), side by side with the difference, so that they "
    "can be checked against the study's published numbers; the time per iteration, "
    "rankings and speedups are the same both ways. GPU utilisation and GPU memory are "
    "GPUtil fractions converted to %, and the memory figure is occupancy "
    "(`gpu{i}_mem_used_pct`), not NVML's memory-bus utilisation. `episode_reward_mean` "
    "is smoothed over the last 100 episodes. The study's warm-up rule (drop iterations "
    "before the first finished episode) is applied. Config axes come from `params.json` "
    "and the run names; the machines' fingerprints from the study's README."
)

_FILES = (
    "Tables: `runs.csv` (one row per cell, i.e. per run), `configurations.csv` (one row per "
    "configuration, repeats pooled), `iterations.csv` (training, per iteration), "
    "`latency.csv` (inference samples), `gate.csv` (with `--gate`), each also as Parquet. "
    "Figures: `figures/*.png` and `.svg`."
)


def document(
    res: ReportResult, plans: dict[str, AxisPlan], sweeps: Sequence[Path], paths: Sequence[Path]
) -> list[render.Block]:
    """Every block of the report, in reading order."""
    blocks = _summary(res, paths)
    blocks += _methods(res, sweeps)
    blocks += _targets_section(res)
    blocks += search_section(res.searches)  # rlperf.report.search
    others = [f for f in plans if f not in OBJECTIVES and f != SERVE_FAMILY]
    for fam in ("training", "inference", *others):
        if fam in plans:
            blocks += _family_section(res, fam, plans[fam])
    blocks += serve_section(res)  # rlperf.report.serve: ranked by rate, not by time
    blocks += _figures_section(res)
    blocks += _fingerprints_section(res.fingerprint_groups)
    blocks += _cells_section(res, plans)
    return blocks


def _summary(res: ReportResult, paths: Sequence[Path]) -> list[render.Block]:
    """Title, what was read, warnings and findings."""
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    n_ok = sum(c.completed for c in res.cells)
    read = render.Para(
        f"Generated {now} from {len(res.cells)} cells ({n_ok} completed; "
        f"{sum(not s.duplicate for s in res.skipped)} unreadable and "
        f"{sum(s.duplicate for s in res.skipped)} duplicate folders skipped) under "
        + ", ".join(f"`{p}`" for p in paths)
        + "."
    )
    findings = [f.text for f in res.findings] + serve_findings(res.serve)
    findings = findings or ["No completed cell to compare."]
    return [
        render.Heading("rlperf report", 1),
        read,
        *[render.Warn(w) for w in res.warnings],
        render.Heading("Findings", 2),
        render.Bullets(findings),
        *_gate_section(res),
    ]


def _targets_section(res: ReportResult) -> list[render.Block]:
    """Time-to-target ranking (:mod:`rlperf.report.targets`); the runs that missed listed."""
    t = res.targets
    if t is None or t.empty:
        return []
    shown = pd.DataFrame({
        "rank": t["rank"], "configuration": t["label"], "target": t["target"],
        "judged on": t["judge"], "reached": [f"{r}/{n}" for r, n in zip(t["reached"], t["runs"],
                                                                         strict=True)],
        "median time to target [s]": [("≥ " if c else "") + f"{v:.1f}" for v, c in
                                      zip(t["median_time_to_target_s"], t["time_censored"],
                                          strict=True)],
        "median env steps": [("≥ " if c else "") + f"{v:.0f}" for v, c in
                             zip(t["median_env_steps_to_target"], t["steps_censored"],
                                 strict=True)],
    })  # fmt: skip
    missed = [m for m in t["missed"] if m]
    text = (
        "Configurations ranked by median time to target (training seconds since the "
        "algorithm was built, evaluation left out); a run that missed counts at its budget, "
        "so a median marked ≥ is a lower bound. "
        + ("Runs that missed: " + ", ".join(f"`{m}`" for m in " ".join(missed).split()) + "."
           if missed else "Every run reached its target.")
    )  # fmt: skip
    return [render.Heading("Time to target", 2), render.Para(text), render.Table(shown)]


def _gate_section(res: ReportResult) -> list[render.Block]:
    """``--gate``: the verdict and one row per configuration."""
    if res.gate is None:
        return []
    units = {fam: a.unit for fam, a in res.analyses.items()}
    head, *_, verdict = gate.lines(res.gate, units)
    rows = gate.table(res.gate)
    table = pd.DataFrame({
        "verdict": rows["verdict"], "family": rows["family"], "configuration": rows["label"],
        f"speedup [{level()} CI]": [_ci(v, a, b) for v, a, b in
                                   zip(rows["speedup"], rows["speedup_ci_low"],
                                       rows["speedup_ci_high"], strict=True)],
        "candidate": [_ci(v, a, b) for v, a, b in zip(rows["candidate_value"],
                      rows["candidate_ci_low"], rows["candidate_ci_high"], strict=True)],
        "baseline": [_ci(v, a, b) for v, a, b in zip(rows["baseline_value"],
                     rows["baseline_ci_low"], rows["baseline_ci_high"], strict=True)],
        "runs (candidate / baseline)": [f"{_count(a)} / {_count(b)}" for a, b in zip(
            rows["candidate_runs"], rows["baseline_runs"], strict=True)],
        "note": rows["note"],
    })  # fmt: skip
    return [
        render.Heading("Gate", 2),
        render.Para(f"{head.removeprefix('gate: ')}. A regression is a configuration whose "
                    "speedup interval (baseline / candidate) lies entirely below 1 − the "
                    "tolerance; `missing` ones (no completed candidate run) fail too."),
        render.Table(table),
        render.Para(f"**{verdict.removeprefix('gate: ')}**"),
    ]  # fmt: skip


# --------------------------------------------------------------------------- methods


def _methods(res: ReportResult, sweeps: Sequence[Path]) -> list[render.Block]:
    """How the numbers were obtained, one paragraph per topic."""
    text = [
        *_warmup_text(res),
        _exclusions_text(res),
        _concurrency_text(res.cells, sweeps),
        _fingerprints_text(res),
        energy_text(res.cells, res.runs),
    ]
    if res.analyses:  # families ranked by a time (serve cells: their own section's text)
        text.append(_statistics_text(res.analyses))
    if any(c.source == "legacy" for c in res.cells):
        text.append(_LEGACY_DATA)
    return [render.Heading("Methods", 2), *[render.Para(t) for t in text if t]]


def _excluded_text(df: pd.DataFrame) -> str:
    """``"12 (warmup 10, fault 2)"``: excluded rows in all and per reason."""
    reasons = df.loc[df["excluded"].ne(""), "excluded"].value_counts()
    if reasons.empty:
        return "0"
    return f"{int(reasons.sum())} (" + ", ".join(f"{k} {v}" for k, v in reasons.items()) + ")"


def _warmup_text(res: ReportResult) -> list[str]:
    text = []
    it = res.iterations
    if not it.empty:
        rules = sorted({c.warmup_rule for c in res.cells if c.family == "training"})
        text.append(
            f"**Warm-up.** Training iterations with a reason in the `excluded` column "
            f"(warm-up, ...) are kept in `iterations.csv` but left out of every mean, "
            f"interval, ranking and figure: {_excluded_text(it)} of {len(it)} iterations in "
            f"{it['cell'].nunique()} training cells. Warm-up rules: " + "; ".join(rules) + "."
        )
    if not res.latency.empty:
        text.append(
            f"Inference cells: the first steps (`excluded` = `warmup` in `steps.csv`) are left "
            f"out ({_excluded_text(res.latency)} samples); the study's rollout files kept "
            "only per-episode or per-run means of every step, with nothing removed."
        )
    return text


def _exclusions_text(res: ReportResult) -> str:
    incomplete = [c for c in res.cells if not c.completed]
    dups = sum(s.duplicate for s in res.skipped)
    return (
        f"**Excluded.** {len(res.skipped) - dups} folder(s) or file(s) could not be read "
        f"(listed under *Skipped*); {dups} duplicate folder(s), copies of a run already "
        "read (same Tune experiment id, or same host and start time), count once; "
        f"{len(incomplete)} "
        "cell(s) did not complete (status failed, interrupted or partial): they appear in "
        "`runs.csv` and `iterations.csv` but are not ranked or plotted."
    )


def _concurrency_text(cells: Sequence[Cell], sweeps: Sequence[Path]) -> str:
    conc, _ = _concurrency(cells)
    ran_with = sorted({int(c.concurrent_cells) for c in cells if c.concurrent_cells})
    if ran_with:
        conc += (
            "; the launcher ran them with max_concurrent_trials="
            + "/".join(map(str, ran_with))
            + (" (cells shared the machine)" if max(ran_with) > 1 else " (one cell at a time)")
        )
    launch = _launchers(sweeps)
    return f"**Concurrency.** {conc}." + (" Sweeps: " + "; ".join(launch) + "." if launch else "")


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


def _fingerprints_text(res: ReportResult) -> str:
    groups = res.fingerprint_groups
    fp_list = ", ".join(f"{g.name}: {g.machine or 'unknown'}" for g in groups.values())
    return (
        f"**Fingerprints.** {len(groups)} distinct hardware/software fingerprint(s) "
        f"({fp_list}); "
        "host names, start times, affinity masks and the config are not compared. "
        + (
            "Tables that mix fingerprints carry a warning."
            if res.mixed
            else "Every comparison is within one fingerprint."
        )
    )


def _statistics_text(analyses: dict[str, FamilyAnalysis]) -> str:
    objs = "; ".join(f"{fam}: {a.statistic} of `{a.metric}`" for fam, a in analyses.items())
    confs = [c for a in analyses.values() for c in a.configurations.values() if c.completed]
    repeated = [c.repeats for c in confs if c.repeats > 1]
    repeats = f"each of the {len(confs)} configuration(s) ran once"
    if repeated:
        lo, hi = min(repeated), max(repeated)
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        repeats = (
            f"{len(repeated)} of {len(confs)} configuration(s) ran more than once ({span} runs)"
        )
    return _STATISTICS.format(objectives=objs, repeats=repeats, level=level(),
                              resamples=N_RESAMPLES)  # fmt: skip


# --------------------------------------------------------------------------- families


def _family_section(res: ReportResult, fam: str, plan: AxisPlan) -> list[render.Block]:
    """What differs, the speedup baseline, and one ranked table per model."""
    shown = [a for a in plan.axes if a != "model"]
    common = ", ".join(f"{k}={v}" for k, v in plan.constants.items() if v is not None)
    blocks: list[render.Block] = [
        render.Heading(_FAMILY_TITLES.get(fam, fam), 2),
        render.Para(
            "Configurations differ in: "
            + (", ".join(f"`{a}`" for a in shown) or "nothing")
            + (f". Common to all: {common}." if common else ".")
        ),
    ]
    a = res.analyses.get(fam)
    if a is not None and a.baselines:
        how = (
            "`--baseline`" if a.baseline_chosen else "default: slowest configuration of each model"
        )
        blocks.append(
            render.Para(
                f"Speedup baseline ({how}): "
                + "; ".join(f"{m}: `{plan.configs[c]}`" for m, c in sorted(a.baselines.items()))
                + "."
            )
        )
    confs = res.configurations
    if confs.empty:
        return blocks
    rows_all = confs[(confs["family"] == fam) & (confs["status"] == "completed")]
    for model in sorted(rows_all["model"].dropna().astype(str).unique()):
        blocks += _model_tables(res, fam, model, rows_all[rows_all["model"].astype(str) == model])
    return blocks


_RUNS_CAPTION = (
    "One row per configuration. runs > 1: the configuration ran several times (cells differ "
    "only in seed); its value is the geometric mean of its runs' values and the interval "
    "is run to run. runs = 1: the interval is over that run's samples."
)


_LEGACY_CAPTION = (
    "Legacy RLlib 1.x runs both ways: phase times (mean s per non-warm-up iteration) as the "
    "study computed them (10-iteration window means) / as rlperf does (per iteration), and "
    "rlperf's difference from the study"
)


def _model_tables(
    res: ReportResult, fam: str, model: str, rows: pd.DataFrame
) -> list[render.Block]:
    """One model's ranked table, and for legacy runs the study's way side by side."""
    rows = rows.sort_values(["objective_value", "config"], na_position="last")
    blocks: list[render.Block] = [render.Heading(model, 3)]
    if (fam, model) in res.mixed:
        blocks.append(render.Warn(_mixed_text(res.mixed[(fam, model)], res.fingerprint_groups)))
    table = _training_table(rows) if fam == "training" else _inference_table(rows)
    caption = _RUNS_CAPTION if (_col(rows, "repeats").fillna(1) > 1).any() else ""
    blocks.append(render.Table(table, caption))
    legacy = side_by_side(rows) if fam == "training" else pd.DataFrame()
    if not legacy.empty:
        blocks.append(render.Table(legacy, _LEGACY_CAPTION))
    return blocks


def _mixed_text(names: list[str], groups: dict[str, FingerprintGroup]) -> str:
    desc = "; ".join(
        f"{n} = {groups[n].machine or 'unknown'} ({len(groups[n].cells)} cells)" for n in names
    )
    diff = differing_keys(groups[n].fingerprint for n in names)
    return (
        f"rows of this table were recorded on different hardware or software: {desc}. "
        f"Differing fingerprint fields: {', '.join(diff) or 'n/a'}."
    )


def _f(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)) or v is pd.NA:
        return ""
    if isinstance(v, float | np.floating):
        size = abs(float(v))
        if size >= 1000:
            return f"{v:,.0f}"
        return f"{v:.0f}" if size >= 10**digits else f"{v:.{digits}g}"
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


def _cells(rows: pd.DataFrame) -> list[str]:
    """A configuration's cells as code spans."""
    return [", ".join(f"`{c}`" for c in str(v).split("; ")) for v in rows["cells"]]


def _identity(rows: pd.DataFrame) -> dict[str, Any]:
    """rank, configuration, runs and cells columns of a configuration table."""
    return {
        "rank": rows.apply(_rank, axis=1).to_numpy(),
        "configuration": rows["config"].to_numpy(),
        "runs": _col(rows, "repeats").map(_count).to_numpy(),
        "cells": _cells(rows),
    }


def _training_table(rows: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            **_identity(rows),
            "iters (warm-up)": [
                f"{_count(i)} ({_count(w)})"
                for i, w in zip(
                    _col(rows, "iterations"), _col(rows, "warmup_iterations"), strict=True
                )  # fmt: skip
            ],
            f"time/iter s [{level()} CI]": _ci_col(rows, "objective"),
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
    if _col(rows, "gpu_energy_j").notna().any():
        out["GPU W"] = _fmt_col(rows, "gpu_power_w_mean")
        out["GPU J/env step"] = _fmt_col(rows, "energy_per_env_step_j")
        out["GPU J/trained step"] = _fmt_col(rows, "energy_per_trained_step_j")
    if "speedup" in rows:
        out[f"speedup [{level()} CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


def _inference_table(rows: pd.DataFrame) -> pd.DataFrame:
    m = "action_ms" if _col(rows, "action_ms_p50").notna().any() else "forward_ms"
    out = pd.DataFrame(
        {
            **_identity(rows),
            "samples": [
                f"{_count(n)} {_GRANULARITY.get(str(g), '')}".strip()
                for n, g in zip(_col(rows, "samples"), _col(rows, "granularity"), strict=True)
            ],
            f"p50 ms [{level()} CI]": _ci_col(rows, "objective"),
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
    if _col(rows, "fidelity_verdict").notna().any():
        out["fidelity"] = _col(rows, "fidelity_verdict").fillna("").astype(str).to_numpy()
    if _col(rows, "model_gzip_bytes").notna().any():
        for name, values in _compression_columns(rows).items():
            out[name] = values
    if "speedup" in rows:
        out[f"speedup [{level()} CI]"] = _ci_col(rows, "speedup")
    out["fp"] = rows["fingerprint"].to_numpy()
    return out


def _compression_columns(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Return difference against the torch policy with its paired interval, sizes, sparsity,
    peak memory and, for a fine-tuned variant, its distillation's held-out MSE and rate."""
    num = {c: pd.to_numeric(_col(rows, f"fidelity_{c}"), errors="coerce").to_numpy(float)
           for c in ("return_diff", "return_diff_low", "return_diff_high")}  # fmt: skip
    tie = _col(rows, "fidelity_return_tie").astype("boolean").fillna(False).to_numpy(bool)
    capped = _col(rows, "fidelity_saturates").astype("boolean").fillna(False).to_numpy(bool)
    diff = []
    for i in range(len(rows)):
        d, lo, hi = (num[c][i] for c in ("return_diff", "return_diff_low", "return_diff_high"))
        text = "" if not np.isfinite(d) else f"{d:+.3g} [{_f(lo)}, {_f(hi)}]"
        text += " saturates" if capped[i] else (" tie" if tie[i] and text else "")
        diff.append(text)
    return {
        f"return diff [{level()} CI]": np.asarray(diff, dtype=object),
        "size B": _fmt_col(rows, "model_size_bytes", 0),
        "gzip B": _fmt_col(rows, "model_gzip_bytes", 0),
        "sparsity": _fmt_col(rows, "weight_sparsity", 2),
        "peak RSS MB": _fmt_col(rows, "peak_rss_mb", 0),
        "distil MSE (lr)": np.asarray(
            [
                f"{_f(m)} ({_f(lr, 1)})" if _f(m) else ""
                for m, lr in zip(
                    _col(rows, "finetune_holdout_mse"), _col(rows, "finetune_lr"), strict=True
                )
            ],
            dtype=object,
        ),
    }


# --------------------------------------------------------------------------- appendix


def _figures_section(res: ReportResult) -> list[render.Block]:
    blocks: list[render.Block] = [render.Heading("Figures", 2)]
    for name, (_, caption) in figs.FIGURES.items():
        if name in res.figures:
            blocks.append(render.Image(res.figures[name], caption))
    if SERVE_FIGURE in res.figures:
        blocks.append(render.Image(res.figures[SERVE_FIGURE], SERVE_CAPTION))
    if not res.figures and not res.figures_skipped:
        blocks.append(render.Para("Figures were not drawn (`--no-figures`)."))
    if res.figures_skipped:
        why = "; ".join(f"{n} ({why})" for n, why in res.figures_skipped.items())
        blocks.append(render.Para(f"Not drawn: {why}."))
    return blocks


def _fingerprints_section(groups: dict[str, FingerprintGroup]) -> list[render.Block]:
    table = pd.DataFrame(
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
    return [render.Heading("Fingerprints", 2), render.Table(table)]


def _cells_section(res: ReportResult, plans: dict[str, AxisPlan]) -> list[render.Block]:
    groups = res.fingerprint_groups
    table = pd.DataFrame(
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
    blocks: list[render.Block] = [render.Heading("Cells", 2), render.Table(table)]
    if res.skipped:
        blocks.append(render.Heading("Skipped", 3))
        blocks.append(render.Bullets([f"`{s.path}`: {s.reason}" for s in res.skipped]))
    blocks.append(render.Para(_FILES))
    return blocks
