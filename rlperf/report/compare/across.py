"""Tables across comparisons: across workloads on a work-normalised throughput, and across
machines (the same configurations on two or more fingerprints).

**Across workloads.** Cells of different workloads (:mod:`rlperf.report.compare.workloads`) are
never ranked on their comparison's objective. They meet only on a throughput that fits
every Atari protocol: emulator frames per second = env steps per second x the protocol's
mean emulator frames per env step (``env_protocol.frames_per_step``: ALE frameskip x
agent skip). Pong v5 with a fixed skip of 4 and the study's Pong v0 (a random skip of 2
to 4, mean 3) do not do the same work per env step, but they do per frame. The rank is
one of throughput only (the work per frame still differs: model, algorithm, batch), and
is left out when the workloads' algorithms differ: which algorithm is best needs a
target (``train.stop.episode_return``; the time-to-target table answers it). Cells whose
protocol has no frames per step (a gymnasium or custom env) are listed on env steps per
second, unranked.

**Across machines.** A configuration (:func:`rlperf.report.stats.repeats.configuration_key`)
measured on several fingerprints is one row: its objective on every machine and each
machine's speedup over the first (a ratio of the two estimates, as speedups everywhere
in the report), and the fingerprint fields that differ between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rlperf.report.compare.comparison import Comparison
from rlperf.report.compare.findings import FamilyAnalysis, level
from rlperf.report.read.fingerprints import differing_keys
from rlperf.report.stats import estimates
from rlperf.report.stats.repeats import Configuration
from rlperf.results.columns import ENV_STEPS_PER_S, FRAMES_PER_S
from rlperf.stats import intervals
from rlperf.stats.intervals import Estimate
from rlperf.vocabulary import Family


@dataclass
class AcrossTable:
    """One cross-comparison table: its heading, the sentence saying what it compares on and
    holds constant, and its rows (numbers, unformatted)."""

    kind: str  # "workloads" or "machines"
    family: str
    heading: str
    caption: str
    rows: pd.DataFrame
    ranked: bool = False
    notes: list[str] = field(default_factory=list)


def frames_per_step(conf: Configuration) -> float:
    """Mean emulator frames per env step of the configuration's protocol (NaN: not Atari or
    not recorded)."""
    for cell in conf.completed:
        value = cell.env_protocol.get("frames_per_step")
        if isinstance(value, int | float) and value > 0:
            return float(value)
    return float("nan")


def across_workloads(analysis: FamilyAnalysis) -> AcrossTable | None:
    """The training family's configurations side by side across workloads (None with one
    workload): env steps per second and emulator frames per second with their intervals,
    ranked on frames per second where every workload runs the same algorithm."""
    confs = [c for c in analysis.configurations.values() if c.id in analysis.throughput]
    workloads = {c.workload for c in confs}
    if analysis.family != Family.training or len(workloads) < 2:
        return None
    algos = {str(c.completed[0].axes.get("algo") or "") for c in confs if c.completed}
    rows = []
    frames: dict[str, Estimate] = {}
    for conf in confs:
        tp = analysis.throughput[conf.id]
        fps = frames_per_step(conf)
        row = {"configuration": conf.id, "workload": conf.workload,
               ENV_STEPS_PER_S: tp.value, "env_steps_per_s_low": tp.low,
               "env_steps_per_s_high": tp.high, "frames_per_step": fps,
               FRAMES_PER_S: tp.value * fps, "frames_per_s_low": tp.low * fps,
               "frames_per_s_high": tp.high * fps}  # fmt: skip
        if np.isfinite(fps) and np.isfinite(tp.value):
            frames[conf.id] = tp.scaled(fps)
        rows.append(row)
    ranked = len(algos) == 1 and len(frames) >= 2
    df = pd.DataFrame(rows)
    if ranked:
        ranks = estimates.rank_with_ties(frames, lower_is_better=False)
        df["rank"] = df["configuration"].map(ranks).astype("Int64")
    df = df.sort_values([FRAMES_PER_S, ENV_STEPS_PER_S], ascending=False, na_position="last")
    caption = (
        f"{len(workloads)} workloads (they differ in what the headings of the tables below "
        "name) side by side on a work-normalised throughput: emulator frames per second = env "
        "steps per second x the env protocol's mean emulator frames per env step (ALE "
        f"frameskip x agent skip), {level()} intervals. Env steps are not equal work across "
        "protocols; frames are, but the work per frame (model, algorithm, batch) still "
        "differs, so this ranks throughput only."
    )
    notes = []
    if not ranked and len(algos) > 1:
        notes.append(
            "Not ranked: the workloads run different algorithms ("
            + ", ".join(sorted(a for a in algos if a))
            + "); which algorithm is best needs a target return (train.stop.episode_return), "
            "ranked in Time to target."
        )
    if len(frames) < len(df):
        notes.append(
            f"{len(df) - len(frames)} configuration(s) have no emulator frames per step (not "
            "an Atari protocol, or none recorded): listed on env steps per second, unranked."
        )
    heading = "Across workloads: emulator frames per second"
    if not frames:  # no Atari protocol: env steps per second is all they share
        heading = "Across workloads: env steps per second"
        caption = (f"{len(workloads)} workloads side by side on env steps per second with "
                   f"{level()} intervals; an env step is not the same work across them "
                   "(algorithm, model, batch), so this is throughput only.")  # fmt: skip
        notes = [n for n in notes if "no emulator frames" not in n]
    return AcrossTable("workloads", analysis.family, heading, caption, df, ranked, notes)


def across_machines(
    comparison: Comparison, analyses: dict[str, FamilyAnalysis]
) -> list[AcrossTable]:
    """Per family: the configurations measured on two or more fingerprints, one row each,
    with every machine's estimate and its speedup over the first machine."""
    out = []
    for fam, confs in comparison.configurations.items():
        a = analyses.get(fam)
        if a is None:
            continue
        by_key: dict[str, list[Configuration]] = {}
        for conf in confs:
            if conf.id in a.estimates:
                by_key.setdefault(conf.key, []).append(conf)
        shared = {k: v for k, v in by_key.items() if len({c.fingerprint for c in v}) > 1}
        if not shared:
            continue
        machines = sorted({c.fingerprint for v in shared.values() for c in v})
        first = machines[0]
        rows = []
        for group in shared.values():
            on = {c.fingerprint: c for c in group}
            row: dict[str, object] = {"workload": group[0].workload,
                                      "configuration": group[0].id}  # fmt: skip
            obj = a.objective_for(group[0].id)
            row["objective"] = obj.label
            for m in machines:
                e = a.estimates.get(on[m].id) if m in on else None
                row[f"{m}"] = e
                if m != first and e is not None and first in on:
                    row[f"{m} over {first}"] = intervals.speedup(a.estimates[on[first].id], e)
            rows.append(row)
        fps = [comparison.groups[m].fingerprint for m in machines]
        diff = differing_keys(fps)
        names = "; ".join(f"{m} = {comparison.groups[m].machine or 'unknown'}" for m in machines)
        caption = (
            f"The same {len(rows)} configuration(s) measured on {len(machines)} machines "
            f"({names}), each on its comparison's objective with its {level()} interval; "
            f"speedups are the first machine's time over the other's (> 1: the other is "
            "faster). Fingerprint fields that differ: " + (", ".join(diff) or "none") + "."
        )
        out.append(AcrossTable("machines", fam, f"Across machines: {fam}", caption,
                               pd.DataFrame(rows), notes=list(diff)))  # fmt: skip
    return out


def machine_names(tables: Sequence[AcrossTable]) -> list[str]:
    """The fingerprints the machine tables compare."""
    return sorted({c for t in tables for c in t.rows.columns if " over " not in c} - {
        "workload", "configuration", "objective"})  # fmt: skip
