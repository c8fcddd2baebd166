"""Tracking against the real tools: an MLflow server on 127.0.0.1 (one for the session),
TensorBoard's own event reader, W&B's offline run log, and a recording fake at the ``wandb``
API boundary for the history a job hands W&B."""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import THESIS, TINY_TRAIN, run_rlperf

from rlperf.layout import (
    EPISODES_FILE,
    FINGERPRINT_FILE,
    INDEX_FILE,
    METRICS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
)
from rlperf.results.csvlog import read_rows
from rlperf.results.flat import flatten
from rlperf.results.latency import episode_windows
from rlperf.tracking.record import JOB_ID_TAG, folder_rows, job_identity, numbers, param_text

pytestmark = pytest.mark.slow

#: A training run of two short iterations, the driver sampling (no env runner to start).
TRAIN = (*[a for a in TINY_TRAIN if not a.startswith("workers=")], "workers=0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 with a SQLite store, as a user would run one."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    log = (root / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination", str(root / "artifacts"),
        ],
        stdout=log, stderr=subprocess.STDOUT, cwd=root,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"{uri}/health", timeout=2).status == 200:
                break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError((root / "server.log").read_text()[-3000:])
        time.sleep(0.3)
    yield uri
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_of(uri: str, experiment: str) -> list[Any]:
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    return [] if exp is None else list(c.search_runs([exp.experiment_id], max_results=1000))


def metrics_rows(folder: Path) -> list[dict[str, float]]:
    return [numbers(r) for r in read_rows(folder / METRICS_FILE)]


def cumulative_env_steps(rows: list[dict[str, float]]) -> list[int]:
    out, total = [], 0.0
    for r in rows:
        total += r["env_steps"]
        out.append(int(total))
    return out


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def tracked_run(mlflow_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One two-iteration training run sent to all three tools live."""
    root = tmp_path_factory.mktemp("tracked")
    experiment = f"run-{uuid.uuid4().hex[:8]}"
    out = root / "run"
    args = [
        *TRAIN, "tracking=[mlflow,tensorboard,wandb]", f"tracking.mlflow.uri={mlflow_server}",
        f"tracking.mlflow.experiment={experiment}", f"hydra.run.dir={out}",
    ]  # fmt: skip
    proc = ok(run_rlperf(args, cwd=root))
    return {"out": out, "experiment": experiment, "proc": proc}


def test_mlflow_holds_the_runs_rows_config_tags_and_files(
    tracked_run: dict[str, Any], mlflow_server: str
) -> None:
    out = tracked_run["out"]
    (run,) = runs_of(mlflow_server, tracked_run["experiment"])
    assert run.info.status == "FINISHED"
    rows = metrics_rows(out)
    assert len(rows) == 2
    steps = cumulative_env_steps(rows)
    c = client(mlflow_server)
    for key in rows[0]:
        history = sorted(c.get_metric_history(run.info.run_id, key), key=lambda m: m.step)
        expected = [(s, r[key]) for s, r in zip(steps, rows, strict=True)]
        assert [(m.step, m.value) for m in history] == expected
    fingerprint = json.loads((out / FINGERPRINT_FILE).read_text())
    expected = {k: param_text(v) for k, v in flatten(fingerprint["config"]).items()}
    assert run.data.params == expected  # the composed, resolved config, Hydra's key names
    assert run.data.params["train.iterations"] == "2" and run.data.params["model.name"] == "tiny"
    tags = run.data.tags
    assert tags[JOB_ID_TAG] == job_identity(fingerprint)
    assert tags["fingerprint.cpu_model"] == str(fingerprint["cpu_model"])
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert tags["env_protocol.env_id"] == summary["env_protocol"]["env_id"]
    files = {a.path for a in c.list_artifacts(run.info.run_id)}
    assert {SUMMARY_FILE, FINGERPRINT_FILE, METRICS_FILE, ".hydra"} <= files
    assert summary["tracking"]["tools"] == ["tensorboard", "mlflow", "wandb"]
    assert summary["tracking"]["failed"] == [] and summary["incidents"] == []


def test_tensorboard_events_hold_the_same_values(tracked_run: dict[str, Any]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tracked_run["out"]
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    rows = metrics_rows(out)
    steps = cumulative_env_steps(rows)
    assert set(events.Tags()["scalars"]) == set(rows[0])
    for key in rows[0]:
        got = [(e.step, e.value) for e in events.Scalars(key)]
        assert [s for s, _ in got] == steps
        for (_, value), row in zip(got, rows, strict=True):  # TensorBoard keeps float32
            assert value == pytest.approx(row[key], rel=1e-6, abs=1e-30)


def test_wandb_offline_run_holds_the_config_history_and_last_row(
    tracked_run: dict[str, Any],
) -> None:
    from support.wandb_log import read_offline_run

    out = tracked_run["out"]
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    run = read_offline_run(run_dir)
    fingerprint = json.loads((out / FINGERPRINT_FILE).read_text())
    config = {k: v for k, v in run.config.items() if k != "_wandb"}
    assert config == json.loads(json.dumps(fingerprint["config"]))
    rows = metrics_rows(out)
    history = [{k: v for k, v in h.items() if not k.startswith("_")} for h in run.history]
    assert history == rows
    assert [h["_step"] for h in run.history] == cumulative_env_steps(rows)
    summary = {k: v for k, v in run.summary.items() if not k.startswith("_")}
    assert summary == rows[-1]
    assert "stage:train" in run.tags and run.exit_code == 0
    assert {SUMMARY_FILE, METRICS_FILE, ".hydra/config.yaml"} <= set(run.files)


def test_the_terminal_stays_quiet(tracked_run: dict[str, Any]) -> None:
    proc = tracked_run["proc"]
    text = proc.stdout + proc.stderr
    assert "wandb:" not in text and "mlflow" not in text.lower(), text[-3000:]


class RecordingWandb:
    """The ``wandb`` calls rlperf makes, recorded (the module's API boundary)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def Settings(self, **kwargs: Any) -> dict[str, Any]:  # noqa: N802 - wandb's name
        return kwargs

    def init(self, **kwargs: Any) -> RecordingWandb:
        self.calls.append(("init", kwargs))
        return self

    def log(self, values: dict[str, float], step: int) -> None:
        self.calls.append(("log", (step, values)))

    def save(self, path: str, base_path: str, policy: str) -> None:
        self.calls.append(("save", str(Path(path).relative_to(base_path))))

    def finish(self, exit_code: int) -> None:
        self.calls.append(("finish", exit_code))


def test_wandb_gets_each_row_at_its_step(
    tiny_run: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The history a job hands W&B, checked at the API boundary with the tests' real run."""
    from rlperf.tracking.dispatch import Tracking
    from rlperf.tracking.record import artifact_paths, folder_job
    from rlperf.tracking.wandb_sink import WandbSink

    fake = RecordingWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    job, status = folder_job(tiny_run)
    incidents: list[Any] = []
    sinks = {"wandb": (lambda: WandbSink("p", None, "offline", tmp_path), "tracking.wandb")}
    tracking = Tracking(job, sinks, lambda *a: incidents.append(a))
    for row in read_rows(tiny_run / METRICS_FILE):
        tracking.row(row)
    tracking.close(status, artifact_paths(tiny_run))
    assert incidents == []
    kinds = [k for k, _ in fake.calls]
    assert kinds[0] == "init" and kinds[-1] == "finish" and fake.calls[-1][1] == 0
    init = fake.calls[0][1]
    assert init["config"] == job.config and init["name"] == job.name and init["mode"] == "offline"
    assert init["dir"] == str(tmp_path) and init["group"] is None
    logged = [v for k, v in fake.calls if k == "log"]
    rows = metrics_rows(tiny_run)
    assert logged == list(zip(cumulative_env_steps(rows), rows, strict=True))
    assert {v for k, v in fake.calls if k == "save"} >= {SUMMARY_FILE, ".hydra/config.yaml"}


def test_a_sweep_is_one_parent_run_and_its_resume_adds_nothing(
    mlflow_server: str, tmp_path: Path
) -> None:
    experiment = f"sweep-{uuid.uuid4().hex[:8]}"
    sweep = tmp_path / "sweep"
    args = [
        "-m", *TRAIN, "train.iterations=1", "seed=0,1", "tracking=mlflow",
        f"tracking.mlflow.uri={mlflow_server}", f"tracking.mlflow.experiment={experiment}",
        f"hydra.sweep.dir={sweep}",
    ]  # fmt: skip
    ok(run_rlperf(args, cwd=tmp_path))
    runs = runs_of(mlflow_server, experiment)
    (parent,) = [r for r in runs if r.data.tags.get("rlperf.kind") == "sweep"]
    children = sorted(
        (r for r in runs if r.data.tags.get("rlperf.kind") == "job"), key=lambda r: r.info.run_name
    )
    assert parent.info.run_name == str(sweep) and parent.info.status == "FINISHED"
    assert [c.data.tags["mlflow.parentRunId"] for c in children] == [parent.info.run_id] * 2
    assert [c.info.run_name.split()[0] for c in children] == ["#0", "#1"]
    assert (
        children[0].info.run_name.endswith("seed=0") and "tracking" not in children[0].info.run_name
    )
    assert {a.path for a in client(mlflow_server).list_artifacts(parent.info.run_id)} == {
        INDEX_FILE
    }
    # The same command resumes: both cells are kept, nothing is sent twice.
    ok(run_rlperf(args, cwd=tmp_path))
    again = runs_of(mlflow_server, experiment)
    assert sorted(r.info.run_id for r in again) == sorted(r.info.run_id for r in runs)


def test_a_dead_server_costs_one_line_one_incident_and_no_secret(tmp_path: Path) -> None:
    """A tracking URI with a password, to a port nobody listens on, and a W&B key in the
    environment: the run completes, says so once, and no file holds a secret."""
    out = tmp_path / "run"
    uri = f"http://alice:pw-s3cret-123@127.0.0.1:{free_port()}"
    key = "wandb-key-0123456789abcdef"
    args = [*TRAIN, "tracking=mlflow", f"tracking.mlflow.uri={uri}", f"hydra.run.dir={out}"]
    proc = ok(run_rlperf(args, cwd=tmp_path, env={"WANDB_API_KEY": key}))
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "tracking:" in line]
    assert len(said) == 1 and "cannot connect" in said[0], proc.stderr[-2000:]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["status"] == "completed" and len(metrics_rows(out)) == 2
    (incident,) = summary["incidents"]
    assert incident["kind"] == "tracking_failed" and incident["setting"] == "tracking.mlflow.uri"
    assert summary["tracking"]["failed"] == ["mlflow"]
    assert summary["tracking"]["close_s"] < 5  # the wall time it added at the end
    for path in [*out.rglob("*")]:
        if path.is_file() and path.suffix in (".json", ".yaml", ".log", ".csv", ".txt"):
            text = path.read_text(errors="replace")
            assert "pw-s3cret-123" not in text and key not in text, path
    assert "pw-s3cret-123" not in proc.stdout + proc.stderr


def test_a_rollout_sends_each_episodes_latency_window(tiny_run: Path, tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "rollout"
    args = [
        "stage=rollout", f"run={tiny_run}", "rollout.steps=200", "rollout.warmup_steps=20",
        "env.max_episode_steps=100", "workers=0", "tracking=tensorboard", f"hydra.run.dir={out}",
    ]  # fmt: skip
    ok(run_rlperf(args, cwd=tmp_path))
    windows = episode_windows(read_rows(out / STEPS_FILE), read_rows(out / EPISODES_FILE))
    assert [w["steps"] for w in windows] == [100, 200]
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    for key in ("action_ms_p50", "action_ms_p99", "forward_ms_mean", "return", "length"):
        got = [(e.step, e.value) for e in events.Scalars(key)]
        assert [s for s, _ in got] == [100, 200]
        assert [v for _, v in got] == pytest.approx([w[key] for w in windows], rel=1e-6)
    assert folder_rows(out, "rollout")[0].values == windows[0]


def _hammer(folder: str, name: str, barrier: Any) -> None:
    from rlperf.tracking.mlflow_sink import MlflowSink
    from rlperf.tracking.record import TrackedJob, TrackedRow

    sink = MlflowSink(None, "rlperf", Path(folder))
    job = TrackedJob(f"job:{name}", name, "train", Path(folder), time.time(), {"x": name})
    sink.experiment_id()
    barrier.wait()  # both write at once from here
    sink.open(job)
    for step in range(40):
        sink.log([TrackedRow(step, float(step), {"a": float(step), "b": 1.0})], job.started_at)
    sink.finish("completed", [], {})


def test_two_cells_write_one_local_store_at_once(tmp_path: Path) -> None:
    """The default store (SQLite in the sweep folder) takes two writers at the same time."""
    from rlperf.tracking.mlflow_sink import MlflowSink

    MlflowSink(None, "rlperf", tmp_path).experiment_id()  # the sweep engine creates it first
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), n, barrier)) for n in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    uri = MlflowSink(None, "rlperf", tmp_path).uri
    runs = runs_of(uri, "rlperf")
    assert sorted(r.info.run_name for r in runs) == ["a", "b"]
    c = client(uri)
    assert all(len(c.get_metric_history(r.info.run_id, "a")) == 40 for r in runs)


def test_the_studys_folders_sent_afterwards_and_again_make_nothing_new(
    mlflow_server: str, tmp_path: Path
) -> None:
    data = tmp_path / "volta1_def"
    shutil.copytree(THESIS / "ray_results" / "volta1_def", data)
    experiment = f"study-{uuid.uuid4().hex[:8]}"
    cmd = [
        sys.executable, "-m", "rlperf.report.cli", str(data), "--out", str(tmp_path / "report"),
        "--no-figures", "--to", "mlflow", "--to", "tensorboard", "--to", "wandb",
        "--mlflow-uri", mlflow_server, "--mlflow-experiment", experiment,
    ]  # fmt: skip
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    cells = sorted(p for p in data.iterdir() if (p / "progress.csv").is_file())
    runs = runs_of(mlflow_server, experiment)
    jobs = [r for r in runs if r.data.tags.get("rlperf.kind") == "job"]
    kinds = sorted(r.data.tags.get("rlperf.kind") for r in runs)
    assert kinds == sorted(["job"] * len(cells) + ["sweep", "report"])
    (parent,) = [r for r in runs if r.data.tags.get("rlperf.kind") == "sweep"]
    assert {r.data.tags["mlflow.parentRunId"] for r in jobs} == {parent.info.run_id}
    assert parent.info.status == "FINISHED"
    # A legacy run's rows are the report's canonical iterations: time_this_iter_s per step.
    one = next(r for r in jobs if r.info.run_name.endswith(cells[0].name))
    progress = read_rows(cells[0] / "progress.csv")
    history = client(mlflow_server).get_metric_history(one.info.run_id, "iter_s")
    assert sorted(m.value for m in history) == sorted(
        float(r["time_this_iter_s"]) for r in progress
    )
    assert one.data.tags[JOB_ID_TAG] == f"tune:{progress[0]['experiment_id']}"
    assert one.data.params["num_workers"] == str(
        json.loads((cells[0] / "params.json").read_text())["num_workers"]
    )
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(r.info.run_id for r in runs_of(mlflow_server, experiment)) == sorted(
        r.info.run_id for r in runs
    )
    for tool in ("mlflow", "tensorboard", "wandb"):
        assert f"{tool} (" in second.stderr
    assert second.stderr.count(f"0 job(s) sent, {len(cells)} held already") == 3, second.stderr
    assert not math.isnan(float(history[0].timestamp))
