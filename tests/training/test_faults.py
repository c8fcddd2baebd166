"""Faults never pass as measurements; a Ray that rlperf starts listens on loopback only.

One real tiny training run serves both: while it runs, the machine's socket
table is read for every process of its Ray, then its env runner is killed
(``kill -9``) between iterations 2 and 3.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

from rlperf.algos import plan_resources
from rlperf.layout import EXCLUDED_COLUMN, Exclusion
from rlperf.resources.listeners import Listener, is_loopback, listeners
from rlperf.training import faults
from tests.conftest import TINY_TRAIN

# ------------------------------------------------------------------ units


def _result(healthy: int, restarts: int) -> dict[str, Any]:
    """The part of RLlib's ``Algorithm.train()`` result the watch reads (Ray 2.60 keys)."""
    return {
        "fault_tolerance": {"num_healthy_workers": healthy, "num_remote_worker_restarts": restarts}
    }


def test_fault_watch_flags_lost_restarted_and_empty_iterations(compose_cfg) -> None:
    plan = plan_resources(compose_cfg("workers=2"))
    assert (plan.num_env_runners, plan.num_learners) == (2, 0)
    watch = faults.FaultWatch(algo=object(), plan=plan)  # no learner group: a local learner
    rows = []
    # 2 env runners: fine, one lost, restarted, fine; then an iteration without samples.
    for it, (healthy, restarts, steps) in enumerate(
        [(2, 0, 256), (1, 0, 128), (2, 1, 256), (2, 1, 256), (2, 1, 0)], start=1
    ):
        row = {"iteration": it, "env_steps": steps, **watch.read(_result(healthy, restarts))}
        row[EXCLUDED_COLUMN] = faults.exclusion(row, warmup=it == 1)
        rows.append(row)
    assert [r[EXCLUDED_COLUMN] for r in rows] == [
        Exclusion.warmup,
        Exclusion.fault,
        Exclusion.fault,
        "",
        Exclusion.no_samples,
    ]
    assert [(r["env_runners_lost"], r["env_runner_restarts"]) for r in rows[:3]] == [
        (0, 0),
        (1, 0),
        (0, 1),
    ]
    listed = faults.fault_list(rows)
    assert [(f["iteration"], f["reason"]) for f in listed] == [
        (2, "fault"),
        (3, "fault"),
        (5, "no_samples"),
    ]
    assert listed[0]["what"] == "1 env runner(s) lost, 0 restarted, 1 healthy at its end"
    faults.handle(rows[3], "fail")  # a counted iteration never fails the run
    with pytest.raises(
        faults.RunFault, match=r"iteration 2: 1 env runner\(s\) lost.*on_fault=fail"
    ):
        faults.handle(rows[1], "fail")


def test_loopback_addresses() -> None:
    assert all(map(is_loopback, ("127.0.0.1", "::1", "::ffff:127.0.0.1", "127.1.2.3")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "192.0.2.2", "::ffff:192.0.2.2")))
    assert str(Listener(7, "raylet", "::", 4242)) == "raylet[7] on :::4242"


def test_listeners_reads_the_socket_table() -> None:
    import socket

    with socket.socket() as s:  # a socket of this process: found, bound where it is
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        found = [x for x in listeners([os.getpid()]) if x.port == port]
    assert [(x.pid, x.ip, x.loopback) for x in found] == [(os.getpid(), "127.0.0.1", True)]


# ---------------------------------------------------------- one real run


@dataclass
class ObservedRun:
    returncode: int
    out: Path
    output: str
    listeners: list[Listener] = field(default_factory=list)
    ray_processes: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)


def _tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


def _cmdline(p: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(p.cmdline())
    return ""


def _rows(path: Path) -> int:
    with contextlib.suppress(OSError):
        return max(len(path.read_text().splitlines()) - 1, 0)
    return 0


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservedRun]:
    """5 tiny iterations; after the 2nd: the socket table, then ``kill -9`` of the env runner."""
    root = tmp_path_factory.mktemp("faults")
    out = root / "run"
    args = [a for a in TINY_TRAIN if not a.startswith("train.iterations")]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlperf",
            *args,
            "train.iterations=5",
            "train.warmup_iterations=1",
            "train.warmup_until_first_episode=false",
            f"hydra.run.dir={out}",
        ],  # fmt: skip
        cwd=root,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(proc.stdout or ()), daemon=True)
    reader.start()
    seen = ObservedRun(-1, out, "")
    deadline = time.monotonic() + 420
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if not seen.killed and _rows(out / "metrics.csv") >= 2:
                tree = _tree(proc.pid)
                seen.listeners = listeners(p.pid for p in tree)
                seen.ray_processes = sorted({p.name() for p in tree})
                for p in tree:
                    if _cmdline(p).startswith("ray::SingleAgentEnvRunner"):
                        seen.killed.append(_cmdline(p))
                        os.kill(p.pid, signal.SIGKILL)
            time.sleep(0.2)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=10)
    seen.returncode, seen.output = proc.returncode, "".join(printed)
    yield seen


@pytest.mark.slow
@pytest.mark.timing
def test_ray_listens_on_loopback_only(killed_run: ObservedRun) -> None:
    """No process of the run's Ray (driver, GCS, raylet, agents, env runner) listens beyond
    127.0.0.1; before rlperf kept the node on loopback, GCS, raylet and workers listened on
    ``*:port`` and the runtime-env agent on the machine's address."""
    run = killed_run
    assert run.listeners, run.output[-3000:]
    names = {x.name for x in run.listeners}
    assert {"gcs_server", "raylet"} <= names, names
    assert any(n.startswith("ray::") for n in names), names  # a worker's own gRPC server
    exposed = [str(x) for x in run.listeners if not x.loopback]
    assert exposed == [], exposed
    log = (run.out / "rlperf.log").read_text()
    assert "all on loopback; token authentication on" in log


@pytest.mark.slow
@pytest.mark.timing
def test_killed_env_runner_leaves_excluded_fault_iterations(killed_run: ObservedRun) -> None:
    run = killed_run
    assert run.killed, run.output[-3000:]
    assert run.returncode == 0, run.output[-3000:]  # train.on_fault=continue (the default)
    metrics = pd.read_csv(run.out / "metrics.csv", keep_default_na=False)
    flags = list(metrics[EXCLUDED_COLUMN])
    assert flags[:2] == ["warmup", ""] and len(flags) == 5
    assert "fault" in flags[2:], metrics.to_string()
    fault_rows = metrics[metrics[EXCLUDED_COLUMN].isin(["fault", "no_samples"])]
    assert (fault_rows["env_runners_lost"] + fault_rows["env_runner_restarts"]).min() >= 1 or (
        fault_rows["env_steps"].eq(0).all()
    )
    summary = json.loads((run.out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert [f["iteration"] for f in summary["faults"]] == list(fault_rows["iteration"])
    counted = metrics[metrics[EXCLUDED_COLUMN].eq("")]
    assert summary["metrics"]["iter_s"]["n"] == len(counted)
    assert summary["metrics"]["iter_s"]["mean"] == pytest.approx(counted["iter_s"].mean())
    assert summary["excluded"]["fault"] == int(metrics[EXCLUDED_COLUMN].eq("fault").sum())
    # The person sees it: one line per fault iteration, the summary counts them.
    assert "excluded from the figures (train.on_fault=continue)" in run.output
    assert f"{len(summary['faults'])} fault(s) recorded" in run.output


@pytest.mark.slow
@pytest.mark.timing
def test_a_killed_learner_actor_ends_the_run_with_one_line(tmp_path: Path) -> None:
    """APPO with a remote learner (``learners=1``): ``kill -9`` of the learner actor after the
    2nd iteration. RLlib does not restart learners; the run fails at once with one line,
    keeps the iterations before, and its summary says why (not a TypeError from a dead
    actor's reply, nor iterations that train nothing)."""
    out = tmp_path / "run"
    args = [
        "model=tiny", "algo=appo", "learners=1", "workers=1", "ray.overcommit_cpus=true",
        "algo.train_batch_size=256", "algo.minibatch_size=null",
        "algo.min_time_s_per_iteration=2", "train.iterations=8", "telemetry.enabled=false",
        "train.env_ceiling.enabled=false", f"hydra.run.dir={out}",
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlperf", *args],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed: list[str] = []
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and not killed and time.monotonic() < deadline:
            if _rows(out / "metrics.csv") >= 2:
                for p in _tree(proc.pid):
                    if _cmdline(p).startswith("ray::_WrappedExecutable"):  # the learner actor
                        killed.append(_cmdline(p))
                        os.kill(p.pid, signal.SIGKILL)
            time.sleep(0.2)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed, err[-3000:]
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("rlperf: iteration ") and "a learner actor died" in last, err[-3000:]
    assert "does not restart learners" in last and "Traceback" not in err
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "failed" and "a learner actor died" in s["error"]
    m = pd.read_csv(out / "metrics.csv")
    assert len(m) >= 2 and list(m["iteration"]) == list(range(1, len(m) + 1))
