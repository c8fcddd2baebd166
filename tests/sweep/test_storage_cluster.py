"""A sweep on a cluster whose nodes share no files (tests/support/cluster.py): the check
that refuses a sweep folder some node does not see, and ``hydra.launcher.storage`` on an
S3-compatible server: cells that ran on a node the launcher cannot see reach the sweep
folder and the bucket, ``rlperf-report`` reads both alike, a downstream edge sweep finds
its checkpoints through the storage, a resume fetches what the folder lost, and the
credentials are written nowhere."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from rlperf.layout import CELL_FILE, INDEX_FILE, METRICS_FILE, SEARCH_FILE, SUMMARY_FILE
from tests.conftest import RAY_START
from tests.support.cluster import (
    FAKE_KEY_ID,
    FAKE_SECRET,
    Cluster,
    ObjectStore,
    cluster,
    credentials,
    namespaces_usable,
    object_store,
)

pytestmark = [pytest.mark.slow, RAY_START]

TRAIN = ("model=mlp64", "env=cartpole", "workers=0", "algo.train_batch_size=256",
         "algo.minibatch_size=128", "algo.num_epochs=1", "train.iterations=2",
         "telemetry.interval_s=0.2")  # fmt: skip
EDGE = ("stage=edge", "backend=tflite_fp32", "edge.steps=40", "edge.warmup_steps=10",
        "edge.fidelity_observations=20", "edge.calibration_size=20",
        "edge.isolate=false")  # fmt: skip


def _rlperf(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlperf", "-m", "hydra.sweeper.repeats.min=1", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _report(target: str, out: Path, env: dict[str, str]) -> dict[str, pd.DataFrame]:
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf.report.cli", target, "--out", str(out), "--no-figures"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {p.name: pd.read_csv(p) for p in sorted(out.glob("*.csv"))}


def _leaks(paths: list[Path]) -> list[str]:
    found = []
    for root in paths:
        for f in root.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                if FAKE_KEY_ID.encode() in data or FAKE_SECRET.encode() in data:
                    found.append(str(f))
    return found


@dataclass
class Nodes:
    cluster: Cluster
    store: ObjectStore
    data: Path  # no worker node sees what the head has here

    @property
    def env(self) -> dict[str, str]:
        """The launcher's environment: the cluster's token and the bucket's credentials."""
        return {**self.cluster.env, **credentials()}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """A head with no CPUs (every cell runs on a worker node) and two worker nodes of one
    CPU each, and the object store; the last test kills a worker node."""
    why = namespaces_usable()
    if why is not None:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("cluster")
    data = root / "data"  # each worker node has a tmpfs of its own over it
    with object_store() as store, cluster(root, data, head_cpus=0, worker_cpus=(1, 1)) as cl:
        yield Nodes(cl, store, data)


def test_a_sweep_on_nodes_that_share_no_files(nodes: Nodes, tmp_path: Path) -> None:
    store, data, env = nodes.store, nodes.data, nodes.env
    cl = nodes.cluster
    on_cluster = f"ray.address={cl.address}"

    # 1. The sweep folder, which the worker node does not see: refused before any cell.
    local = data / "local"
    proc = _rlperf([*TRAIN, on_cluster, f"hydra.sweep.dir={local}"], tmp_path, env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"rlperf: the sweep folder {local} is not shared by every node")
    assert "does not see it" in last and "hydra.launcher.storage=s3://" in last
    assert not list(local.glob("*/summary.json"))

    # 2. The same sweep with the bucket as its storage: every cell ran on the worker.
    sweep = data / "sweep"
    uri = store.uri("sweeps/train")
    args = [*TRAIN, "env_runner.num_envs=1,2", on_cluster, f"hydra.sweep.dir={sweep}",
            f"hydra.launcher.storage='{uri}'"]  # fmt: skip
    proc = _rlperf(args, tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = [json.loads((sweep / d / CELL_FILE).read_text()) for d in ("0", "1")]
    for rec in cells:
        assert rec["status"] == "completed" and rec["ray_address"] == cl.address, rec
        assert rec["storage"].endswith(f"/{rec['subdir']}") and rec["node"], rec
        assert (sweep / rec["subdir"] / METRICS_FILE).is_file()
        assert (sweep / rec["subdir"] / "checkpoint").is_dir()
        summary = json.loads((sweep / rec["subdir"] / SUMMARY_FILE).read_text())
        assert summary["status"] == "completed"
        assert f"sweeps/train/{rec['storage']}/{SUMMARY_FILE}" in store.objects("sweeps/train/")
    assert "sweeps/train/sweep.json" in store.objects("sweeps/train/")

    # 3. rlperf-report over the folder and over the URI: the same tables.
    by_folder = _report(str(sweep), tmp_path / "r1", env)
    by_uri = _report(uri, tmp_path / "r2", {**env, "XDG_CACHE_HOME": str(tmp_path / "c")})
    assert by_folder.keys() == by_uri.keys() and by_folder
    for name, table in by_folder.items():
        pd.testing.assert_frame_equal(table, by_uri[name], obj=name)

    # 4. A downstream edge sweep from the head: its cell runs on the worker, which fetches
    # the training job's folder from the storage.
    edge = data / "edge"
    proc = _rlperf([*EDGE, f"run={sweep / '0'}", on_cluster, f"hydra.sweep.dir={edge}",
                    f"hydra.launcher.storage='{store.uri('sweeps/edge')}'",
                    f"edge.cache_dir={tmp_path / 'cache'}"], tmp_path, env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    edge_summary = json.loads((edge / "0" / SUMMARY_FILE).read_text())
    assert edge_summary["status"] == "completed", edge_summary

    # 5. Resume after the folder lost a cell: fetched again, nothing re-run.
    shutil.rmtree(sweep / "1")
    proc = _rlperf(args, tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 to run" in proc.stderr and (sweep / "1" / METRICS_FILE).is_file()
    rec = json.loads((sweep / INDEX_FILE).read_text())["cells"]
    assert all(r["runs"] == 1 for r in rec.values()), rec

    # 6. A search through the storage: its trials' files and scores reach the search folder.
    search = data / "search"
    stored = f"hydra.launcher.storage='{store.uri('sweeps/search')}'"
    proc = _rlperf([*TRAIN, "hydra.sweeper.search.algorithm=random",
                    "hydra.sweeper.search.num_samples=1", "hydra.sweeper.search.metric=iter_s",
                    "hydra.sweeper.search.mode=min", "env_runner.num_envs=1,2", on_cluster,
                    f"hydra.sweep.dir={search}", stored], tmp_path, env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = json.loads((search / SEARCH_FILE).read_text())["trials"]
    assert len(trials) == 2 and all(t["status"] == "completed" and t["score"] for t in trials)
    assert all((search / t["subdir"] / METRICS_FILE).is_file() for t in trials)
    assert "sweeps/search/search.json" in store.objects("sweeps/search/")

    # 7. The credentials reached the worker (its uploads worked) but no file holds them.
    bucket = tmp_path / "bucket"
    for key in store.objects():
        if not key.endswith("/"):
            (bucket / key).parent.mkdir(parents=True, exist_ok=True)
            (bucket / key).write_bytes(store.read(key))
    assert _leaks([sweep, edge, search, bucket]) == []


def test_a_node_lost_mid_cell_fails_that_cell_only_and_a_node_added_takes_cells(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Two cells at once, one on each worker node; the first worker's raylet is killed while
    both run: its cell fails naming the node, and a node added then takes the cells waiting
    beside the node left; the same command runs only the failed cell again."""
    sweep = nodes.data / "lost"
    args = [*TRAIN, "train.iterations=60", "env_runner.num_envs=1,2,3,4",
            "hydra.launcher.max_concurrent_trials=2", f"ray.address={nodes.cluster.address}",
            f"hydra.sweep.dir={sweep}",
            f"hydra.launcher.storage='{nodes.store.uri('sweeps/lost')}'"]  # fmt: skip
    cmd = [sys.executable, "-m", "rlperf", "-m", "hydra.sweeper.repeats.min=1", *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=nodes.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip

    def running() -> int:
        try:
            cells = json.loads((sweep / INDEX_FILE).read_text())["cells"].values()
        except (OSError, ValueError):
            return 0
        return sum(1 for c in cells if c["status"] == "running")

    deadline = time.monotonic() + 240
    while running() < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(4)  # both jobs under way
    raylet, killed = nodes.cluster.raylet(0), nodes.cluster.node_id(0)
    assert raylet is not None and running() == 2
    raylet.send_signal(signal.SIGKILL)
    added = nodes.cluster.node_id(nodes.cluster.add_worker(1))
    _, err = proc.communicate(timeout=480)
    assert proc.returncode == 1, err[-3000:]
    cells = json.loads((sweep / INDEX_FILE).read_text())["cells"].values()
    failed = [c for c in cells if c["status"] == "failed"]
    assert len(failed) == 1 and sum(c["status"] == "completed" for c in cells) == 3, err[-3000:]
    assert any(c["node"].endswith(added[:12]) for c in cells if c["status"] == "completed")
    lost = failed[0]
    # Named from Ray's text of the actor's death, or from the node the trial reported from
    # (a trial killed before its first step has reported nothing).
    assert lost["reason"].startswith("Ray's node ") and f"({killed[:12]})" in lost["reason"], lost
    assert "was lost while the cell ran" in lost["reason"]
    summary = json.loads((sweep / lost["subdir"] / SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["error"] == lost["reason"]
    assert err.strip().splitlines()[-1].startswith("rlperf: sweep of 4 cells: 1 failed (")

    again = _rlperf(args, tmp_path, nodes.env)
    assert again.returncode == 0, again.stderr[-3000:]
    after = json.loads((sweep / INDEX_FILE).read_text())["cells"]
    runs = {c["subdir"]: c["runs"] for c in after.values()}
    assert runs[lost["subdir"]] == 2 and sorted(runs.values()) == [1, 1, 1, 2], runs
    assert all(c["status"] == "completed" for c in after.values())
    assert (sweep / lost["subdir"] / METRICS_FILE).is_file()
