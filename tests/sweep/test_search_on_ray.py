"""A real search (Optuna TPE + ASHA over real RLlib trials), interrupted and resumed, and the
preset of its best trial run again (docs/search.md)."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlperf.layout import CELL_FILE, METRICS_FILE, SEARCH_FILE, SUMMARY_FILE
from rlperf.sweep.space import parse_space
from tests.conftest import run_rlperf

pytestmark = pytest.mark.slow

SPACE = (
    "algo.lr=tag(log,interval(1e-4,1e-2))",
    "algo.num_epochs=choice(1,16)",
    "workers=choice(0,8)",
)
SEARCH = (
    "-m",
    "env=cartpole",
    "model=mlp64",
    "algo.train_batch_size=128",
    "algo.minibatch_size=64",
    "train.iterations=3",
    "telemetry.enabled=false",
    "train.env_ceiling.enabled=false",
    "hydra.sweeper.search.algorithm=optuna",
    "hydra.sweeper.search.num_samples=5",
    "hydra.sweeper.search.seed=0",
    # trained_steps (min): 16 epochs train 16x the samples of 1 in every iteration, a
    # difference machine load cannot blur (as it can iter_s's), so ASHA stops the
    # seeded second trial (16 epochs) at its first rung.
    "hydra.sweeper.search.metric=trained_steps",
    "hydra.sweeper.search.mode=min",
    "hydra.sweeper.search.scheduler.name=asha",
    "hydra.sweeper.search.scheduler.grace_period=1",
    *SPACE,
)
FINAL = ("completed", "stopped_early", "skipped")


def _trials(folder: Path) -> list[dict]:
    try:
        return list(json.loads((folder / SEARCH_FILE).read_text())["trials"])
    except (OSError, ValueError, KeyError):
        return []


def _run_and_interrupt(args: list[str], cwd: Path, folder: Path) -> int:
    """Run the search; SIGTERM to its PID (as Kubernetes and ``timeout`` send) once two trials
    have finished and a third has started."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlperf", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    watchdog = threading.Timer(900, proc.kill)
    watchdog.start()
    try:
        while proc.poll() is None:
            trials = _trials(folder)
            done = sum(1 for t in trials if t["status"] in FINAL)
            if done >= 2 and any(t["status"] == "running" for t in trials):
                # At once: a CartPole trial of 3 tiny iterations lasts seconds, and the
                # trials after it may be skipped by the pre-flight in no time, so a delay
                # here let the whole search finish first (rc 0) on a fast machine.
                proc.send_signal(signal.SIGTERM)
                break
            time.sleep(0.2)
        return proc.wait(timeout=600)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()


def _last(cell: Path, column: str) -> float:
    with (cell / METRICS_FILE).open() as f:
        return float(list(csv.DictReader(f))[-1][column])


@pytest.mark.timing
def test_search_interrupt_resume_best_and_preset(tmp_path: Path) -> None:
    folder = tmp_path / "search"
    args = [*SEARCH, f"hydra.sweep.dir={folder}"]
    rc = _run_and_interrupt(args, tmp_path, folder)
    assert rc == 143, _trials(folder)  # 128 + SIGTERM, through Tune's graceful stop
    assert all(t["status"] != "running" for t in _trials(folder))
    before = {t["subdir"]: t for t in _trials(folder) if t["status"] in FINAL}
    assert len(before) >= 2
    stamps = {s: (folder / s / SUMMARY_FILE).stat().st_mtime_ns for s in before}

    proc = run_rlperf(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((folder / SEARCH_FILE).read_text())
    trials = data["trials"]
    assert len(trials) == 5 and all(t["status"] in FINAL for t in trials), trials

    # Finished trials were kept, not run again.
    for subdir, stamp in stamps.items():
        assert (folder / subdir / SUMMARY_FILE).stat().st_mtime_ns == stamp
        assert json.loads((folder / subdir / CELL_FILE).read_text())["runs"] == 1

    # Every trial's parameters lie in the declared space, and its folder ran them.
    space = parse_space(list(SPACE), "optuna")
    for t in trials:
        assert set(t["params"]) == {a.key for a in space.axes}
        for key, value in t["params"].items():
            assert space.axis(key).contains(value), (key, value)
        cfg = OmegaConf.load(folder / t["subdir"] / ".hydra" / "config.yaml")
        assert cfg.algo.lr == pytest.approx(t["params"]["algo.lr"])
        assert cfg.workers == t["params"]["workers"]

    # Infeasible proposals (8 env runners on this machine) are skipped by the pre-flight.
    for t in trials:
        summary = json.loads((folder / t["subdir"] / SUMMARY_FILE).read_text())
        assert summary["status"] == t["status"]
        if t["params"]["workers"] == 8:
            assert t["status"] == "skipped" and summary["preflight"] is True, t
            assert "CPU" in summary["error"]

    # At least one trial stopped early by ASHA, with its reason, its rows kept.
    stopped = [t for t in trials if t["status"] == "stopped_early"]
    assert stopped, trials
    for t in stopped:
        assert re.match(
            r"ASHA: trained_steps=\S+ at training_iteration=\d+ was worse than its rung's cutoff",
            t["reason"],
        ), t
        cell = folder / t["subdir"]
        summary = json.loads((cell / SUMMARY_FILE).read_text())
        # The job recorded the stop itself (Tune ends a stopped trial's thread with
        # SystemExit): no traceback; the scheduler's reason is the error.
        assert summary["error"] == t["reason"] and summary["traceback"] is None
        with (cell / METRICS_FILE).open() as f:
            assert 1 <= len(list(csv.DictReader(f))) < 3

    # The best trial is the best by the completed cells' own metrics.csv.
    completed = [t for t in trials if t["status"] == "completed"]
    scores = {t["subdir"]: _last(folder / t["subdir"], "trained_steps") for t in completed}
    best = min(scores, key=lambda s: scores[s])
    assert data["best"]["subdir"] == best
    assert data["best"]["score"] == pytest.approx(scores[best])

    # The best trial's preset composes as `rlperf experiment=<file>` to its parameters
    # (`--cfg job`: what the run would be given; that a composed config trains is every
    # other training test's).
    preset = Path(data["best"]["preset"])
    assert preset == folder / "experiment" / "search_best.yaml"
    proc = run_rlperf([f"experiment={preset}", "--cfg", "job"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = OmegaConf.create(proc.stdout)
    for key, value in data["best"]["params"].items():
        assert OmegaConf.select(cfg, key) == pytest.approx(value), key
