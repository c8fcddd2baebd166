"""The serve stage: wire format, statistics, load generator, config; and a real Ray Serve
deployment of a trained, non-constant policy (slow), shared by the slow tests of this module."""

from __future__ import annotations

import asyncio
import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlperf.errors import ConfigError, PayloadError
from rlperf.layout import LEVELS_FILE, REQUESTS_FILE, SUMMARY_FILE
from rlperf.serve.levels import level_row, max_rate_under_slo, quantile_ci
from rlperf.serve.loadgen import Reply, Target, closed_loop, open_loop, poisson_schedule
from rlperf.serve.payload import decode_observation, encode_observation
from rlperf.validation.validate import validate_config
from tests.conftest import NOT_BLANK_PNG_BYTES, REPO

# --------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------


def test_payload_round_trip_and_every_bad_body_names_shape_and_dtype() -> None:
    obs = np.arange(42 * 42 * 4, dtype=np.uint8).reshape(42, 42, 4)
    np.testing.assert_array_equal(
        decode_observation(encode_observation(obs), obs.shape, "uint8"), obs
    )
    body = encode_observation(obs)
    bad = {
        "not npy": b"hello world",
        "float32": encode_observation(obs.astype(np.float32)),
        "shape": encode_observation(obs[:21]),
        "truncated": body[:-5],
    }
    for why, data in bad.items():
        with pytest.raises(PayloadError, match=r"shape \(42, 42, 4\) and dtype uint8") as err:
            decode_observation(data, (42, 42, 4), "uint8")
        assert "expected one .npy array" in str(err.value), why
    with pytest.raises(PayloadError, match="float32"):
        decode_observation(bad["float32"], (42, 42, 4), "uint8")


# --------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------


def test_quantile_interval_covers_the_true_quantile_and_needs_enough_requests() -> None:
    rng = np.random.default_rng(0)
    true_p99 = -np.log(0.01)  # exponential(1)
    covered = 0
    for _ in range(200):
        est, lo, hi = quantile_ci(rng.exponential(1.0, 1000), 0.99, 0.95)
        assert lo <= est <= hi
        covered += lo <= true_p99 <= hi
    assert 0.9 <= covered / 200 <= 1.0  # ~95 % coverage, distribution-free
    # 100 requests cannot bound a p99 from above (the upper rank passes n).
    assert quantile_ci(rng.exponential(1.0, 100), 0.99, 0.95)[2] == np.inf


def _rows(latencies: list[float], status: str = "ok", lag: float = 0.1) -> list[dict[str, Any]]:
    answered = status == "ok"  # a failed request has no model time (None, as the generator has it)
    return [
        {"status": status, "latency_ms": v, "send_lag_ms": lag, "scheduled_s": i * 0.01,
         "done_s": i * 0.01 + v / 1e3, "model_ms": 1.0 if answered else None,
         "batch": 1 if answered else None}
        for i, v in enumerate(latencies)
    ]  # fmt: skip


def test_level_row_counts_outcomes_and_failed_requests_never_meet_a_bound() -> None:
    key = {"loop": "open", "offered_rps": 100.0}
    ok = _rows([2.0] * 990)
    row = level_row(ok + _rows([1.0] * 10, "rejected"), key, confidence=0.95,
                    max_send_lag_ms=5.0, replicas=1)  # fmt: skip
    assert (row["requests"], row["ok"], row["rejections"], row["errors"]) == (1000, 990, 10, 0)
    assert row["p50_ms"] == 2.0 and row["max_ms"] == np.inf  # rejected = infinitely late
    # Model time from the 990 answered requests only: 0.99 s of model over 9.892 s.
    assert row["model_ms_mean"] == 1.0 and row["batch_mean"] == 1.0
    assert row["model_busy_share"] == pytest.approx(0.99 / 9.892)
    assert row["on_schedule"] is True
    late = level_row(_rows([2.0] * 400, lag=9.0), key, confidence=0.95, max_send_lag_ms=5.0,
                     replicas=1)  # fmt: skip
    assert late["on_schedule"] is False and late["send_lag_p99_ms"] == 9.0


def test_level_energy_is_per_1000_answered_requests() -> None:
    from rlperf.results.columns import CPU_ENERGY_J
    from rlperf.serve.serve_job import level_energy

    assert level_energy({CPU_ENERGY_J: 5.0, "gpu0_energy_j": 1.0}, 40) == {
        "cpu_energy_per_1k_requests_j": 125.0, "gpu_energy_per_1k_requests_j": 25.0,
    }  # fmt: skip
    unmeasured = level_energy({}, 40)
    assert all(np.isnan(v) for v in unmeasured.values())
    assert level_energy({CPU_ENERGY_J: 0.0}, 10)["cpu_energy_per_1k_requests_j"] == 0.0


def test_max_rate_under_slo_searches_counted_open_levels() -> None:
    def level(rate: float, p99_hi: float, **kw: Any) -> dict[str, Any]:
        return {"loop": "open", "offered_rps": rate, "p99_hi_ms": p99_hi, "on_schedule": True,
                "excluded": "", "send_lag_p99_ms": 0.5, **kw}  # fmt: skip

    rows = [
        level(10, 5.0),
        level(20, 12.0),
        level(40, 8.0, on_schedule=False, send_lag_p99_ms=30.0),  # generator fell behind
        level(80, 9.0, excluded="fault"),
        level(160, 50.0),
        {"loop": "closed", "offered_rps": None, "p99_hi_ms": 1.0, "on_schedule": True},
    ]
    out = max_rate_under_slo(rows, 20.0)
    assert out["max_rate_rps"] == 20 and out["bounded"] is True
    assert out["levels_searched"] == [10, 20, 160]
    assert [x["offered_rps"] for x in out["levels_not_counted"]] == [40, 80]
    assert max_rate_under_slo(rows[:2], 20.0)["bounded"] is False  # nothing failed above 20


# --------------------------------------------------------------------------
# The load generator
# --------------------------------------------------------------------------


def _slow_server(service_s: float) -> Target:
    """One request at a time, ``service_s`` each: a server that queues."""
    lock = asyncio.Lock()

    async def send(i: int) -> Reply:
        async with lock:
            await asyncio.sleep(service_s)
        return Reply("ok", action=0)

    return Target("slow", "inprocess", send)


def test_open_loop_keeps_its_schedule_and_counts_the_queue_from_the_scheduled_time() -> None:
    """Offered 100 req/s to a server that does 50: a closed loop would wait (and report ~20
    ms); the open loop sends on time and the latency grows with the queue."""
    schedule = np.arange(40) * 0.01
    sent = asyncio.run(open_loop(_slow_server(0.02), schedule, 1))
    lags = np.array([s.send_lag_ms for s in sent])
    latency = np.array([s.latency_ms for s in sent])
    assert np.percentile(lags, 90) < 5.0  # sent on schedule although answers lag behind
    assert latency[-1] > 300  # ~40 x 20 ms of service - 40 x 10 ms of arrivals, and more
    assert np.all(np.diff(latency[5:]) > 0)  # every later request waited longer
    closed = asyncio.run(closed_loop(_slow_server(0.02), 1, 10, 1))
    assert max(s.latency_ms for s in closed) < 100  # a closed loop never sees that queue


def test_poisson_schedule_has_the_offered_rate() -> None:
    times = poisson_schedule(200.0, 4000, np.random.default_rng(1))
    assert np.all(np.diff(times) > 0)
    assert abs(len(times) / times[-1] - 200.0) < 10.0


# --------------------------------------------------------------------------
# Config and feasibility
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("serve.max_batch_size=16", "raise serve.max_ongoing_requests to at least 16"),
        ("serve.max_queued_requests=-2", "serve.max_queued_requests=-2 must be -1"),
        ("serve.rates=[10,-1]", "serve.rates=[10.0, -1.0] must be request rates > 0"),
        ("serve.kill_replica_level=5", "serve.kill_replica_level=5 must index serve.rates"),
        ("backend=edgetpu", "the serve stage runs CPU backends"),
        ("serve.replicas=0", "serve.replicas=0 must be an integer >= 1"),
    ],
)
def test_serve_config_errors_name_the_key(compose_cfg, override: str, message: str) -> None:
    cfg = compose_cfg("stage=serve", "run=/some/run", override)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        validate_config(cfg)


@pytest.mark.parametrize("preset", [None, "serve_load", "serve_load_small"])
def test_default_and_presets_measure_enough_requests_to_bound_a_p99(compose_cfg, preset) -> None:
    """A level of fewer than 368 requests has an infinite p99 upper bound at 95 %: no rate
    could ever meet serve.slo_ms. The default and both presets measure enough."""
    overrides = ["stage=serve"] + ([f"experiment={preset}"] if preset else [])
    s = compose_cfg(*overrides).serve
    n = int(s.requests_per_level)
    _, _, upper = quantile_ci(np.arange(n, dtype=float), 0.99, float(s.confidence))
    assert np.isfinite(upper), f"{preset}: serve.requests_per_level={n} cannot bound a p99"
    assert not np.isfinite(quantile_ci(np.arange(367.0), 0.99, 0.95)[2])


def test_bad_transport_is_rejected_at_composition(compose_cfg) -> None:
    with pytest.raises(Exception, match="serve.transport"):
        compose_cfg("stage=serve", "serve.transport=grpc")


def test_serve_needs_a_policy(compose_cfg) -> None:
    with pytest.raises(ConfigError, match="stage=serve needs run="):
        validate_config(compose_cfg("stage=serve"))


def test_too_many_replica_cpus_are_refused_before_ray_starts(compose_cfg, tmp_path: Path) -> None:
    import os

    from rlperf.errors import InfeasibleError
    from rlperf.job_wrapper import execute_stage

    cpus = len(os.sched_getaffinity(0))
    cfg = compose_cfg("stage=serve", "run=/some/run", f"serve.replicas={cpus + 1}")

    def never(*args: Any) -> dict[str, Any]:
        raise AssertionError("the stage must not start")

    with pytest.raises(InfeasibleError, match="serve.replicas=.* asks Ray for"):
        execute_stage(cfg, tmp_path, never, in_trial=False)
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["status"] == "skipped" and summary["preflight"] is True


def test_report_figure_marks_uncounted_levels_and_draws_infinite_latency_as_gaps(
    tmp_path: Path,
) -> None:
    """The latency-vs-load figure from a levels table: a fault level and an off-schedule level
    are not counted; an infinite p99 (failed requests) or upper bound does not break it."""
    import pandas as pd

    from rlperf.report.figures.serve import FIGURE, _counted, draw_serve_figures
    from rlperf.report.tables.serve import ServeTables

    inf = np.inf
    levels = pd.DataFrame({
        "loop": "open", "phase": "load", "config": "rllib", "offered_rps": [10.0, 20.0, 40.0],
        "on_schedule": [True, True, False], "excluded": [np.nan, "fault", np.nan],
        "p50_ms": [2.0, 3.0, 4.0], "p50_lo_ms": [1.5, 2.5, 3.0], "p50_hi_ms": [2.5, 3.5, 5.0],
        "p99_ms": [5.0, 6.0, inf], "p99_lo_ms": [4.0, 5.0, 6.0], "p99_hi_ms": [inf, 7.0, inf],
        "slo_ms": 20.0,
    })  # fmt: skip
    assert _counted(levels).tolist() == [True, False, False]
    drawn, failed = draw_serve_figures(ServeTables(levels, pd.DataFrame()), tmp_path)
    assert failed == {} and drawn[FIGURE].stat().st_size > NOT_BLANK_PNG_BYTES


# --------------------------------------------------------------------------
# A real deployment of a trained policy (slow)
# --------------------------------------------------------------------------


def serve_stage(compose_cfg: Any, out: Path, *overrides: str) -> dict[str, Any]:
    """The serve stage through the job wrapper, in this process; ``in_trial``: the module's
    Ray (and its Serve) is running, as the launcher's is in a sweep trial."""
    from omegaconf import OmegaConf

    from rlperf.job_wrapper import execute_stage
    from rlperf.serve.serve_job import run_serve

    cfg = compose_cfg(*overrides)
    (out / ".hydra").mkdir()
    OmegaConf.save(cfg, out / ".hydra" / "config.yaml")
    return execute_stage(cfg, out, run_serve, in_trial=True).data


@pytest.fixture(scope="module")
def served(small_policy_run: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Ray (rlperf's builder) and Serve on 127.0.0.1 with the trained policy deployed:
    two requests at a time, two more queued, the rest rejected."""
    from omegaconf import OmegaConf

    from rlperf.config.schema import RayConfig
    from rlperf.models.policy_file import load_policy
    from rlperf.serve.deployment import policy_app
    from rlperf.serve.model import ModelSpec
    from rlperf.serve.session import deploy, serve_session
    from rlperf.tflite.calibration import collect_observations

    net = load_policy(small_policy_run["policy"])
    obs, _ = collect_observations({"dim": 42, "max_episode_steps": 60}, 48, seed=3)
    spec = ModelSpec("torch", str(small_policy_run["policy"]), (42, 42, 4), "uint8", 6)
    app = policy_app(spec, replicas=1, cpus_per_replica=0.5, max_ongoing_requests=2,
                     max_queued_requests=2)  # fmt: skip
    with serve_session(OmegaConf.structured(RayConfig), 2, 0) as session:
        handle = deploy(session, "policy", app)
        yield {"session": session, "handle": handle, "net": net, "obs": obs,
               "url": session.url("policy"), "run": small_policy_run}  # fmt: skip


def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers={"content-type": "application/x-npy"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.slow
def test_http_serves_the_same_greedy_actions_as_the_policy_in_process(served) -> None:
    obs, net = served["obs"], served["net"]
    answers = [_post(served["url"], encode_observation(o)) for o in obs]
    assert all(status == 200 for status, _ in answers)
    served_actions = [a["action"] for _, a in answers]
    assert served_actions == [net.greedy_action(o) for o in obs]  # every request
    assert len(set(served_actions)) >= 3  # a policy that decides, not a constant one
    assert all(a["model_ms"] > 0 and a["batch"] == 1 for _, a in answers)


@pytest.mark.slow
def test_malformed_request_gets_400_naming_shape_and_dtype_and_the_replica_serves_on(
    served,
) -> None:
    obs = served["obs"][0]
    for body in (encode_observation(obs.astype(np.float32)), encode_observation(obs[:, :7]),
                 b"not an array"):  # fmt: skip
        status, answer = _post(served["url"], body)
        assert status == 400
        assert "shape (42, 42, 4) and dtype uint8" in answer["error"]
    status, good = _post(served["url"], encode_observation(obs))
    assert status == 200 and good["action"] == served["net"].greedy_action(obs)
    assert good["replica"] == answer["replica"]  # the same replica, still serving


@pytest.mark.slow
@pytest.mark.timing
def test_overload_on_a_bounded_queue_is_counted_as_rejections(served) -> None:
    from rlperf.serve.loadgen import http_target

    bodies = [encode_observation(o) for o in served["obs"]]

    async def burst() -> list[Any]:
        target = http_target("policy", served["url"], bodies, 30.0)
        try:
            return await open_loop(target, np.zeros(40), len(bodies))  # 40 at once
        finally:
            await target.close()

    sent = asyncio.run(burst())
    statuses = [s.reply.status for s in sent]
    assert len(sent) == 40 and set(statuses) <= {"ok", "rejected"}
    assert statuses.count("rejected") >= 20  # 2 running + 2 queued; the rest is refused
    assert {s.reply.http_status for s in sent if s.reply.status == "rejected"} == {503}
    # 2 running + 2 queued would answer 4; Serve's router decides on its own view of the
    # replica's load, and under a burst of 40 one of those places was refused once (3 ok in
    # a clean .ci/run). What this test holds is that some are served and the rest refused.
    assert statuses.count("ok") >= 2
    status, _ = _post(served["url"], bodies[0])  # and it answers afterwards
    assert status == 200


def _ray_node_listeners() -> list[dict[str, Any]]:
    """Listening sockets of this Ray node's GCS and raylet (Ray's own servers)."""
    import ray

    from rlperf.serve.session import listening_sockets

    node = ray._private.worker._global_node
    pids = {
        info.process.pid: name
        for name in ("gcs_server", "raylet")
        for info in node.all_processes.get(name, [])
        if info.process is not None
    }
    return listening_sockets(pids)


@pytest.mark.slow
def test_serve_proxy_and_replicas_listen_on_loopback_only(served) -> None:
    """From the machine's socket table: Serve's own servers are on 127.0.0.1 (the proxy's HTTP
    port, each replica's inter-deployment gRPC server, rebound by rlperf); with Ray itself on
    loopback, every listening socket of the proxy, controller and replicas is."""
    from rlperf.serve.session import listening_sockets, serve_process_ids

    pids = serve_process_ids()
    titles = set(pids.values())
    assert "ray::ProxyActor" in titles and "ray::ServeController" in titles
    replicas = {pid for pid, t in pids.items() if t.startswith("ray::ServeReplica")}
    assert replicas
    sockets = listening_sockets(pids)
    port = served["session"].http_port
    http = [s for s in sockets if s["process"] == "ray::ProxyActor" and s["port"] == port]
    assert [s["ip"] for s in http] == ["127.0.0.1"]
    for pid in replicas:  # Serve 2.60 binds this one to [::] unless rlperf rebinds it
        assert any(s["loopback"] for s in sockets if s["pid"] == pid)
    ray_exposed = [s for s in _ray_node_listeners() if not s["loopback"]]
    if ray_exposed:
        pytest.xfail(
            "Ray itself listens beyond 127.0.0.1 (its worker ports follow; issue 13 starts Ray "
            f"on loopback): {ray_exposed[:3]}"
        )
    exposed = [s for s in sockets if not s["loopback"]]
    assert exposed == [], f"Serve listens beyond 127.0.0.1: {exposed}"


@pytest.mark.slow
def test_stage_measures_levels_and_survives_a_killed_replica(
    served, compose_cfg, tmp_path: Path
) -> None:
    """The stage's steps in the module's Ray (as in a sweep trial): every level is written,
    the served actions match, and a replica killed mid-level is counted, not fatal."""

    from rlperf.report.build import build_report

    # in_trial: the module's Ray is running, as the launcher's is in a sweep trial.
    summary = serve_stage(
        compose_cfg, tmp_path,
        "stage=serve", f"run={served['run']['path']}", "serve.replicas=2",
        "serve.cpus_per_replica=0.25", "serve.clients=[2]", "serve.rates=[20,60]",
        "serve.requests_per_level=40", "serve.warmup_requests=5", "serve.baseline_requests=20",
        "serve.observations=12", "serve.kill_replica_level=0", "serve.slo_ms=1000",
    )  # fmt: skip
    assert summary["status"] == "completed"
    with (tmp_path / LEVELS_FILE).open() as f:
        levels = list(csv.DictReader(f))
    with (tmp_path / REQUESTS_FILE).open() as f:
        requests = list(csv.DictReader(f))
    phases = [(r["phase"], r["transport"], r["target"]) for r in levels]
    assert phases[:5] == [("baseline", "inprocess", "policy"), ("baseline", "handle", "policy"),
                          ("baseline", "http", "policy"), ("baseline", "http", "echo"),
                          ("baseline", "handle", "echo")]  # fmt: skip
    assert len(levels) == 9 and len(requests) == summary["requests"]
    # Energy per 1 000 answered requests: empty here (no readable RAPL counter, no GPU).
    assert all(r["cpu_energy_per_1k_requests_j"] in ("", "nan") for r in levels)
    assert summary["excluded"]["warmup"] == 5 * 9
    assert summary["actions"]["mismatches"] == 0 and summary["actions"]["checked"] > 100
    assert len(summary["actions"]["distinct_actions"]) >= 2
    base = summary["baseline"]
    assert 0 < base["inprocess_p50_ms"] < base["http_p50_ms"]
    assert base["serve_added_http_ms"] == pytest.approx(
        base["http_p50_ms"] - base["inprocess_p50_ms"]
    )
    killed = summary["faults"]["levels"]
    assert len(summary["faults"]["replicas_killed"]) == 1 and killed[0]["offered_rps"] == 20
    fault_level = next(r for r in levels if r["replica_killed"])
    assert fault_level["excluded"] == "fault"
    total = sum(int(fault_level[k]) for k in ("ok", "errors", "timeouts", "rejections"))
    assert total == int(fault_level["requests"]) == 40  # every request counted
    slo = summary["max_rate_under_slo"]
    assert 20.0 not in slo["levels_searched"]  # the fault level does not decide the rate
    assert summary["generator"]["dispatch_capacity_rps"] > 1000
    assert summary["generator"]["echo_http_capacity_rps"] > 0
    assert summary["network"]["processes"]
    # rlperf-report reads the folder: the max-rate table and the latency-vs-load figure.
    report = build_report([tmp_path], tmp_path / "report")
    assert report.serve is not None and len(report.serve.max_rate) == 1
    row = report.serve.max_rate.iloc[0]
    assert row["slo_ms"] == 1000 and row["replicas"] == 2
    assert row["max_rate_rps"] == summary["max_rate_under_slo"]["max_rate_rps"]
    assert len(report.serve.levels) == 9
    assert "serve_latency_vs_load" in report.figures
    text = (tmp_path / "report" / "report.md").read_text()
    findings = text.split("## Findings")[1].split("## Methods")[0]
    assert "## Serving" in text and "Serve over HTTP adds" in findings
    assert "on serve:" not in text  # not ranked by a mean time like the other families


@pytest.mark.slow
def test_stage_serves_the_cartpole_mlp_policy_with_float_observations(
    served, cartpole_policy_run, compose_cfg, tmp_path: Path
) -> None:
    """A gymnasium env and an MLP policy: float32 observations of shape (4,) from CartPole
    itself, the same greedy actions over HTTP as in-process, both actions used."""

    summary = serve_stage(
        compose_cfg, tmp_path,
        "stage=serve", f"run={cartpole_policy_run['path']}", "serve.cpus_per_replica=0.25",
        "serve.clients=[1]", "serve.rates=[30]", "serve.requests_per_level=40",
        "serve.warmup_requests=5", "serve.baseline_requests=20", "serve.observations=24",
        "serve.slo_ms=1000",
    )  # fmt: skip
    assert summary["status"] == "completed", summary.get("error")
    assert summary["env"]["id"] == "CartPole-v1"
    spec = summary["model_spec"]
    assert (spec["obs_shape"], spec["obs_dtype"], spec["num_actions"]) == ([4], "float32", 2)
    assert summary["actions"]["mismatches"] == 0 and summary["actions"]["checked"] > 50
    assert sorted(summary["actions"]["distinct_actions"]) == [0, 1]
    assert summary["baseline"]["http_p50_ms"] > summary["baseline"]["inprocess_p50_ms"] > 0


@pytest.mark.slow
@pytest.mark.timing
def test_sigterm_mid_level_keeps_the_finished_levels_and_leaves_no_ray(
    small_policy_run, tmp_path: Path, ray_tmp: str
) -> None:
    """SIGTERM to a serve run's process group while a long open-loop level runs: exit 143,
    one line, the summary ``interrupted``, the finished levels' rows kept whole, and Ray
    (Serve's controller, proxy and replicas with it) gone (docs/exit-codes.md)."""
    import signal

    from support.live_run import LiveRun, csv_rows
    from support.private_ray import processes_with

    out = tmp_path / "serve"
    args = [
        "stage=serve", f"run={small_policy_run['path']}", "serve.replicas=1",
        "serve.cpus_per_replica=0.5", "serve.clients=[1]", "serve.rates=[5]",
        "serve.requests_per_level=600", "serve.warmup_requests=2",
        "serve.baseline_requests=10", "serve.observations=8", f"hydra.run.dir={out}",
    ]  # fmt: skip
    env = dict(os.environ, RAY_TMPDIR=ray_tmp)
    with LiveRun(args, tmp_path, env, new_session=True) as run:
        # Level 7 is the open loop at 5 requests/s: 120 s unless stopped.
        assert run.wait_line(r"serve: level 7 ", 300), run.output[-3000:]
        finished = csv_rows(out / LEVELS_FILE)
        run.send(signal.SIGTERM, to="group")
        rc = run.finish(timeout=90)
    assert rc == 143, run.output[-3000:]
    lines = run.output.strip().splitlines()
    assert lines[-1] == "rlperf: interrupted (SIGTERM); completed rows and cells are kept"
    assert "Traceback" not in run.output, run.output[-3000:]
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert (s["status"], s["error"]) == ("interrupted", "interrupted (SIGTERM)")
    with (out / LEVELS_FILE).open() as f:
        levels = list(csv.DictReader(f))
    assert len(levels) == finished == 7 and [int(r["level"]) for r in levels] == list(range(7))
    assert not processes_with(ray_tmp)  # the run's private Ray folder names its processes


@pytest.mark.slow
def test_stage_serves_a_box_policy_and_checks_actions_against_the_range(
    served, point_mass_run, compose_cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2-D continuous actor (SAC's tanh head) behind Serve, int8: the action vector in
    every response, checked against the same model in-process relative to each
    dimension's range (not for equality), in requests.csv and the summary."""
    import pandas as pd

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))  # the env's module
    summary = serve_stage(
        compose_cfg, tmp_path,
        "stage=serve", f"run={point_mass_run['path']}", "backend=tflite_int8",
        f"edge.cache_dir={tmp_path / 'cache'}", "edge.calibration_size=100",
        "edge.fidelity_observations=100", "serve.cpus_per_replica=0.25", "serve.clients=[1]",
        "serve.rates=[30]", "serve.requests_per_level=40", "serve.warmup_requests=5",
        "serve.baseline_requests=20", "serve.observations=24", "serve.slo_ms=1000",
    )  # fmt: skip
    assert summary["status"] == "completed", summary.get("error")
    spec = summary["model_spec"]
    assert (spec["num_actions"], spec["continuous"]) == (2, True)
    checked = summary["actions"]
    assert checked["checked"] > 50 and checked["mismatches"] == 0
    assert checked["max_err_of_range"] <= checked["tolerance"] == 1e-4
    assert checked["distinct_actions"] > 10  # an actor whose action follows the state
    rows = pd.read_csv(tmp_path / REQUESTS_FILE)
    policy = rows[(rows["target"] == "policy") & (rows["status"] == "ok")]
    vectors = policy["action"].astype(str).str.split()
    assert (vectors.str.len() == 2).all() and policy["action_err"].notna().all()
    # The echo answers zeros and is not checked.
    assert rows[rows["target"] == "echo"]["action_err"].isna().all()

    # Shape (1,) in the same Serve session: the committed Pendulum actor, in torch.
    pendulum = tmp_path / "pendulum"
    pendulum.mkdir()
    summary = serve_stage(
        compose_cfg, pendulum,
        "stage=serve", f"run={REPO / 'benchmarks' / 'policies' / 'pendulum_sac'}",
        "serve.cpus_per_replica=0.25", "serve.clients=[1]", "serve.rates=[30]",
        "serve.requests_per_level=40", "serve.warmup_requests=5", "serve.baseline_requests=20",
        "serve.observations=24", "serve.slo_ms=1000",
    )  # fmt: skip
    assert summary["status"] == "completed", summary.get("error")
    assert (summary["model_spec"]["num_actions"], summary["backend"]) == (1, "rllib")
    assert summary["actions"]["mismatches"] == 0 and summary["actions"]["checked"] > 50
