"""Write rliable 1.2's values on fixed arrays to tests/data/rliable_reference.json.

rlperf implements the return statistics of Agarwal et al. 2021 itself
(:mod:`rlperf.report.stats.robust`); ``tests/report/stats/test_report_robust.py`` holds them against
the numbers the paper's own library, rliable 1.2, gives on the arrays written here.
rliable is not a dependency of rlperf (an archived sdist that needs ``arch``), so this
script runs in a throwaway virtual environment::

    python3 -m venv /tmp/rl
    /tmp/rl/bin/pip install rliable==1.2.0 numpy scipy "pandas<3"
    /tmp/rl/bin/python scripts/rliable_reference.py   # from the repository root

(``pandas<3``: arch 7.2, which rliable imports, fails to import under pandas 3.)

Cases: ``suite``, 3 algorithms x 5 runs x 4 tasks of normal scores (seeded numpy), and
``episodes``, one task, two groups of 12 and 10 integer returns (many ties, unequal run
counts). For each: the IQM with its stratified percentile-bootstrap interval, the
probability of improvement of every other group over the first with its interval, and
the performance profile with its band at a few taus. Every rliable call is preceded by
``np.random.seed(seed)`` (rliable draws its bootstrap indices from NumPy's global
RandomState), once with ``reps`` resamples (rlperf with the same seed must give the same
interval) and once with ``reps_precise`` resamples at another seed (an interval nearly
free of Monte Carlo error, for a test with rlperf's own seed).
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from rliable import library as rly
from rliable import metrics

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "rliable_reference.json"
REPS = 2000
REPS_PRECISE = 50_000
SEED = 7
SEED_PRECISE = 11
LEVEL = 0.95


def suite_scores() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2021)
    task_means = np.array([0.0, 1.0, 3.0, 10.0])
    shifts = {"A": 0.0, "B": 0.4, "C": 1.5}
    return {
        name: np.round(task_means + shift + rng.normal(0.0, 1.0, size=(5, 4)), 6)
        for name, shift in shifts.items()
    }


def episode_scores() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(25)
    return {
        "base": rng.integers(0, 6, size=12).astype(float)[:, None],
        "variant": rng.integers(1, 7, size=10).astype(float)[:, None],
    }


def interval(estimate: np.ndarray, ci: np.ndarray) -> dict[str, float]:
    return {
        "value": float(np.squeeze(estimate)),
        "low": float(np.squeeze(ci[0])),
        "high": float(np.squeeze(ci[1])),
    }


def iqm_values(scores: dict[str, np.ndarray], reps: int, seed: int) -> dict[str, dict]:
    out = {}
    for name, arr in scores.items():
        np.random.seed(seed)
        point, ci = rly.get_interval_estimates(
            {name: arr},
            lambda s: np.array([metrics.aggregate_iqm(s)]),
            reps=reps,
            confidence_interval_size=LEVEL,
        )
        out[name] = interval(point[name], ci[name])
    return out


def improvement_values(scores: dict[str, np.ndarray], reps: int, seed: int) -> dict[str, dict]:
    names = list(scores)
    ref = names[0]
    out = {}
    for name in names[1:]:
        key = f"{name}>{ref}"
        np.random.seed(seed)
        point, ci = rly.get_interval_estimates(
            {key: (scores[name], scores[ref])},
            metrics.probability_of_improvement,
            reps=reps,
            confidence_interval_size=LEVEL,
        )
        out[key] = interval(point[key], ci[key])
    return out


def profile_values(
    scores: dict[str, np.ndarray], taus: np.ndarray, reps: int, seed: int
) -> dict[str, dict]:
    out = {}
    for name, arr in scores.items():
        np.random.seed(seed)
        profile, ci = rly.create_performance_profile(
            {name: arr}, taus, reps=reps, confidence_interval_size=LEVEL
        )
        out[name] = {
            "fraction": profile[name].tolist(),
            "low": ci[name][0].tolist(),
            "high": ci[name][1].tolist(),
        }
    return out


def case(scores: dict[str, np.ndarray], taus: np.ndarray) -> dict:
    return {
        "scores": {name: arr.tolist() for name, arr in scores.items()},
        "taus": taus.tolist(),
        "seed": SEED,
        "reps": REPS,
        "iqm": iqm_values(scores, REPS, SEED),
        "probability_of_improvement": improvement_values(scores, REPS, SEED),
        "profile": profile_values(scores, taus, REPS, SEED),
        "seed_precise": SEED_PRECISE,
        "reps_precise": REPS_PRECISE,
        "iqm_precise": iqm_values(scores, REPS_PRECISE, SEED_PRECISE),
        "probability_of_improvement_precise": improvement_values(
            scores, REPS_PRECISE, SEED_PRECISE
        ),
        "profile_precise": profile_values(scores, taus, REPS_PRECISE, SEED_PRECISE),
    }


def main() -> None:
    reference = {
        "about": "rliable 1.2 on fixed arrays; written by scripts/rliable_reference.py",
        "versions": {p: version(p) for p in ("rliable", "arch", "numpy", "scipy")},
        "level": LEVEL,
        "cases": {
            "suite": case(suite_scores(), np.array([-1.0, 0.5, 2.0, 4.0, 11.0])),
            "episodes": case(episode_scores(), np.array([0.0, 1.5, 3.0, 5.0])),
        },
    }
    OUT.write_text(json.dumps(reference, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
