"""rlperf's load generator: closed loop (N clients) and open loop (Poisson arrivals on a
schedule), one asyncio loop in the driver process.

Every request has a *scheduled* send time. Open loop: arrival times are drawn
before the level starts (exponential gaps at the offered rate) and each request
is sent at its time whether or not earlier ones have answered; its latency is
``done - scheduled``, so when the generator (or the machine it shares with
the server) falls behind, the delay counts against the server's latency and is
never hidden (coordinated omission). ``send_lag_ms = sent - scheduled`` is
recorded for every request: a level whose lag exceeds ``serve.max_send_lag_ms``
at p99 is marked invalid (:mod:`rlperf.serve.levels`). Closed loop: each client
sends its next request when the previous one answered (scheduled = sent).

Targets (:class:`Target`): HTTP (aiohttp, keep-alive connections, the
``.npy`` body), a Serve handle (the same bytes), or an in-process callable.
Each answer is classified: ``ok``, ``rejected`` (HTTP 503 / Serve's
``BackPressureError``: a bounded queue was full), ``bad_request`` (400),
``timeout`` (no answer within ``serve.request_timeout_s``) or ``error``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlperf.serve.payload import action_from_json

#: ``status`` of a request.
STATUSES = ("ok", "rejected", "bad_request", "timeout", "error")


@dataclass
class Reply:
    """What came back for one request."""

    status: str
    http_status: int | None = None
    action: int | list[float] | None = None  # a Box policy's: its vector
    replica: str | None = None
    model_ms: float | None = None
    batch: int | None = None
    detail: str = ""


@dataclass
class Sent:
    """One request as the generator saw it (seconds on the level's clock)."""

    seq: int
    obs_index: int
    scheduled_s: float
    sent_s: float
    done_s: float
    reply: Reply

    @property
    def latency_ms(self) -> float:
        return (self.done_s - self.scheduled_s) * 1e3

    @property
    def send_lag_ms(self) -> float:
        return (self.sent_s - self.scheduled_s) * 1e3


Send = Callable[[int], Awaitable[Reply]]


@dataclass
class Target:
    """Something to send requests to: ``send(obs_index) -> Reply`` and how to close it."""

    name: str
    transport: str  # http | handle | inprocess
    send: Send
    close: Callable[[], Awaitable[None]] = field(default=lambda: _noop())


async def _noop() -> None:
    return None


def http_target(name: str, url: str, bodies: Sequence[bytes], timeout_s: float) -> Target:
    """POST ``bodies[i]`` to ``url`` (keep-alive connections, no connection limit)."""
    import aiohttp

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        headers={"content-type": "application/x-npy"},
    )

    async def send(i: int) -> Reply:
        try:
            async with session.post(url, data=bodies[i]) as resp:
                payload = await resp.read()
                return _http_reply(resp.status, payload)
        except TimeoutError:
            return Reply("timeout", detail=f"no answer within {timeout_s} s")
        except aiohttp.ClientError as exc:
            return Reply("error", detail=f"{type(exc).__name__}: {exc}")

    return Target(name, "http", send, session.close)


def _http_reply(status: int, payload: bytes) -> Reply:
    import json

    try:
        body = json.loads(payload)
    except ValueError:
        body = {}
    if status == 200:
        return _ok(body, 200)
    kind = {503: "rejected", 400: "bad_request"}.get(status, "error")
    detail = body.get("error") if isinstance(body, dict) else None
    return Reply(kind, status, replica=body.get("replica"), detail=str(detail or payload[:200]))


def _ok(body: dict[str, Any], http_status: int | None) -> Reply:
    action = action_from_json(body["action"])
    return Reply("ok", http_status, action, body["replica"], body["model_ms"], body["batch"])


def handle_target(name: str, handle: Any, bodies: Sequence[bytes], timeout_s: float) -> Target:
    """Call ``handle.handle_request.remote(bodies[i])`` (Serve's Python handle)."""
    # Ray Serve: only for the handle target (the serve job imports this module before Ray).
    from ray.serve.exceptions import BackPressureError

    async def send(i: int) -> Reply:
        try:
            body = await asyncio.wait_for(handle.handle_request.remote(bodies[i]), timeout_s)
        except TimeoutError:
            return Reply("timeout", detail=f"no answer within {timeout_s} s")
        except BackPressureError as exc:
            return Reply("rejected", detail=str(exc)[:200])
        except Exception as exc:
            kind = "bad_request" if "PayloadError" in f"{type(exc).__name__}{exc}" else "error"
            return Reply(kind, detail=f"{type(exc).__name__}: {str(exc)[:200]}")
        return _ok(body, None)

    return Target(name, "handle", send)


def inprocess_target(
    name: str, act: Callable[[bytes], tuple[Any, float]], bodies: Sequence[bytes]
) -> Target:
    """Call ``act(bodies[i]) -> (action, model_ms)`` in this process (the in-process baseline)."""

    async def send(i: int) -> Reply:
        action, model_ms = act(bodies[i])
        return Reply("ok", None, action, "inprocess", model_ms, 1)

    return Target(name, "inprocess", send)


async def closed_loop(target: Target, clients: int, requests: int, n_obs: int) -> list[Sent]:
    """``clients`` clients, each sending its next request when the last one answered."""
    clock = time.perf_counter
    t0 = clock()
    counter = iter(range(requests))
    out: list[Sent] = []

    async def client() -> None:
        for seq in counter:
            start = clock() - t0
            reply = await target.send(seq % n_obs)
            out.append(Sent(seq, seq % n_obs, start, start, clock() - t0, reply))

    await asyncio.gather(*(client() for _ in range(clients)))
    return sorted(out, key=lambda s: s.seq)


def poisson_schedule(rate: float, requests: int, rng: np.random.Generator) -> np.ndarray:
    """Send times (s from the level's start) of ``requests`` Poisson arrivals at ``rate``/s."""
    return np.cumsum(rng.exponential(1.0 / rate, size=requests))


async def open_loop(target: Target, schedule: np.ndarray, n_obs: int) -> list[Sent]:
    """Send request ``i`` at ``schedule[i]`` whatever happened to the others; wait for all."""
    clock = time.perf_counter
    t0 = clock()
    out: list[Sent] = []

    async def one(seq: int, scheduled: float) -> None:
        sent = clock() - t0
        reply = await target.send(seq % n_obs)
        out.append(Sent(seq, seq % n_obs, scheduled, sent, clock() - t0, reply))

    tasks = []
    for seq, scheduled in enumerate(schedule):
        delay = scheduled - (clock() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(seq, float(scheduled))))
    await asyncio.gather(*tasks)
    return sorted(out, key=lambda s: s.seq)


async def noop_dispatch_rate(requests: int = 5000) -> float:
    """Requests per second the generator dispatches to a target that answers at once.

    An open loop with every send time at 0 against an in-process no-op: the
    ceiling of the generator's own bookkeeping on this machine (no network, no
    server), reported as ``generator.dispatch_capacity_rps``.
    """

    async def send(i: int) -> Reply:
        await asyncio.sleep(0)
        return Reply("ok")

    target = Target("noop", "inprocess", send)
    t0 = time.perf_counter()
    await open_loop(target, np.zeros(requests), 1)
    return requests / (time.perf_counter() - t0)
