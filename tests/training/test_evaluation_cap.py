"""Nothing runs unbounded without saying so (issue 28, point 1): the greedy evaluation's
episode cap, the env check's warning about a missing time limit, and the heartbeat.

The end-to-end case is a user's grid world that exploration finishes and the greedy
policy never does (tests/support/blind_grid.py), trained through the entry point.
"""

from __future__ import annotations

import io
import json
import math
import threading
import time
from types import SimpleNamespace

import pandas as pd
import pytest

from rlperf.console import Console, activated
from rlperf.envs.check import check_env
from rlperf.envs.factory import CAPPED_INFO, EVALUATION_CAP, make_env
from rlperf.errors import ConfigError
from rlperf.job_wrapper import Heartbeat
from rlperf.layout import METRICS_FILE, SUMMARY_FILE
from rlperf.results.record import TrainRecord
from rlperf.training.target import StopCheck, evaluation_cap, evaluation_settings
from rlperf.validation.validate import validate_config
from tests.conftest import TESTS, run_rlperf

GRID = ("env=custom", "env.entry_point=support.blind_grid:BlindGrid", "model=mlp64")
TARGET = "train.stop.episode_return=0.9"


@pytest.fixture
def tests_importable(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(TESTS))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), (27_000, "env")),  # Pong: ALE's 108 000-frame cap at 4 frames per step
        (("env=cartpole", "model=mlp64"), (500, "env")),  # CartPole-v1's registration
        (("env=cartpole", "model=mlp64", "env.max_episode_steps=80"), (80, "env")),
        (GRID, (10_000, "default")),  # no time limit of its own
        (
            (*GRID, "train.evaluation.max_episode_steps=300"),
            (300, "train.evaluation.max_episode_steps"),
        ),
    ],  # fmt: skip
)
def test_the_evaluation_cap_and_where_it_comes_from(
    compose_cfg, tests_importable, overrides, expected
) -> None:
    cfg = compose_cfg(*overrides, TARGET)
    assert evaluation_cap(cfg) == expected
    settings = evaluation_settings(cfg)
    assert (settings["max_episode_steps"], settings["max_episode_steps_from"]) == expected


@pytest.mark.parametrize(
    "override", ["train.evaluation.max_episode_steps=0", "console.heartbeat_s=-1"]
)
def test_bad_bounds_are_refused(compose_cfg, override: str) -> None:
    with pytest.raises(ConfigError, match=override.split("=")[0].replace(".", r"\.")):
        validate_config(compose_cfg(override, TARGET))


def test_the_cap_truncates_and_marks_only_what_it_ended(tests_importable) -> None:
    env = make_env(
        {"kind": "custom", "entry_point": "support.blind_grid:BlindGrid", "config": None,
         "max_episode_steps": None, "seed": None, EVALUATION_CAP: 5}
    )  # fmt: skip
    env.reset(seed=0)
    ends = [env.step(2)[2:] for _ in range(5)]  # left: into the wall, for ever
    assert [(term, trunc) for term, trunc, _ in ends] == [(False, False)] * 4 + [(False, True)]
    assert ends[-1][2][CAPPED_INFO] is True and not any(CAPPED_INFO in i for *_, i in ends[:-1])
    env.reset()
    assert env.step(0)[2:4] == (False, False)
    term, trunc, info = env.step(1)[2:]  # right, up: the goal, the env's own end
    assert (term, trunc, CAPPED_INFO in info) == (True, False, False)


def test_a_round_with_a_capped_episode_never_reaches_the_target(compose_cfg) -> None:
    check = StopCheck(compose_cfg("train.stop.episode_return=0.5"))
    row = {"iteration": 1, "env_steps": 10, "episode_return_mean": math.nan, "eval_s": 0.1,
           "eval_return_mean": 0.9, "eval_episodes": 2, "eval_capped_episodes": 1}  # fmt: skip
    assert check.observe(row) is None
    assert check.observe({**row, "iteration": 2, "eval_capped_episodes": 0}) == "episode_return"
    assert check.record(TrainRecord()).data["evaluation"]["capped_episodes"] == 1


def test_the_env_check_warns_of_a_missing_time_limit(tests_importable) -> None:
    grid = {"kind": "custom", "entry_point": "support.blind_grid:BlindGrid", "config": None,
            "max_episode_steps": None, "seed": None}  # fmt: skip
    report = check_env(grid)
    assert report.time_limit is None
    assert any("has no time limit" in w and "env.max_episode_steps" in w for w in report.warnings)
    limited = check_env({**grid, "max_episode_steps": 50})
    assert limited.time_limit == 50 and not limited.warnings


@pytest.mark.timing
def test_a_phase_without_progress_gets_a_heartbeat() -> None:
    stream = io.StringIO()
    now = time.monotonic()
    ctx = SimpleNamespace(
        phase="iteration 3 of 20", phase_since=now - 95, last_line=now - 95,
        steps_done="2 of 20 iterations done, 512 env steps", elapsed_s=lambda: 123.4,
    )  # fmt: skip
    said = threading.Event()

    class Watched(Console):
        def say(self, message: str, *, progress: bool = False) -> None:
            super().say(message, progress=progress)
            said.set()

    with activated(Watched(stream=stream, interactive=False)), Heartbeat(ctx, every_s=0.05):
        assert said.wait(10)
    line = stream.getvalue().splitlines()[0]
    assert line.startswith("[rlperf   123.4s] still running: iteration 3 of 20 (since ")
    assert line.endswith(" s); 2 of 20 iterations done, 512 env steps")
    assert int(line.split(", ")[1].split(" s)")[0]) >= 95


@pytest.mark.slow
def test_a_greedy_policy_that_never_ends_an_episode_is_stopped_and_said(tmp_path) -> None:
    out = tmp_path / "grid"
    args = [
        *GRID,
        TARGET,
        "workers=0",
        "algo.train_batch_size=128",
        "algo.minibatch_size=64",
        "algo.num_epochs=1",
        "train.iterations=2",
        "train.warmup_iterations=0",
        "train.evaluation.episodes=2",
        "train.evaluation.max_episode_steps=200",
        "train.env_ceiling.enabled=false",
        "telemetry.enabled=false",
        "console.heartbeat_s=1",
        f"hydra.run.dir={out}",
    ]
    proc = run_rlperf(args, cwd=tmp_path, env={"PYTHONPATH": str(TESTS)}, timeout=300)
    err = proc.stderr
    assert proc.returncode == 0, err[-3000:]
    # Before Ray starts: the env check says the env has no time limit.
    warned = err.index("has no time limit")
    assert warned < err.index("starting Ray")
    # Ray's start and the first iteration run more than a second without a progress line.
    assert "still running: " in err
    # Each round: both greedy episodes stopped at the cap, said once, in summary.json too.
    assert err.count("greedy evaluation episode(s) ran 200 agent steps without ending") == 1
    m = pd.read_csv(out / METRICS_FILE)
    assert list(m["eval_episodes"]) == [2, 2] and list(m["eval_capped_episodes"]) == [2, 2]
    assert (m["episodes"] > 0).all()  # exploring training episodes do end
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "completed" and s["reached"] is False
    assert s["evaluation"]["capped_episodes"] == 4
    assert s["evaluation"]["max_episode_steps"] == 200
    [incident] = s["incidents"]
    assert incident["kind"] == "evaluation_capped"
    assert incident["setting"] == "train.evaluation.max_episode_steps"
    assert "iteration 1: 2 of 2" in incident["message"] and incident["at"].endswith("Z")
