"""The serve stage as a Hydra job: ``rlperf stage=serve run=<training run> backend=<backend>``.

Steps (:func:`run_serve`): resolve the policy (upstream run, effective config,
env) → prepare the backend's model file (a TFLite variant from the shared
artifact cache where needed) → real observations and the policy's in-process
actions on them → Ray and Serve up on 127.0.0.1, the policy and echo
deployed, the socket table read → the load levels → everything shut down →
job's record (the job wrapper writes ``summary.json``). Config keys: those of
:mod:`rlperf.serve.policy` and ``serve.*`` (docs/serve.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig

from rlperf.job_wrapper import JobContext
from rlperf.layout import EXCLUDED_COLUMN, LEVELS_FILE, REQUESTS_FILE
from rlperf.resources.plan import ray_cpu_count
from rlperf.results.columns import WALL_S
from rlperf.results.csvlog import CsvLog
from rlperf.results.record import ServeRecord, as_record
from rlperf.results.summary import excluded_counts
from rlperf.serve.levels import level_row, max_rate_under_slo
from rlperf.serve.loadgen import handle_target, http_target, inprocess_target, noop_dispatch_rate
from rlperf.serve.measure import (
    BOX_ACTION_TOLERANCE,
    REQUEST_COLUMNS,
    ExpectedActions,
    LevelPlan,
    LevelResult,
    measured,
    plan_levels,
    run_level,
)
from rlperf.serve.model import load_model
from rlperf.serve.payload import action_json, decode_observation
from rlperf.serve.policy import ServedPolicy, load_observations, prepare_model, resolve_policy
from rlperf.serve.session import (
    ServeSession,
    deploy,
    kill_replica,
    listening_sockets,
    serve_process_ids,
    serve_session,
)
from rlperf.telemetry.sampler import action_energy
from rlperf.vocabulary import Exclusion

log = logging.getLogger("rlperf.serve")


def run_serve(cfg: DictConfig, out_dir: Path, ctx: JobContext) -> ServeRecord:
    """Deploy the policy with Ray Serve, drive it with the load generator, summarise.

    Writes ``requests.csv`` and ``levels.csv`` into ``out_dir``; returns the job's
    record, filled (docs/serve.md#results). ``ctx``: :class:`rlperf.job_wrapper.JobContext`.
    """

    out_dir.mkdir(parents=True, exist_ok=True)
    policy = resolve_policy(cfg, out_dir)
    prepare_model(cfg, policy)
    load_observations(cfg, policy)
    ctx.progress(f"serve: {policy.backend} ({policy.spec.kind if policy.spec else '?'}) ready")
    with serve_session(cfg.ray, ray_cpus(cfg, ctx), int(cfg.serve.http_port)) as session:
        handles = deploy_apps(cfg, policy, session)
        network = read_listeners()
        results = asyncio.run(run_levels(cfg, policy, session, handles, out_dir, ctx))
        timings = dict(session.start_s)
    return summarise(cfg, policy, results, network, timings, as_record(ctx.record, ServeRecord))


def ray_cpus(cfg: DictConfig, ctx: JobContext) -> int:
    """CPUs of a Ray started for the job: the machine's, or what the replicas need when
    ``ray.overcommit_cpus`` (feasibility was checked before the stage started)."""

    need = serve_cpus(cfg)
    return max(
        ray_cpu_count(ctx.plan, ctx.machine, bool(cfg.ray.overcommit_cpus)), int(-(-need // 1))
    )


def serve_cpus(cfg: DictConfig) -> float:
    """Ray CPUs the policy replicas ask for (the echo replica asks for none)."""
    return int(cfg.serve.replicas) * float(cfg.serve.cpus_per_replica)


def deploy_apps(cfg: DictConfig, policy: ServedPolicy, session: ServeSession) -> dict[str, Any]:
    """The policy and the echo applications, ready; their handles by target."""
    from dataclasses import replace

    # rlperf.serve.deployment imports Ray Serve (and pandas): deferred, the policy and its
    # model file are resolved and checked before Ray loads.
    from rlperf.serve.deployment import policy_app

    s = cfg.serve
    assert policy.spec is not None
    policy_options: dict[str, Any] = {
        "replicas": int(s.replicas),
        "cpus_per_replica": float(s.cpus_per_replica),
        "max_ongoing_requests": int(s.max_ongoing_requests),
        "max_queued_requests": int(s.max_queued_requests),
        "max_batch_size": int(s.max_batch_size),
        "batch_wait_timeout_s": float(s.batch_wait_timeout_s),
    }
    echo = replace(policy.spec, kind="echo", path=None)
    return {
        "policy": deploy(session, "policy", policy_app(policy.spec, **policy_options)),
        "echo": deploy(
            session,
            "echo",
            policy_app(
                echo,
                replicas=1,
                cpus_per_replica=0.0,
                max_ongoing_requests=max(int(s.max_ongoing_requests), 64),
                max_queued_requests=-1,
            ),
        ),  # fmt: skip
    }


def read_listeners() -> dict[str, Any]:
    """Serve's processes (proxy, controller, replicas) and their listening sockets."""

    pids = serve_process_ids()
    sockets = listening_sockets(pids)
    exposed = [s for s in sockets if not s["loopback"]]
    if exposed:
        log.warning("Serve listens beyond 127.0.0.1: %s", exposed)
    processes = sorted({title for title in pids.values()})
    return {"processes": processes, "listeners": sockets, "loopback_only": not exposed}


async def run_levels(
    cfg: DictConfig,
    policy: ServedPolicy,
    session: ServeSession,
    handles: dict[str, Any],
    out_dir: Path,
    ctx: JobContext,
) -> dict[str, Any]:
    """Every planned level; ``requests.csv`` and ``levels.csv`` written level by level."""

    assert policy.expected_actions is not None
    plans = plan_levels(cfg)
    targets = make_targets(cfg, policy, session, handles)
    results: list[LevelResult] = []
    levels: list[dict[str, Any]] = []
    dispatch_rps = await noop_dispatch_rate()
    with CsvLog(out_dir / REQUESTS_FILE, REQUEST_COLUMNS) as req_log:
        level_log: Any = None
        try:
            for plan in plans:
                ctx.progress(f"serve: level {plan.level} {_describe(plan)}")
                kill = (lambda: _kill(session)) if plan.kill_replica else None
                offset = time.monotonic() - ctx.started
                seed = int(cfg.seed) * 1000 + plan.level
                target = targets[(plan.transport, plan.target)]
                t0 = ctx.telemetry_now()  # the energy counters, read at the level's edges
                result = await run_level(plan, target, policy.expected_actions, seed, kill, offset)
                window = ctx.telemetry_window(t0, ctx.telemetry_now())
                for row in result.rows:
                    req_log.write(row)
                results.append(result)
                row = level_summary(cfg, result)
                row.update(level_energy(window, sum(r["status"] == "ok" for r in result.rows)))
                if level_log is None:
                    level_log = CsvLog(out_dir / LEVELS_FILE, list(row))
                level_log.write(row)
                levels.append(row)
                ctx.track(row)
        finally:
            if level_log is not None:
                level_log.close()
            for target in targets.values():
                await target.close()
    return {"levels": levels, "results": results, "dispatch_capacity_rps": dispatch_rps}


#: ``levels.csv``'s energy columns: the CPU packages' (RAPL) and the GPUs' joules per 1 000
#: answered requests over the level (empty where not measured: summary.json's
#: ``cpu_energy`` says why).
LEVEL_ENERGY = ("cpu_energy_per_1k_requests_j", "gpu_energy_per_1k_requests_j")


def level_energy(window: dict[str, float], answered: int) -> dict[str, float]:
    """A level's :data:`LEVEL_ENERGY` from its telemetry window (every process of the
    machine draws from the same packages: the load generator's share is in it)."""
    energy = action_energy(window, answered)
    values = (energy.get(f"{part}_energy_per_1k_actions_j") for part in ("cpu", "gpu"))
    return {
        column: float("nan") if value is None else float(value)
        for column, value in zip(LEVEL_ENERGY, values, strict=True)
    }


def _kill(session: ServeSession) -> str | None:

    return kill_replica(session, "policy")


def _describe(plan: LevelPlan) -> str:
    load = f"{plan.clients} client(s)" if plan.loop == "closed" else f"{plan.offered_rps:g} req/s"
    return f"({plan.phase}, {plan.loop} loop, {plan.target} over {plan.transport}, {load})"


def make_targets(
    cfg: DictConfig, policy: ServedPolicy, session: ServeSession, handles: dict[str, Any]
) -> dict[tuple[str, str], Any]:
    """A :class:`~rlperf.serve.loadgen.Target` per (transport, target) the levels use."""

    assert policy.spec is not None
    spec, bodies, timeout = policy.spec, policy.bodies, float(cfg.serve.request_timeout_s)
    model = load_model(spec)

    def act(body: bytes) -> tuple[Any, float]:
        obs = decode_observation(body, spec.obs_shape, spec.obs_dtype)
        actions, model_ms = model.act(obs[None])
        return action_json(actions[0]), model_ms

    targets: dict[tuple[str, str], Any] = {
        ("inprocess", "policy"): inprocess_target("inprocess", act, bodies)
    }
    for target in ("policy", "echo"):
        targets[("http", target)] = http_target(target, session.url(target), bodies, timeout)
        targets[("handle", target)] = handle_target(target, handles[target], bodies, timeout)
    return targets


def level_summary(cfg: DictConfig, result: LevelResult) -> dict[str, Any]:
    """The ``levels.csv`` row of one level (statistics over its measured requests)."""

    plan = result.plan
    replicas = int(cfg.serve.replicas) if plan.target == "policy" else 1
    row = level_row(
        measured(result.rows),
        plan.key(),
        confidence=float(cfg.serve.confidence),
        max_send_lag_ms=float(cfg.serve.max_send_lag_ms),
        replicas=replicas if plan.transport != "inprocess" else 1,
    )
    policy_rows = [r for r in measured(result.rows) if r["expected_action"] is not None]
    row["action_mismatches"] = sum(
        1 for r in policy_rows if r["status"] == "ok" and ExpectedActions.mismatch(r)
    )
    row["replica_killed"] = result.killed or ""
    row[EXCLUDED_COLUMN] = Exclusion.fault if plan.kill_replica else ""
    row[WALL_S] = result.wall_s
    return row


def summarise(
    cfg: DictConfig,
    policy: ServedPolicy,
    results: dict[str, Any],
    network: dict[str, Any],
    timings: dict[str, float],
    record: ServeRecord,
) -> ServeRecord:
    """The serve job's ``summary.json`` entries, into ``record`` (docs/serve.md#results)."""
    from omegaconf import OmegaConf

    levels: list[dict[str, Any]] = results["levels"]
    rows = [r for res in results["results"] for r in res.rows]
    load = [r for r in levels if r["phase"] == "load"]
    deployment = OmegaConf.to_container(cfg.serve, resolve=True)
    record.source, record.model, record.backend = policy.source, policy.model, policy.backend
    record.model_spec = policy.spec.to_dict() if policy.spec else None
    record.env = policy.env
    record.serve = cast(dict[str, Any], deployment)
    record.baseline = baseline(levels)
    record.generator = generator_capacity(levels, results["dispatch_capacity_rps"])
    record.max_rate_under_slo = max_rate_under_slo(load, float(cfg.serve.slo_ms))
    record.actions = action_check(rows)
    record.faults = fault_summary(levels)
    record.excluded = excluded_counts(rows)
    record.requests = len(rows)
    record.levels = len(levels)
    record.network = network
    record.cache = policy.cache
    record.timings_s = timings
    return record


def _p50(levels: list[dict[str, Any]], phase: str, transport: str, target: str) -> float | None:
    for row in levels:
        if (row["phase"], row["transport"], row["target"]) == (phase, transport, target):
            return float(row["p50_ms"])
    return None


def baseline(levels: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 latency of one request at a time: in-process, handle, HTTP, echo; what Serve adds."""
    p = {
        "inprocess_p50_ms": _p50(levels, "baseline", "inprocess", "policy"),
        "handle_p50_ms": _p50(levels, "baseline", "handle", "policy"),
        "http_p50_ms": _p50(levels, "baseline", "http", "policy"),
        "echo_http_p50_ms": _p50(levels, "baseline", "http", "echo"),
        "echo_handle_p50_ms": _p50(levels, "baseline", "handle", "echo"),
    }
    inproc, http, echo = p["inprocess_p50_ms"], p["http_p50_ms"], p["echo_http_p50_ms"]
    handle = p["handle_p50_ms"]
    if inproc is not None and http is not None and echo is not None and handle is not None:
        # What Serve adds to a request over calling the same policy in this process.
        p["serve_added_http_ms"] = http - inproc
        p["serve_added_handle_ms"] = handle - inproc
        # HTTP p50 / (echo p50 + in-process p50): 1 when transport and model simply add up.
        p["http_over_echo_plus_inprocess"] = http / (echo + inproc) if echo + inproc > 0 else None
    return p


def generator_capacity(levels: list[dict[str, Any]], dispatch_rps: float) -> dict[str, Any]:
    """What the load generator itself can do here, and which levels it could not keep."""
    capacity = next((r for r in levels if r["phase"] == "capacity"), None)
    off = [r["offered_rps"] for r in levels if r["loop"] == "open" and not r["on_schedule"]]
    return {
        "dispatch_capacity_rps": dispatch_rps,
        "echo_http_capacity_rps": capacity["achieved_rps"] if capacity else None,
        "echo_http_capacity_clients": capacity["clients"] if capacity else None,
        "levels_off_schedule": off,
    }


def action_check(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Served greedy actions against the same model in-process, over every answered request:
    equal, or a Box policy's within :data:`~rlperf.serve.measure.BOX_ACTION_TOLERANCE` of
    each dimension's range (its largest error is reported)."""
    checked = [r for r in rows if r["expected_action"] is not None and r["status"] == "ok"]
    out: dict[str, Any] = {
        "checked": len(checked),
        "mismatches": sum(1 for r in checked if ExpectedActions.mismatch(r)),
    }
    errors = [float(r["action_err"]) for r in checked if r.get("action_err") is not None]
    if errors:
        out["max_err_of_range"] = max(errors)
        out["tolerance"] = BOX_ACTION_TOLERANCE
        out["distinct_actions"] = len({str(r["action"]) for r in checked})
    else:
        out["distinct_actions"] = sorted({int(r["action"]) for r in checked})
    return out


def fault_summary(levels: list[dict[str, Any]]) -> dict[str, Any]:
    """The replicas killed, and how the requests of their levels ended."""
    hit = [r for r in levels if r["replica_killed"]]
    return {
        "replicas_killed": [r["replica_killed"] for r in hit],
        "levels": [
            {
                "level": r["level"],
                "offered_rps": r["offered_rps"],
                "ok": r["ok"],
                "errors": r["errors"],
                "timeouts": r["timeouts"],
                "rejections": r["rejections"],
            }
            for r in hit
        ],  # fmt: skip
    }
