"""The load levels of a serve job, run one after another in one asyncio loop.

Plan (:func:`plan_levels`): ``baseline`` levels (one client, closed loop):
the policy in-process, over Serve's handle and over HTTP, and the echo
deployment over HTTP and the handle; a ``capacity`` level (the echo over HTTP
with many clients: what generator, proxy and an empty replica manage
together); then the ``load`` levels over ``serve.transport``: closed loop for
each of ``serve.clients``, open loop (Poisson) for each of ``serve.rates``.
Each level sends ``serve.warmup_requests`` first (rows kept, ``excluded`` =
``warmup``) and then its measured requests; a level during which a replica is
killed is ``excluded`` = ``fault`` as a whole.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import DictConfig

from rlperf.layout import EXCLUDED_COLUMN
from rlperf.results.latency import action_value
from rlperf.serve.loadgen import Sent, Target, closed_loop, open_loop, poisson_schedule
from rlperf.vocabulary import Exclusion

#: requests.csv columns, in file order.
REQUEST_COLUMNS = (
    "level", "seq", EXCLUDED_COLUMN, "phase", "loop", "transport", "target",
    "scheduled_s", "sent_s", "done_s", "latency_ms", "send_lag_ms", "status", "http_status",
    "replica", "model_ms", "batch", "action", "expected_action", "action_err", "detail",
)  # fmt: skip

#: A served Box action must be the in-process one within this share of each dimension's
#: range (the same model file on both sides: only batching and float order can differ).
BOX_ACTION_TOLERANCE = 1e-4


@dataclass
class ExpectedActions:
    """The greedy actions of the served model in this process, one per observation
    (``(N,)`` int64, or a Box policy's ``(N, d)`` float32 with its ranges ``span``), and
    how a served action is judged against them: equal, or for a Box within
    :data:`BOX_ACTION_TOLERANCE` of each dimension's range (``action_err``)."""

    actions: np.ndarray
    span: np.ndarray | None = None

    def cells(self, index: int, action: Any) -> dict[str, Any]:
        """``action``, ``expected_action`` and ``action_err`` of one served answer."""
        expected = self.actions[index]
        if self.span is None:
            return {"action": action, "expected_action": int(expected), "action_err": None}
        err = None
        if action is not None:
            diff = np.abs(np.asarray(action, np.float64) - np.asarray(expected, np.float64))
            err = float((diff / self.span).max())
        return {"action": action_value(action) if action is not None else None,
                "expected_action": action_value(expected), "action_err": err}  # fmt: skip

    @staticmethod
    def mismatch(row: dict[str, Any]) -> bool:
        """An answered request whose action is not the in-process one."""
        if row.get("action_err") is not None:
            return bool(row["action_err"] > BOX_ACTION_TOLERANCE)
        return bool(row["action"] != row["expected_action"])


#: Level keys known before it runs (the first columns of levels.csv).
LEVEL_KEYS = ("level", "phase", "loop", "transport", "target", "clients", "offered_rps")


@dataclass
class LevelPlan:
    """One level to run."""

    level: int
    phase: str  # baseline | capacity | load
    loop: str  # closed | open
    transport: str  # inprocess | handle | http
    target: str  # policy | echo
    requests: int
    warmup: int
    clients: int | None = None
    offered_rps: float | None = None
    kill_replica: bool = False

    def key(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in LEVEL_KEYS}


def plan_levels(cfg: DictConfig) -> list[LevelPlan]:
    """Every level of the job, in the order they run."""
    s = cfg.serve
    base, warm, n = int(s.baseline_requests), int(s.warmup_requests), int(s.requests_per_level)
    plans: list[LevelPlan] = []

    def add(phase: str, loop: str, transport: str, target: str, count: int, **kw: Any) -> None:
        plans.append(LevelPlan(len(plans), phase, loop, transport, target, count, warm, **kw))

    for transport, target in (("inprocess", "policy"), ("handle", "policy"), ("http", "policy"),
                              ("http", "echo"), ("handle", "echo")):  # fmt: skip
        add("baseline", "closed", transport, target, base, clients=1)
    add("capacity", "closed", "http", "echo", n, clients=max(4, 2 * max(s.clients, default=1)))
    for clients in s.clients:
        add("load", "closed", str(s.transport), "policy", n, clients=int(clients))
    for i, rate in enumerate(s.rates):
        count = max(n, int(float(rate) * 2))  # at least ~2 s of arrivals
        add("load", "open", str(s.transport), "policy", count, offered_rps=float(rate),
            kill_replica=s.kill_replica_level == i)  # fmt: skip
    return plans


@dataclass
class LevelResult:
    """A level's request rows (warm-up included) and what happened to the deployment."""

    plan: LevelPlan
    rows: list[dict[str, Any]]
    killed: str | None = None
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


async def run_level(
    plan: LevelPlan,
    target: Target,
    expected: ExpectedActions,
    seed: int,
    kill: Callable[[], str | None] | None = None,
    clock_offset_s: float = 0.0,
) -> LevelResult:
    """Run one level (warm-up first); ``kill`` is called halfway through an open level."""
    total = plan.requests + plan.warmup
    n_obs = len(expected.actions)
    t0 = time.perf_counter()
    killed: list[str | None] = []
    if plan.loop == "closed":
        sent = await closed_loop(target, int(plan.clients or 1), total, n_obs)
    else:
        assert plan.offered_rps is not None
        schedule = poisson_schedule(plan.offered_rps, total, np.random.default_rng(seed))
        killer = None
        if kill is not None and plan.kill_replica:
            killer = asyncio.ensure_future(_kill_at(float(schedule[-1]) / 2, kill, killed))
        sent = await open_loop(target, schedule, n_obs)
        if killer is not None:
            await killer
    rows = [_row(plan, s, expected, clock_offset_s) for s in sent]
    killed_name = killed[0] if killed else None
    if plan.kill_replica:
        for row in rows:
            row[EXCLUDED_COLUMN] = row[EXCLUDED_COLUMN] or Exclusion.fault
    return LevelResult(plan, rows, killed_name, time.perf_counter() - t0)


async def _kill_at(at_s: float, kill: Callable[[], str | None], out: list[str | None]) -> None:
    await asyncio.sleep(at_s)
    out.append(await asyncio.get_running_loop().run_in_executor(None, kill))


def _row(plan: LevelPlan, s: Sent, expected: ExpectedActions, offset_s: float) -> dict[str, Any]:
    r = s.reply
    if plan.target == "policy":
        actions = expected.cells(s.obs_index, r.action)
    else:  # the echo answers action 0 (or zeros): nothing to check
        actions = {"action": action_value(r.action) if r.action is not None else None,
                   "expected_action": None, "action_err": None}  # fmt: skip
    return {
        "level": plan.level,
        "seq": s.seq,
        EXCLUDED_COLUMN: Exclusion.warmup if s.seq < plan.warmup else "",
        "phase": plan.phase,
        "loop": plan.loop,
        "transport": plan.transport,
        "target": plan.target,
        "scheduled_s": offset_s + s.scheduled_s,
        "sent_s": offset_s + s.sent_s,
        "done_s": offset_s + s.done_s,
        "latency_ms": s.latency_ms,
        "send_lag_ms": s.send_lag_ms,
        "status": r.status,
        "http_status": r.http_status,
        "replica": r.replica,
        "model_ms": r.model_ms,
        "batch": r.batch,
        **actions,
        "detail": r.detail,
    }


def measured(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a level's statistics use: not warm-up (a fault level's rows all count)."""
    return [r for r in rows if r[EXCLUDED_COLUMN] != Exclusion.warmup]
