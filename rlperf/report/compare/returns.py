"""Return comparisons that hold up: where the report compares returns (compression
variants and backends of one policy, algorithms and configurations on one env, seeds),
the interquartile mean with a stratified-bootstrap 95 % interval, the probability of
improvement over a reference and performance profiles (Agarwal et al. 2021, the methods
of :mod:`rlperf.report.stats.robust`).

The unit (:func:`rlperf.report.stats.robust.unit_of`) is the seed where every group has at
least 3 runs; else, for inference cells, the episode (each variant plays the same
seeded episodes as its reference); for training cells, which record one mean return per
iteration and no single episodes, the iteration's mean return over the last quarter of
each run's iterations, which the table says (iterations of one run are not independent:
such an interval describes that run, not the configuration).

A comparison of returns is made only between cells that play the same env protocol
(returns of two protocols are different scores): per inference workload, and per
env protocol among the training configurations.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rlperf.report.compare.comparison import Comparison
from rlperf.report.compare.workloads import short_env_texts
from rlperf.report.stats.repeats import Configuration
from rlperf.report.stats.robust import MIN_SEEDS, compare_returns, iqm, unit_of
from rlperf.results.columns import EPISODE_RETURN_MEAN
from rlperf.results.protocol import protocol_key, protocol_parts
from rlperf.specs.backends import BACKENDS
from rlperf.vocabulary import Family

#: The share of a training run's last iterations whose mean returns stand for it when
#: there are fewer than 3 seeds.
LAST_SHARE = 0.25


@dataclass
class ReturnComparison:
    """One comparison of returns: who is compared, in what unit, against which reference,
    the table (:func:`rlperf.report.stats.robust.compare_returns`) and its figure."""

    family: str
    title: str
    unit: str
    unit_text: str
    reference: str
    groups: dict[str, np.ndarray]
    table: pd.DataFrame
    figure: Path | None = None


def _final_return(cell_iterations: pd.DataFrame) -> float:
    returns = cell_iterations[EPISODE_RETURN_MEAN].dropna()
    return float(returns.iloc[-1]) if len(returns) else float("nan")


def _last_quarter(cell_iterations: pd.DataFrame) -> np.ndarray:
    returns = cell_iterations[EPISODE_RETURN_MEAN].dropna().to_numpy(dtype=float)
    if returns.size == 0:
        return returns
    k = max(1, int(np.ceil(LAST_SHARE * returns.size)))
    return returns[-k:]


def training_comparisons(comparison: Comparison) -> list[ReturnComparison]:
    """Per env protocol: the training configurations' returns side by side (two or more
    configurations with a return)."""
    by_protocol: dict[str, list[Configuration]] = {}
    for conf in comparison.configurations.get(Family.training, []):
        runs = [c for c in conf.completed if c.iterations is not None
                and EPISODE_RETURN_MEAN in c.iterations
                and c.iterations[EPISODE_RETURN_MEAN].notna().any()]  # fmt: skip
        if runs:
            key = protocol_key(runs[0].env_protocol) if runs[0].env_protocol else "?"
            by_protocol.setdefault(key, []).append(conf)
    out = []
    plan = comparison.plans.get(Family.training)
    envs = short_env_texts(comparison.families.get(Family.training, []))
    for confs in by_protocol.values():
        if len(confs) < 2 or plan is None:
            continue
        seeds = min(conf.repeats for conf in confs)
        labels = plan.configuration_labels
        if seeds >= MIN_SEEDS:
            unit, unit_text = "seed", "seed (each run's last mean return)"
            groups = {labels[c.id]: np.array([_final_return(r.iterations) for r in c.completed
                                              if r.iterations is not None])
                      for c in confs}  # fmt: skip
        else:
            unit = "iteration"
            unit_text = (f"iteration (fewer than {MIN_SEEDS} seeds: the mean returns of the "
                         f"last {LAST_SHARE:.0%} of each run's iterations, pooled over its "
                         "runs; iterations of one run are not independent)")  # fmt: skip
            groups = {labels[c.id]: np.concatenate([_last_quarter(r.iterations)
                                                    for r in c.completed
                                                    if r.iterations is not None])
                      for c in confs}  # fmt: skip
        groups = {k: v for k, v in groups.items() if np.isfinite(v).any()}
        if len(groups) < 2:
            continue
        first = confs[0].completed[0]
        parts = tuple(protocol_parts(first.env_protocol)) if first.env_protocol else ()
        env = envs.get(parts, " · ".join(parts) or "env unknown")
        best = max(groups, key=lambda k: iqm(groups[k][np.isfinite(groups[k])]))
        table = compare_returns(groups, unit, reference=best)
        out.append(ReturnComparison(Family.training, f"Training returns on {env}", unit, unit_text,
                                    best, groups, table))  # fmt: skip
    return out


def inference_comparisons(comparison: Comparison) -> list[ReturnComparison]:
    """Per inference workload: every configuration's episode returns (or its runs' mean
    returns where every configuration has 3+ runs), against the reference policy (the
    RLlib / torch backend where one ran)."""
    by_workload: dict[str, list[Configuration]] = {}
    for conf in comparison.configurations.get(Family.inference, []):
        if any(c.episodes is not None and "return" in c.episodes for c in conf.completed):
            by_workload.setdefault(conf.workload, []).append(conf)
    out = []
    plan = comparison.plans.get(Family.inference)
    for workload, confs in by_workload.items():
        if len(confs) < 2 or plan is None:
            continue
        labels = plan.configuration_labels
        seeds = min(conf.repeats for conf in confs)
        groups: dict[str, np.ndarray] = {}
        for conf in confs:
            per_run = [pd.to_numeric(c.episodes["return"], errors="coerce").dropna()
                       .to_numpy(dtype=float) for c in conf.completed
                       if c.episodes is not None and "return" in c.episodes]  # fmt: skip
            if seeds >= MIN_SEEDS:
                groups[labels[conf.id]] = np.array([r.mean() for r in per_run if r.size])
            else:
                groups[labels[conf.id]] = np.concatenate(per_run) if per_run else np.array([])
        groups = {k: v for k, v in groups.items() if v.size}
        if len(groups) < 2:
            continue
        unit = unit_of(seeds)
        reference = next((labels[c.id] for c in confs if labels[c.id] in groups
                          and _torch_policy(c.completed[0].axes.get("backend"))),
                         next(iter(groups)))  # fmt: skip
        unit_text = ("seed (each run's mean episode return)" if unit == "seed" else
                     "episode (the variants play the same seeded episodes)")  # fmt: skip
        out.append(ReturnComparison(Family.inference, f"Returns per variant: {workload}", unit,
                                    unit_text, reference, groups,
                                    compare_returns(groups, unit, reference)))  # fmt: skip
    return out


def return_comparisons(comparison: Comparison) -> list[ReturnComparison]:
    """Every comparison of returns the cells allow."""
    return [*training_comparisons(comparison), *inference_comparisons(comparison)]


def _torch_policy(backend: object) -> bool:
    """Whether a cell's backend runs RLlib's own torch policy (the variants' reference)."""
    spec = BACKENDS.get(str(backend))
    return spec is not None and spec.in_rllib
