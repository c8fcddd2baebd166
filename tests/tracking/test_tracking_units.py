"""Tracking without the tools: the option, the pre-flight, secrets, rows and their steps,
and the background queue that keeps a failing or hung tool out of the job."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from rlperf.errors import ConfigError
from rlperf.layout import EPISODES_FILE, STEPS_FILE
from rlperf.results.csvlog import read_rows
from rlperf.results.latency import LatencyRecorder, episode_windows
from rlperf.sweep.cells import cell_hash
from rlperf.tracking import tools
from rlperf.tracking.dispatch import Tracking
from rlperf.tracking.record import StepAxis, TrackedJob, job_name, numbers, place
from rlperf.tracking.redact import MASK, Redactor, scrub_hydra_files
from rlperf.validation.validate import validate_config

# --- the option


def test_tracking_is_a_list_of_tools(compose_cfg) -> None:
    assert tools.enabled_tools(compose_cfg().tracking) == []
    assert tools.enabled_tools(compose_cfg("tracking=mlflow").tracking) == ["mlflow"]
    both = compose_cfg("tracking=[wandb,tensorboard]", "tracking.mlflow.experiment=x").tracking
    assert tools.enabled_tools(both) == ["tensorboard", "wandb"]
    assert both.wandb.mode == "offline" and both.mlflow.uri is None


def test_an_unknown_tool_is_refused_at_composition(compose_cfg) -> None:
    with pytest.raises(Exception, match="tracking") as info:
        compose_cfg("tracking=comet")
    assert "mlflow" in str(info.value)  # Hydra names the options there are


def test_where_results_go_is_not_part_of_a_cells_identity(compose_cfg) -> None:
    plain = cell_hash(compose_cfg())
    assert cell_hash(compose_cfg("tracking=[mlflow,wandb]", "tracking.mlflow.uri=x")) == plain
    assert cell_hash(compose_cfg("seed=3")) != plain


def _without(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    real = tools.importlib.util.find_spec
    monkeypatch.setattr(
        tools.importlib.util, "find_spec", lambda name, *a: None if name == module else real(name)
    )


def test_a_missing_extra_is_refused_with_its_pip_command(compose_cfg, monkeypatch) -> None:
    cfg = compose_cfg("tracking=[tensorboard,wandb]", "model=tiny")
    _without(monkeypatch, "wandb")
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    assert str(info.value) == (
        "tracking=wandb needs the wandb package, which is not installed: "
        "pip install 'rlperf[wandb]'"
    )
    validate_config(compose_cfg("tracking=tensorboard", "model=tiny"))  # present: passes


def test_the_command_refuses_a_missing_extra_in_one_line_before_ray(tmp_path: Path) -> None:
    code = (
        "import importlib.util as u, sys; real = u.find_spec; "
        "u.find_spec = lambda n, *a: None if n == 'mlflow' else real(n, *a); "
        "sys.argv = ['rlperf', 'tracking=mlflow', 'model=tiny', f'hydra.run.dir={sys.argv[1]}']; "
        "from rlperf.cli import main; sys.exit(main())"
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].endswith("pip install 'rlperf[mlflow]'"), proc.stderr
    assert "Traceback" not in proc.stderr and "starting Ray" not in proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 60


# --- secrets


def test_secrets_are_masked_in_text_trees_and_files(tmp_path: Path) -> None:
    config = {
        "tracking": {"mlflow": {"uri": "https://alice:pa55word@mlflow.example:5000"}},
        "my_api_key": "key-0123456789",
        "nested": [{"token": "tok-abcdefgh"}, "plain"],
        "seed": 3,
    }
    red = Redactor.of(config, environ={"WANDB_API_KEY": "wandbsecret42", "HOME": "/root"})
    masked = red.tree(config)
    assert masked["tracking"]["mlflow"]["uri"] == f"https://alice:{MASK}@mlflow.example:5000"
    assert masked["my_api_key"] == MASK and masked["nested"] == [{"token": MASK}, "plain"]
    assert masked["seed"] == 3
    text = "sent to https://alice:pa55word@mlflow.example:5000 with wandbsecret42, /root"
    assert red.text(text) == f"sent to https://alice:{MASK}@mlflow.example:5000 with {MASK}, /root"
    hydra = tmp_path / ".hydra"
    hydra.mkdir()
    (hydra / "overrides.yaml").write_text("- tracking.mlflow.uri=https://alice:pa55word@h\n")
    scrub_hydra_files(tmp_path, red)
    assert "pa55word" not in (hydra / "overrides.yaml").read_text()
    assert Redactor.of({"a": "b"}, environ={}).secrets == []  # nothing to mask: nothing masked


# --- rows and their steps


def test_rows_keep_their_finite_numbers_at_their_step() -> None:
    assert numbers({"a": 1, "b": "2.5", "c": "", "d": float("nan"), "e": True, "f": "warmup"}) == {
        "a": 1.0,
        "b": 2.5,
    }
    train = place("train", [{"env_steps": 100, "time_s": 3.0}, {"env_steps": "120", "time_s": 5}])
    assert [(r.step, r.time_s) for r in train] == [(100, 3.0), (220, 5.0)]
    serve = StepAxis("serve")
    assert [serve({"level": i, "wall_s": 2.0}).step for i in range(3)] == [0, 1, 2]
    assert serve({"level": 3, "wall_s": 2.0}).time_s == 8.0


def test_an_episode_window_live_equals_the_one_read_from_the_files(tmp_path: Path) -> None:
    """What a rollout sends after each episode is what `--to` reads from its files later."""
    live = []
    with LatencyRecorder(tmp_path, warmup_steps=3) as rec:
        step = 0
        for episode, length in enumerate((2, 5, 4)):
            for _ in range(length):
                rec.record_step(episode, 0.1 * step, 0.2 + step, 1.5, step % 3)
                step += 1
            live.append(rec.end_episode(episode, float(episode) - 1.0, length, 0.25 * length))
    files = episode_windows(read_rows(tmp_path / STEPS_FILE), read_rows(tmp_path / EPISODES_FILE))
    assert files == live
    assert "action_ms_p50" not in live[0]  # its 2 steps are warm-up
    assert live[1]["action_ms_p50"] == pytest.approx(0.2 + 4.5)  # steps 3..6 (0..2: warm-up)
    assert [w["steps"] for w in live] == [2, 7, 11]
    assert [w["time_s"] for w in live] == [0.5, 1.75, 2.75]


def test_a_sweep_cell_is_named_by_its_label_without_where_results_go() -> None:
    overrides = ["model=tiny", "tracking=[mlflow]", "hydra.run.dir=x", "seed=1"]
    assert job_name(overrides, 3, True, Path("/s/3")) == "#3 model=tiny seed=1"
    assert job_name([], None, False, Path("/o/2026-12-03/10-00-00")) == "2026-12-03/10-00-00"


# --- the background queue


class RecordingSink:
    tool, where = "rec", "memory"

    def __init__(self, log: list[Any], fail_on: str = "", block: threading.Event | None = None):
        self.calls, self.fail_on, self.block = log, fail_on, block

    def exists(self, job: TrackedJob) -> bool:
        return False

    def open(self, job: TrackedJob) -> None:
        self._call("open", job.name)

    def log(self, rows: Any, started_at: float) -> None:
        self._call("log", [(r.step, r.values["env_steps"]) for r in rows])

    def finish(self, status: str, files: Any, tags: Any) -> None:
        self._call("finish", status)

    def _call(self, name: str, what: Any) -> None:
        if self.block is not None:
            self.block.wait()
        if name == self.fail_on:
            raise ConnectionError("Connection refused")
        self.calls.append((name, what))


def _job() -> TrackedJob:
    return TrackedJob("rlperf:h@t", "job", "train", Path("/tmp/x"), 0.0, {"seed": 0})


@pytest.mark.timing
def test_a_failing_tool_is_said_once_and_left_while_the_others_go_on() -> None:
    good: list[Any] = []
    bad: list[Any] = []
    incidents: list[tuple[str, str, str | None]] = []
    sinks = {
        "good": (lambda: RecordingSink(good), "tracking.good"),
        "bad": (lambda: RecordingSink(bad, fail_on="log"), "tracking.bad"),
    }
    tracking = Tracking(_job(), sinks, lambda *a: incidents.append(a))
    for _ in range(3):
        tracking.row({"env_steps": 10})
    tracking.close("completed", [], wait_s=10)
    assert good == [("open", "job"), ("log", [(10, 10.0)]), ("log", [(20, 10.0)]),
                    ("log", [(30, 10.0)]), ("finish", "completed")]  # fmt: skip
    assert bad == [("open", "job")]  # nothing after the first failure
    assert len(incidents) == 1 and incidents[0][0] == "tracking_failed"
    assert "cannot connect" in incidents[0][1] and incidents[0][2] == "tracking.bad"
    assert tracking.failed == ["bad"]


@pytest.mark.timing
def test_a_hung_tool_never_holds_the_job_beyond_the_close_deadline() -> None:
    release = threading.Event()
    incidents: list[Any] = []
    sinks = {"hung": (lambda: RecordingSink([], block=release), "tracking.hung")}
    tracking = Tracking(_job(), sinks, lambda *a: incidents.append(a))
    t0 = time.monotonic()
    for _ in range(100):
        tracking.row({"env_steps": 1})  # enqueued: never waits for the tool
    assert time.monotonic() - t0 < 0.5
    tracking.close("completed", [], wait_s=0.5)
    assert 0.4 < time.monotonic() - t0 < 2.0
    assert [i[0] for i in incidents] == ["tracking_failed"] and "had not finished" in incidents[0][
        1
    ]
    release.set()


def test_the_config_tracked_is_the_resolved_one_flattened_with_hydras_names() -> None:
    job = TrackedJob("id", "n", "train", Path("/x"), 0.0, {"train": {"stop": {"time_s": None}},
                     "model": {"conv_filters": [[16, [8, 8], 4]]}, "ok": True})  # fmt: skip
    assert job.params == {
        "train.stop.time_s": "null",
        "model.conv_filters": "[[16,[8,8],4]]",
        "ok": "true",
    }
    assert OmegaConf.create({"a": 1})  # omegaconf imported for the fixture's configs
