"""Faults never pass as measurements; a Ray that rlperf starts listens on loopback only.

One real tiny training run serves both: while it runs, the machine's socket
table is read for every process of its Ray, then its env runner is killed
(``kill -9``) between iterations 2 and 3.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil
import pytest
from support.live_run import LiveRun, command_starts, csv_rows

from rlperf import errors
from rlperf.algos import plan_resources
from rlperf.layout import EXCLUDED_COLUMN, METRICS_FILE, SUMMARY_FILE
from rlperf.resources import node_watch
from rlperf.resources.listeners import Listener, is_loopback, listeners
from rlperf.training import faults
from rlperf.vocabulary import Exclusion
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


#: Ray 2.60's exit detail of a worker its memory monitor killed (shortened after the figures).
RAY_OOM_DETAIL = (
    "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: "
    "192.0.2.2, ID: ecad9b97) was 2.04GB used / 23.54GB limit (0.086501)\nOOM kill reason: "
    "Memory usage 2178011136B exceeded threshold of 2173735168B (8.6% of 25275990016B limit)\n"
    "Object store memory usage: [- objects spillable: 0"
)


def test_a_memory_monitor_kill_is_said_with_rays_figures() -> None:
    assert faults._memory_figures(RAY_OOM_DETAIL) == (
        "the node's memory was 2.04GB used / 23.54GB limit, over its threshold of 8.6% "
        "(RAY_memory_usage_threshold)"
    )
    assert faults._memory_figures("killed\nmore") == "killed"  # Ray's text changed: its line
    row = {
        "iteration": 3, "excluded": Exclusion.fault, "env_runners_healthy": 0,
        "env_runner_restarts": 0, "env_runners_lost": 1, "learner_failures": 0, "oom_kills": 2,
    }  # fmt: skip
    assert faults.describe(row) == (
        "1 env runner(s) lost, 0 restarted, 0 healthy at its end, 2 killed by Ray's memory "
        "monitor (out of memory)"
    )
    assert faults.ray_worker_table() == []  # no Ray connected: nothing to name, no error


# ------------------------------------------------- the node watch (a stand-in raylet)


@pytest.fixture
def raylet() -> Iterator[subprocess.Popen[bytes]]:
    """A real process in the raylet's place: what the watch polls is only its exit."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def _busy_until_raised(seconds: float) -> None:
    """Python code running in the main thread (as Tune's loop does), ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.timing
def test_a_dead_raylet_raises_node_lost_in_the_main_thread(raylet) -> None:
    with (
        pytest.raises(node_watch.NodeLost) as lost,
        node_watch.watch_node("during the test", process=raylet) as watch,
    ):
        assert watch is not None
        raylet.kill()
        _busy_until_raised(30)
    message = str(lost.value)
    assert message.startswith(f"Ray's node was lost during the test: its raylet (pid {raylet.pid})")
    assert "was killed by SIGKILL" in message
    assert signal.getsignal(node_watch.WAKE_SIGNAL) is not watch._raise  # handler put back


def _raise_lost_nowhere() -> None:
    """The watch's raise never lands (as when a library swallows it, or it lands in C code)."""
    signal.signal(node_watch.WAKE_SIGNAL, lambda signum, frame: None)


def _wait_lost(watch: node_watch.NodeWatch) -> None:
    deadline = time.monotonic() + 30
    while watch.lost is None:
        assert time.monotonic() < deadline, "the watch never saw the process end"
        time.sleep(0.01)


@pytest.mark.timing
def test_whatever_the_block_ends_with_after_the_loss_is_node_lost(raylet) -> None:
    """Raised inside a C extension, NodeLost arrives as a SystemError (Ray's
    ``CoreWorker.wait``); a library may swallow it and return: the watch knows."""
    with pytest.raises(node_watch.NodeLost), node_watch.watch_node("x", process=raylet) as watch:
        assert watch is not None
        _raise_lost_nowhere()
        raylet.kill()
        _wait_lost(watch)
        raise SystemError("<cyfunction CoreWorker.wait> returned a result with an exception set")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    with pytest.raises(node_watch.NodeLost), node_watch.watch_node("y", process=gone) as watch:
        assert watch is not None
        _raise_lost_nowhere()
        _wait_lost(watch)


@pytest.mark.timing
def test_a_stop_signal_is_not_a_lost_node(raylet) -> None:
    """A SIGTERM to the process group kills the raylet with rlperf: an interrupt, no more."""
    with errors.stop_handlers():
        with pytest.raises(KeyboardInterrupt), node_watch.watch_node("x", process=raylet):
            os.kill(os.getpid(), signal.SIGTERM)
            _busy_until_raised(30)
        with node_watch.watch_node("x", process=raylet) as watch:
            raylet.kill()
            _busy_until_raised(node_watch.POLL_S + node_watch.GRACE_S + 1)
        assert watch is not None and watch.lost is None


def test_a_raylet_that_stops_after_the_block_raises_nothing(raylet) -> None:
    with node_watch.watch_node("x", process=raylet):
        pass
    raylet.kill()
    _busy_until_raised(node_watch.POLL_S + node_watch.GRACE_S + 0.5)
    assert node_watch.describe_exit(1) == "exited with status 1"
    assert node_watch.describe_exit(-15) == "was killed by SIGTERM"


# ------------------------------------------------------------------ listeners


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


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservedRun]:
    """5 tiny iterations; after the 2nd: the socket table, then ``kill -9`` of the env runner."""
    root = tmp_path_factory.mktemp("faults")
    out = root / "run"
    args = [a for a in TINY_TRAIN if not a.startswith("train.iterations")]
    args += [
        "train.iterations=5", "train.warmup_iterations=1",
        "train.warmup_until_first_episode=false", f"hydra.run.dir={out}",
    ]  # fmt: skip
    seen = ObservedRun(-1, out, "")
    with LiveRun(args, root) as run:
        if run.wait_until(lambda: csv_rows(out / METRICS_FILE) >= 2, timeout=420):
            tree = run.tree()
            seen.listeners = listeners(p.pid for p in tree)
            seen.ray_processes = sorted({p.name() for p in tree})
            seen.killed = run.kill(command_starts("ray::SingleAgentEnvRunner"))
        seen.returncode = run.finish(timeout=420)
    seen.output = run.output
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
    metrics = pd.read_csv(run.out / METRICS_FILE, keep_default_na=False)
    flags = list(metrics[EXCLUDED_COLUMN])
    assert flags[:2] == ["warmup", ""] and len(flags) == 5
    assert "fault" in flags[2:], metrics.to_string()
    fault_rows = metrics[metrics[EXCLUDED_COLUMN].isin(["fault", "no_samples"])]
    assert (fault_rows["env_runners_lost"] + fault_rows["env_runner_restarts"]).min() >= 1 or (
        fault_rows["env_steps"].eq(0).all()
    )
    summary = json.loads((run.out / SUMMARY_FILE).read_text())
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
@pytest.mark.alone  # its threshold is set from what the machine uses when it starts
def test_a_worker_killed_by_rays_memory_monitor_is_named(tmp_path: Path) -> None:
    """Ray's memory monitor, its threshold a little above what this machine uses, kills the
    env runner when the test takes memory after iteration 2: the fault iterations are
    excluded as for any lost worker, and say that it was the memory monitor."""
    vm = psutil.virtual_memory()
    used = 1 - vm.available / vm.total
    margin = 0.1
    if used + 2 * margin > 0.9:
        pytest.skip(f"{used:.0%} of memory in use: too full to push over a threshold safely")
    out = tmp_path / "run"
    args = [a for a in TINY_TRAIN if not a.startswith(("train.iterations", "workers"))]
    args += [
        "workers=1", "train.iterations=16", "train.warmup_iterations=1",
        "train.warmup_until_first_episode=false", f"hydra.run.dir={out}",
    ]  # fmt: skip
    env = dict(
        os.environ,
        RAY_memory_usage_threshold=f"{used + margin:.3f}",
        RAY_memory_monitor_refresh_ms="100",
    )
    with LiveRun(args, tmp_path, env) as run:
        assert run.wait_until(lambda: csv_rows(out / METRICS_FILE) >= 2, 300), run.output
        runners = [p.pid for p in run.tree() if command_starts("ray::SingleAgentEnvRunner")(p)]
        hog = np.ones(int((margin + 0.05) * vm.total) // 8)  # written, so resident
        try:  # until the memory monitor killed the env runner: else it kills every restart
            gone = run.wait_until(lambda: not any(map(psutil.pid_exists, runners)), 120)
        finally:
            del hog
        rc = run.finish(timeout=300)
    assert runners and gone, run.output[-3000:]
    said = [ln for ln in run.lines if "Ray's memory monitor killed a worker: " in ln]
    assert len(said) == 1, run.output[-3000:]  # once; the fault lines count the kills
    assert re.search(r"the node's memory was [\d.]+GB used / [\d.]+GB limit, over", said[0])
    assert rc == 0, run.output[-3000:]  # train.on_fault=continue
    metrics = pd.read_csv(out / METRICS_FILE, keep_default_na=False)
    oom = metrics[metrics["oom_kills"] > 0]
    assert len(oom) >= 1 and set(oom[EXCLUDED_COLUMN]) == {"fault"}, metrics.to_string()
    assert metrics["oom_kills"].iloc[:2].eq(0).all()
    summary = json.loads((out / SUMMARY_FILE).read_text())
    named = [f for f in summary["faults"] if f["oom_kills"]]
    assert named and "killed by Ray's memory monitor (out of memory)" in named[0]["what"]
    assert "killed by Ray's memory monitor (out of memory): excluded from the figures" in run.output
