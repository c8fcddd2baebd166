"""``train.stop.precision``: a training run stops adding iterations once the interval of its
time per 1 000 env steps (over batch means of the counted iterations, at planned looks) is
within the target, and records why; checked on synthetic iterations and on a real run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlperf.errors import ConfigError
from rlperf.layout import METRICS_FILE, SUMMARY_FILE
from rlperf.results.record import TrainRecord
from rlperf.training.target import StopCheck
from rlperf.validation.validate import validate_config
from tests.conftest import TINY_TRAIN, run_rlperf


def _rows(spread: float, n: int, seed: int = 0) -> list[dict]:
    """Iterations of 1 000 env steps taking 1 s ± ``spread``; the first is warm-up."""
    rng = np.random.default_rng(seed)
    return [{"iteration": i, "env_steps": 1000, "iter_s": float(1 + rng.normal(0, spread)),
             "excluded": "warmup" if i == 1 else "", "episode_return_mean": np.nan,
             "eval_return_mean": np.nan, "eval_s": 0.0} for i in range(1, n + 1)]  # fmt: skip


def _run(check: StopCheck, rows: list[dict]) -> tuple[str | None, int]:
    for row in rows:
        hit = check.observe(row)
        if hit is not None:
            return hit, row["iteration"]
    return None, rows[-1]["iteration"]


def test_steady_iterations_stop_at_the_first_look_that_is_precise(compose_cfg) -> None:
    """1 % apart: the looks at 8 and 12 counted iterations (2 batches, about n^(1/3); t = 64
    at the per-look level) are too wide for ±5 %; the one at 18 (3 batches, t = 9.9) is within
    it: the run stops at iteration 19."""
    check = StopCheck(compose_cfg("train.stop.precision=0.05", "train.iterations=40"))
    hit, at = _run(check, _rows(0.01, 40))
    assert (hit, at) == ("precision", 19)
    s = check.record(TrainRecord()).data
    assert s["stop"]["stopped_by"] == "precision" and s["stop"]["precision"] == 0.05
    p = s["precision"]
    assert p["reached"] is True and p["at_iteration"] == 19 and p["values"] == 18
    assert p["looks"] == [8, 12, 18, 27, 39] and p["objective"] == "s_per_1k_env_steps"
    assert p["low"] < p["estimate"] < p["high"] and p["estimate"] == pytest.approx(1.0, abs=0.01)
    assert p["relative_half_width"] <= 0.05


def test_noisy_iterations_run_to_the_cap_and_say_so(compose_cfg) -> None:
    check = StopCheck(compose_cfg("train.stop.precision=0.05", "train.iterations=30"))
    hit, at = _run(check, _rows(0.3, 30, seed=1))
    assert hit is None and at == 30
    p = check.record(TrainRecord()).data["precision"]
    assert p["reached"] is False and p["at_iteration"] is None
    assert p["relative_half_width"] > 0.05 and p["values"] == 29  # the last look's interval


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("train.stop.precision=1.5",), r"train.stop.precision=1.5 must be in \(0, 1\)"),
        (("train.stop.precision=0.05", "train.iterations=4"),
         "needs at least 4 counted iterations .* at most 3"),
        (("train.stop.precision=0.05", "train.stop.episode_return=100", "train.iterations=20"),
         "time to target, one value per run"),
    ],
)  # fmt: skip
def test_a_precision_that_cannot_work_is_refused_before_ray(compose_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(compose_cfg("env=cartpole", "model=mlp64", *overrides))


@pytest.mark.slow
def test_a_real_run_stops_at_a_planned_look_or_its_cap_and_says_which(tmp_path: Path) -> None:
    """A tiny CartPole run capped at 40 iterations with a ±90 % target: it stops at a planned
    look where the interval of its time per 1 000 env steps is within the target, else runs
    to the cap, and says which in summary.json and on the terminal. Whether a look reaches
    it depends on the machine's load (40 iterations give at most 3 batches at the per-look
    level: ±90 % needs the batch means within a coefficient of variation of about 0.16, and
    CI beside the other test worker once missed it): the test holds the wiring either way;
    the rule's arithmetic is checked on synthetic iterations above."""
    out = tmp_path / "run"
    args = [*TINY_TRAIN, "env=cartpole", "model=mlp64", "train.iterations=40",
            "train.stop.precision=0.9", "train.warmup_until_first_episode=false",
            f"hydra.run.dir={out}"]  # fmt: skip
    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / SUMMARY_FILE).read_text())
    p = s["precision"]
    assert p["looks"] == [8, 12, 18, 27, 39] and p["objective"] == "s_per_1k_env_steps"
    assert len(pd.read_csv(out / METRICS_FILE)) == s["iterations"]
    if p["reached"]:
        assert s["stop"]["stopped_by"] == "precision" and p["relative_half_width"] <= 0.9, p
        assert p["values"] in p["looks"] and p["at_iteration"] == s["iterations"] < 40
        assert f"train.stop.precision reached after iteration {p['at_iteration']}" in proc.stderr
    else:
        assert p["at_iteration"] is None and s["iterations"] == 40, p
        assert p["relative_half_width"] > 0.9 and p["values"] == 39
