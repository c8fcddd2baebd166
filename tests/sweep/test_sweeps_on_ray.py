"""Real sweeps through ``rlperf -m`` (real Ray, Tune, RLlib, Atari Pong, the tiny model).

Each test starts its own Ray (or Ray cluster) with a private temp dir, so that
"no Ray process left behind" can be checked by looking for that dir in the
command lines of the machine's processes, and so that whatever a failing test
leaves is stopped by its own marker, never by a broad name.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from support.live_run import LiveRun, command_starts, csv_rows, named
from support.one_run import ONE_RUN, one_run
from support.private_ray import processes_with, wait_gone

from rlperf.layout import (
    CELL_FILE,
    CONFIG_FILE,
    FINGERPRINT_FILE,
    INDEX_FILE,
    METRICS_FILE,
    SEARCH_FILE,
    SUMMARY_FILE,
)
from rlperf.report import build_report
from tests.conftest import RAY_START, TESTS, run_rlperf

pytestmark = pytest.mark.slow

# Tiny, fast cells (2 cores, no GPU): one iteration of 256 env steps.
TINY = (
    "model=tiny",
    "algo.train_batch_size=256",
    "algo.minibatch_size=128",
    "algo.num_epochs=1",
    "train.iterations=1",
    "telemetry.interval_s=0.2",
)


# ------------------------------------------------------------------- helpers


def cell(sweep: Path, subdir: str, name: str = CELL_FILE) -> dict[str, Any]:
    return json.loads((sweep / subdir / name).read_text())


FAIL_CELL = """# @package _global_
defaults:
  - override /env: custom
workers: 0
env:
  entry_point: support.failing_env:FailsMidRun
  config: {shape: [42, 42, 4]}
train:
  env_ceiling: {enabled: false}
"""

#: PYTHONPATH that makes ``support.failing_env`` importable in the driver and Ray's workers.
TESTS_PATH = str(TESTS)


def write_testcells(root: Path) -> Path:
    """A config group ``testcell`` (found through hydra.searchpath): one ok cell, one made to
    fail (an env that passes rlperf's checks and raises in RLlib: tests/support/failing_env.py,
    with ``tests`` on PYTHONPATH), one that asks for a GPU."""
    group = root / "testcell"
    group.mkdir(parents=True)
    (group / "ok.yaml").write_text("# @package _global_\nworkers: 1\n")
    (group / "fail.yaml").write_text(FAIL_CELL)
    (group / "gpu.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /gpu_layout: gpu0_driver\nworkers: 0\n"
    )
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rlperf_env(ray_tmp: str, **extra: str) -> dict[str, str]:
    return dict(os.environ, RAY_TMPDIR=ray_tmp, PYTHONUNBUFFERED="1", RAY_DEDUP_LOGS="0", **extra)


# --------------------------------------------------------------------- tests


def test_sweep_statuses_failure_and_skip(tmp_path: Path, ray_tmp: str) -> None:
    """3 cells: one completes, one fails on purpose, one asks for a GPU (skipped here)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs (a workers=1 cell)")
    from rlperf.resources.plan import count_nvidia_gpus

    if count_nvidia_gpus()[0] > 0:
        pytest.skip("this machine has a GPU: the gpu cell would run")
    conf = write_testcells(tmp_path / "conf")
    sweep = tmp_path / "sweep"
    # Ray gets exactly 2 CPUs and the workers=1 cell's trial asks for both (driver + env
    # runner): the cell completes only if RLlib's env runner is placed inside the trial's
    # placement group (else it would wait for a third CPU forever).
    args = [
        "-m",
        f"hydra.searchpath=[file://{conf}]",
        "+testcell=ok,fail,gpu",
        "cpu_affinity=ray_cpus",
        "cpu_affinity.num_cpus=2",
        *TINY,
        f"hydra.sweep.dir={sweep}",
    ]
    env_before = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", *one_run(args)],
        cwd=tmp_path,
        env=rlperf_env(ray_tmp, PYTHONPATH=TESTS_PATH),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert os.environ == env_before
    err = proc.stderr
    assert proc.returncode == 1, err[-3000:]  # a cell failed: the command fails

    ok, fail, gpu = (cell(sweep, d) for d in ("0", "1", "2"))
    assert [ok["status"], fail["status"], gpu["status"]] == ["completed", "failed", "skipped"]
    assert ok["request"] == [{"CPU": 1.0}, {"CPU": 1.0}] and ok["runs"] == 1
    assert fail["runs"] == 1 and gpu["runs"] == 0 and gpu["request"] == [{"CPU": 1.0, "GPU": 1.0}]
    assert len({ok["hash"], fail["hash"], gpu["hash"]}) == 3

    # The completed cell holds the foundation's files and Hydra's snapshot.
    summary = cell(sweep, "0", SUMMARY_FILE)
    assert summary["status"] == "completed" and summary["iterations"] == 1
    metrics = pd.read_csv(sweep / "0" / METRICS_FILE)
    assert list(metrics["iteration"]) == [1] and list(metrics["env_steps"]) == [256]
    overrides = yaml.safe_load((sweep / "0" / ".hydra" / "overrides.yaml").read_text())
    assert overrides == ["+testcell=ok", "cpu_affinity=ray_cpus", "cpu_affinity.num_cpus=2", *TINY]
    job_cfg = yaml.safe_load((sweep / "0" / ".hydra" / "config.yaml").read_text())
    assert job_cfg["workers"] == 1 and job_cfg["model"]["name"] == "tiny"
    fingerprint = cell(sweep, "0", FINGERPRINT_FILE)
    assert fingerprint["config"]["workers"] == 1 and fingerprint["cuda_visible_devices"] == ""

    # The failed cell: status failed, the error and its traceback.
    failed = cell(sweep, "1", SUMMARY_FILE)
    assert failed["status"] == "failed" and "breaks on purpose" in failed["error"]
    assert "FailsMidRun" in failed["traceback"] and "Traceback" in failed["traceback"]
    assert "breaks on purpose" in fail["reason"]

    # The GPU cell: skipped before it ran, with the reason; still a folder to find it by.
    skipped = cell(sweep, "2", SUMMARY_FILE)
    assert skipped["status"] == "skipped" and skipped["preflight"] is True
    assert "GPU(s) [0]" in skipped["error"] and "GPU(s) [0]" in gpu["reason"]
    assert not (sweep / "2" / METRICS_FILE).exists()
    assert (sweep / "2" / ".hydra" / "config.yaml").is_file()

    # One Ray instance for the group, as big as asked.
    index = json.loads((sweep / INDEX_FILE).read_text())
    assert len(index["groups"]) == 1
    assert index["groups"][0]["capacity"] == {"CPU": 2.0, "GPU": 0.0}
    assert index["groups"][0]["ray_start_s"] > 0
    assert sorted(index["cells"]) == sorted([ok["hash"], fail["hash"], gpu["hash"]])

    # Progress lines and the final table on stderr.
    assert re.search(r"\] started\s+#0 \+testcell=ok", err)
    assert re.search(r"\] failed\s+#1 \+testcell=fail .*breaks on purpose", err)
    assert re.search(r"\] skipped\s+#2 \+testcell=gpu", err)
    table = err[err.rindex("] cells:") :].splitlines()[1:5]
    assert [row.split()[:2] for row in table] == [
        ["#", "status"],
        ["0", "completed"],
        ["1", "failed"],
        ["2", "skipped"],
    ]
    # Then one line for the outcome, not the failed cell's traceback (it is in its folder).
    assert err.strip().splitlines()[-1].startswith("rlperf: sweep of 3 cells: 1 failed (")
    assert "Traceback" not in err[err.rindex("] cells:") :] and "Error executing job" not in err
    # Tune's traceback of the failed trial is kept in sweep.log (what the terminal shows of
    # third-party output is tests/console/test_terminal.py's).
    assert "Trial task failed" in (sweep / "sweep.log").read_text()
    assert not wait_gone(ray_tmp), "Ray processes left behind"


def _wait_for(path: Path, timeout: float) -> bool:
    """Whether ``path`` exists within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _run_until_second_cell_starts(
    args: list[str], cwd: Path, env: dict[str, str], sweep: Path
) -> tuple[int, str]:
    """Run ``rlperf`` and send SIGTERM to its PID (as Kubernetes and ``timeout`` do) once cell
    #1's job has started (its fingerprint is written)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlperf", *one_run(args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(480, proc.kill)
    watchdog.start()
    lines: list[str] = []
    sent = False
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if not sent and re.search(r"\] started\s+#1 ", line):
                # Into its job: the job writes its fingerprint once it has started.
                assert _wait_for(sweep / "1" / FINGERPRINT_FILE, 120), "".join(lines)[-3000:]
                proc.send_signal(signal.SIGTERM)
                sent = True
        rc = proc.wait(timeout=60)  # a hang guard; the time to exit: docs/exit-codes.md
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert sent, "".join(lines)[-3000:]
    return rc, "".join(lines)


@pytest.mark.timing
def test_interrupt_then_resume_and_affinity_groups(tmp_path: Path, ray_tmp: str) -> None:
    """Two cells pinned to different CPUs (two Ray instances); SIGTERM during the second;
    the same command again resumes: the first is not re-run, the second completes."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        *TINY,
        "workers=0",
        "cpu_affinity=pinned",
        "cpu_affinity.num_cpus=1",
        f"cpu_affinity.first_cpu={cpus[0]},{cpus[1]}",
        f"hydra.sweep.dir={sweep}",
    ]
    env = rlperf_env(ray_tmp)
    rc, err = _run_until_second_cell_starts(args, tmp_path, env, sweep)
    assert rc == 143, err[-3000:]  # 128 + SIGTERM
    first, second = cell(sweep, "0"), cell(sweep, "1")
    assert (first["status"], second["status"]) == ("completed", "interrupted"), err[-3000:]
    assert second["reason"] == "interrupted (SIGTERM)"
    assert cell(sweep, "1", SUMMARY_FILE)["status"] == "interrupted"
    assert "interrupted (SIGTERM): completed cells are kept" in err
    assert "Traceback" not in err and "SIGTERM received" not in err, err[-3000:]
    left = wait_gone(ray_tmp)
    assert not left, f"Ray processes left behind: {[p.pid for p in left]}"
    kept_files = {
        name: (sweep / "0" / name).stat().st_mtime_ns
        for name in (SUMMARY_FILE, METRICS_FILE, FINGERPRINT_FILE)
    }

    proc = run_rlperf(args, cwd=tmp_path, timeout=480)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 to run in 1 local Ray instance(s), 1 completed earlier (kept)" in proc.stderr
    again_first, again_second = cell(sweep, "0"), cell(sweep, "1")
    assert again_first["hash"] == first["hash"] and again_second["hash"] == second["hash"]
    assert (again_first["status"], again_first["runs"]) == ("completed", 1)  # not re-run
    assert (again_second["status"], again_second["runs"]) == ("completed", 2)
    assert {name: (sweep / "0" / name).stat().st_mtime_ns for name in kept_files} == kept_files
    assert cell(sweep, "1", SUMMARY_FILE)["status"] == "completed"

    # Each cell ran under its own mask, seen by the trial process itself.
    masks = [cell(sweep, d, FINGERPRINT_FILE)["affinity"] for d in ("0", "1")]
    assert masks == [[cpus[0]], [cpus[1]]]
    index = json.loads((sweep / INDEX_FILE).read_text())
    assert [g["ray_start"]["affinity"] for g in index["groups"]] == [
        [cpus[0]],
        [cpus[1]],
        [cpus[1]],  # the resumed run's group
    ]
    assert [again_first["group"], again_second["group"]] == [0, 2]
    assert not wait_gone(ray_tmp)


#: A config group ``faultcell`` for the fault test: APPO with a remote learner, a PPO cell
#: long enough to lose its node under, and a quick one.
FAULT_CELLS = {
    "learner": """# @package _global_
defaults:
  - override /algo: appo
learners: 1
workers: 1
algo: {train_batch_size: 256, minibatch_size: null, min_time_s_per_iteration: 2}
train: {iterations: 4}
""",
    "node": """# @package _global_
workers: 0
algo: {train_batch_size: 256, minibatch_size: 128, num_epochs: 1}
train: {iterations: 8}
""",
    "ok": """# @package _global_
workers: 0
algo: {train_batch_size: 256, minibatch_size: 128, num_epochs: 1}
train: {iterations: 1}
""",
}


@pytest.mark.timing
def test_learner_and_raylet_killed_mid_sweep_then_resume(tmp_path: Path, ray_tmp: str) -> None:
    """Three cells in one Ray: ``kill -9`` of cell #0's remote learner actor after its 2nd
    iteration, then of the raylet under cell #1 after its 1st. Both fail with their reason and
    keep their rows; #2, not started when the node was lost, completes in a fresh Ray."""
    group = tmp_path / "conf" / "faultcell"
    group.mkdir(parents=True)
    for name, text in FAULT_CELLS.items():
        (group / f"{name}.yaml").write_text(text)
    sweep = tmp_path / "sweep"
    args = [
        "-m", f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "+faultcell=learner,node,ok",
        "model=tiny", "telemetry.enabled=false", "train.env_ceiling.enabled=false",
        "ray.overcommit_cpus=true", f"hydra.sweep.dir={sweep}",
    ]  # fmt: skip
    with LiveRun(args, tmp_path, rlperf_env(ray_tmp)) as run:
        assert run.wait_until(lambda: csv_rows(sweep / "0" / METRICS_FILE) >= 2, 900), run.output
        learner = run.kill(command_starts("ray::_WrappedExecutable"))
        assert run.wait_until(lambda: csv_rows(sweep / "1" / METRICS_FILE) >= 1, 900), run.output
        raylet = run.kill(named("raylet"))
        rc = run.finish(timeout=300)
    err = run.output
    assert learner and raylet, err[-3000:]
    assert rc == 1, err[-3000:]
    first, second, third = (cell(sweep, d) for d in ("0", "1", "2"))
    assert [first["status"], second["status"], third["status"]] == ["failed", "failed", "completed"]
    assert "a learner actor died" in first["reason"], first
    assert second["reason"].startswith("Ray's node was lost while group 0 ran: its raylet (pid ")
    assert "was killed by SIGKILL" in second["reason"]
    for d, why in (("0", "a learner actor died"), ("1", "Ray's node was lost")):
        summary = cell(sweep, d, SUMMARY_FILE)
        assert summary["status"] == "failed" and why in summary["error"], summary
        assert csv_rows(sweep / d / METRICS_FILE) >= {"0": 2, "1": 1}[d]  # the rows are kept
    assert (first["group"], second["group"], third["group"]) == (0, 0, 1)
    assert "group 0: Ray's node was lost; 1 cell(s) not started go on in a new Ray (group 1)" in err
    assert err.strip().splitlines()[-1].startswith("rlperf: sweep of 3 cells: 2 failed (")
    assert "Traceback" not in err[err.rindex("] cells:") :]
    assert not wait_gone(ray_tmp), "Ray processes left behind"
    # That the same command again runs the failed cells only (#0 and #1 here) is
    # test_launcher_in_process.py's test_failed_and_invalid_cells_fail_the_sweep_after_the_others.


@RAY_START
def test_sweep_on_an_existing_cluster(tmp_path: Path, ray_tmp: str) -> None:
    """``ray.address``: the cells of a sweep, then the trials of a search, run on a
    cluster the test started (and the launcher neither starts nor stops Ray)."""
    from rlperf.resources.plan import count_nvidia_gpus

    if count_nvidia_gpus()[0] > 0:
        pytest.skip("this machine has a GPU: the gpu cell would be feasible")
    port = free_port()
    address = f"127.0.0.1:{port}"
    # The cluster's own token (Ray 2.60 token auth), shared by the driver only through env.
    env = rlperf_env(ray_tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    ray_cli = Path(sys.executable).with_name("ray")
    start = subprocess.run(
        [
            str(ray_cli),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--include-dashboard=false",
            "--num-cpus=2",
            "--num-gpus=0",
            f"--temp-dir={ray_tmp}",
            "--disable-usage-stats",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert start.returncode == 0, start.stderr[-3000:]
    cluster = processes_with(ray_tmp)
    assert cluster
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlperf",
            "-m",
            ONE_RUN,
            *TINY,
            "workers=0",
            "gpu_layout=none,gpu0_driver",
            f"ray.address={address}",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran, skipped = cell(sweep, "0"), cell(sweep, "1")
    # The address joined (Ray itself reports the GCS under this machine's network IP).
    assert ran["status"] == "completed" and ran["ray_address"] == address and ran["node"]
    assert skipped["status"] == "skipped" and "(Ray cluster)" in skipped["reason"]
    assert "GPU" in skipped["reason"]
    assert cell(sweep, "0", SUMMARY_FILE)["status"] == "completed"
    index = json.loads((sweep / INDEX_FILE).read_text())
    assert index["groups"][0]["address"] == address
    assert index["groups"][0]["capacity"] == {"CPU": 2.0}
    assert index["groups"][0]["ray_start_s"] == 0.0  # joined, not started
    assert f"on the Ray cluster at {address}" in proc.stderr
    # The launcher left the cluster running.
    assert all(p.is_running() for p in cluster)

    # A search on the same cluster: proposals are checked against the cluster's 2 CPUs.
    search = tmp_path / "search"
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", "-m", *TINY, "hydra.sweeper.search.algorithm=random",
         "hydra.sweeper.search.num_samples=1", "hydra.sweeper.search.metric=iter_s",
         "hydra.sweeper.search.mode=min", "workers=0,8", f"ray.address={address}",
         f"hydra.sweep.dir={search}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = json.loads((search / SEARCH_FILE).read_text())["trials"]
    by_workers = {t["params"]["workers"]: t for t in trials}
    assert by_workers[0]["status"] == "completed"
    assert by_workers[8]["status"] == "skipped" and "(Ray cluster)" in by_workers[8]["reason"]
    assert "asks for 9 CPU in all (9 bundles) but Ray has 2" in by_workers[8]["reason"]
    assert all(p.is_running() for p in cluster)


def test_repeats_run_in_rounds_in_one_ray_and_the_report_pools_them(
    tmp_path: Path, ray_tmp: str
) -> None:
    """``hydra.sweeper.repeats.min=2 max=3 race=true`` over one configuration: the race has
    nobody to close, so it gets 3 runs, in rounds judged by the report's reading in the
    launcher's process, all in the one Ray started for the group."""
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY, "workers=0", "train.iterations=2", "train.warmup_iterations=1",
            "hydra.sweeper.repeats.min=2", "hydra.sweeper.repeats.max=3",
            "hydra.sweeper.race=true", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", *args], cwd=tmp_path, env=rlperf_env(ray_tmp),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = json.loads((sweep / INDEX_FILE).read_text())
    recs = sorted(index["cells"].values(), key=lambda r: r["repeat"])
    assert [(r["subdir"], r["repeat"], r["status"]) for r in recs] == [
        ("0", 0, "completed"), ("0-r1", 1, "completed"), ("0-r2", 2, "completed")]  # fmt: skip
    seeds = {yaml.safe_load((sweep / r["subdir"] / CONFIG_FILE).read_text())["seed"] for r in recs}
    assert len(seeds) == 3
    assert recs[0]["closed"]["why"] == "max" and len(index["rounds"]["order"]) == 3
    # One Ray for every round: started once, its group holds the three runs.
    assert proc.stderr.count("Ray started in") == 1
    assert len(index["groups"]) == 1 and len(index["groups"][0]["cells"]) == 3
    assert "round 3 of up to 3: 1 run(s)" in proc.stderr
    assert "#0 r2 " in proc.stderr  # the table names each run
    assert not wait_gone(ray_tmp), "Ray processes left behind"
    report = build_report([sweep], tmp_path / "report", figures=False)
    assert report.configurations["repeats"].tolist() == [3]
    assert report.configurations["interval"].tolist() == ["run to run"]
