"""The report's Methods section: how the numbers were obtained, one paragraph per topic
(warm-up, exclusions, concurrency, fingerprints, energy, statistics, legacy data)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rlperf.errors import CellError
from rlperf.layout import EXCLUDED_COLUMN, MULTIRUN_FILE
from rlperf.report.compare.findings import FamilyAnalysis, level
from rlperf.report.export import render
from rlperf.report.read.cells import Cell
from rlperf.report.read.energy import energy_text
from rlperf.report.read.load import read_yaml
from rlperf.report.result import ReportResult
from rlperf.report.sections.base import Section
from rlperf.vocabulary import Family

_STATISTICS = (
    "**Statistics.** Configurations are compared within their comparison set (same model, "
    "env protocol, algorithm, train batch and target) on {objectives}, over the non-warm-up "
    "iterations or steps. Cells that differ only in `seed` (on one "
    "fingerprint) are runs of one configuration and are pooled: {repeats}. A configuration "
    "run several times is estimated on its runs' values (each run's mean, median or ratio, "
    "never the pooled iterations, which are not independent samples of the configuration): "
    "their geometric mean, with a {level} Student-t interval on their logarithms (run to "
    "run; a sweep that decided its runs' number by looking uses its per-look level, and a "
    "history prior's moderated variance where one decided). A configuration run once has a "
    "{level} interval over its run's batches of successive iterations or steps (about "
    "n^(1/3) batches; Student's t over the batch statistics), since successive iterations "
    "are autocorrelated; it describes that run, not run-to-run variance, and never decides. "
    "A speedup's interval is Welch's interval of the difference of the two estimates' "
    "logarithms, taken back: run to run it is the test that separates them, so a speedup "
    "whose interval excludes 1 and the verdict agree. Two configurations whose ratio's "
    "interval holds 1 are called tied; a rank is 1 + the number of configurations that "
    "ratio shows faster, so tied configurations share a rank. Speedups are "
    "baseline time / configuration time (> 1: faster than the baseline). `runs.csv` keeps "
    "every run with its own within-run estimate; `configurations.csv` has the pooled rows "
    "(docs/report.md#statistics)."
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


def methods_section(res: ReportResult, sweeps: Sequence[Path]) -> list[render.Block]:
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
    paras: list[render.Block] = [render.Para(t) for t in text if t]
    return [render.Heading("Methods", 2),
            render.Collapsed(f"How the numbers were obtained ({len(paras)} paragraphs)",
                             paras)]  # fmt: skip


def _excluded_text(df: pd.DataFrame) -> str:
    """``"12 (warmup 10, fault 2)"``: excluded rows in all and per reason."""
    reasons = df.loc[df[EXCLUDED_COLUMN].ne(""), EXCLUDED_COLUMN].value_counts()
    if reasons.empty:
        return "0"
    return f"{int(reasons.sum())} (" + ", ".join(f"{k} {v}" for k, v in reasons.items()) + ")"


def _warmup_text(res: ReportResult) -> list[str]:
    text = []
    it = res.iterations
    if not it.empty:
        rules = sorted({c.warmup_rule for c in res.cells if c.family == Family.training})
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
            cfg = read_yaml(sweep / MULTIRUN_FILE)
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
    used: dict[str, list[str]] = {}
    for fam, a in analyses.items():
        for obj in a.objectives.values():
            names = used.setdefault(fam, [])
            if obj.name not in names:
                names.append(obj.name)
    objs = "; ".join(f"{fam}: " + ", ".join(names) for fam, names in used.items())
    confs = [c for a in analyses.values() for c in a.configurations.values() if c.completed]
    repeated = [c.repeats for c in confs if c.repeats > 1]
    repeats = f"each of the {len(confs)} configuration(s) ran once"
    if repeated:
        lo, hi = min(repeated), max(repeated)
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        repeats = (
            f"{len(repeated)} of {len(confs)} configuration(s) ran more than once ({span} runs)"
        )
    return _STATISTICS.format(objectives=objs, repeats=repeats, level=level())


SECTION = Section(
    name="methods",
    title="Methods",
    order=110,
    needs=(
        "cells",
        "skipped",
        "runs",
        "iterations",
        "latency",
        "analyses",
        "fingerprint_groups",
        "mixed",
        "sweeps",
    ),
    render=lambda inputs: methods_section(inputs.result, inputs.sweeps),
)
