"""The Ray Serve deployments: the policy and the echo (same payload, no model).

One class serves both (:class:`PolicyServer`): the echo replica decodes and
checks the same ``.npy`` payload, answers in the same form, and runs no model,
so policy minus echo is the model's share of a request. HTTP requests come in
through ``__call__`` (Serve's proxy on 127.0.0.1); handle requests call
:meth:`PolicyServer.handle_request` with the same bytes. Every answer carries
the action, the replica that computed it, the model time and the batch size.

Dynamic batching (``serve.max_batch_size`` > 1) goes through ``@serve.batch``;
its size and wait are set per deployment when the replica starts.
Importing this module imports Ray Serve: the stage imports it when it deploys.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray import serve
from ray.serve._private import replica as replica_module
from starlette.requests import Request
from starlette.responses import JSONResponse

from rlperf.errors import PayloadError
from rlperf.serve.model import ModelSpec, load_model
from rlperf.serve.payload import action_json, decode_observation

#: Name of the deployment inside each application.
DEPLOYMENT = "PolicyServer"


def bind_replica_grpc_to_loopback() -> None:
    """Make this replica's inter-deployment gRPC server listen on 127.0.0.1, not ``[::]``.

    Ray Serve 2.60 starts it on ``[::]:0`` (every interface) in
    ``ReplicaBase._on_initialized`` (ray/serve/_private/replica.py), after the
    user's constructor, with no option for the host. The constructor therefore
    wraps the module's ``add_port_to_grpc_server`` so a wildcard host becomes
    127.0.0.1 (a private name: tests/serve/test_serve.py checks the socket table of a
    real deployment). Serve's proxy reaches replicas through Ray actor calls
    unless ``RAY_SERVE_USE_GRPC_BY_DEFAULT=1``, and then at the node IP, which
    rlperf's Ray sets to 127.0.0.1.
    """
    original = replica_module.add_port_to_grpc_server
    if getattr(original, "rlperf_loopback", False):
        return

    def loopback(server: Any, address: str) -> Any:
        host, _, port = address.rpartition(":")
        if host in ("[::]", "0.0.0.0", ""):
            address = f"127.0.0.1:{port}"
        return original(server, address)

    loopback.rlperf_loopback = True  # type: ignore[attr-defined]
    replica_module.add_port_to_grpc_server = loopback


@serve.deployment(name=DEPLOYMENT)
class PolicyServer:
    """A replica: the model of ``spec`` (``kind=echo``: none), batched or one request at a time."""

    def __init__(self, spec: dict[str, Any], max_batch_size: int, batch_wait_timeout_s: float):
        bind_replica_grpc_to_loopback()
        self.spec = ModelSpec(**{**spec, "obs_shape": tuple(spec["obs_shape"])})
        self.model = load_model(self.spec)
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.batching = int(max_batch_size) > 1
        if self.batching:
            batched: Any = self._batched  # @serve.batch adds these setters
            batched.set_max_batch_size(int(max_batch_size))
            batched.set_batch_wait_timeout_s(float(batch_wait_timeout_s))

    async def __call__(self, request: Request) -> JSONResponse:
        """HTTP: a ``.npy`` body; 400 naming the expected shape and dtype when it is not one."""
        try:
            obs = self._decode(await request.body())
        except PayloadError as exc:
            return JSONResponse({"error": str(exc), "replica": self.replica}, status_code=400)
        return JSONResponse(await self._act(obs))

    async def handle_request(self, body: bytes) -> dict[str, Any]:
        """Serve handle: the same bytes as over HTTP; raises :class:`PayloadError` on bad input."""
        return await self._act(self._decode(body))

    def _decode(self, body: bytes) -> np.ndarray:
        return decode_observation(body, self.spec.obs_shape, self.spec.obs_dtype)

    async def _act(self, obs: np.ndarray) -> dict[str, Any]:
        if self.batching:
            answer: dict[str, Any] = await self._batched(obs)
            return answer
        actions, model_ms = self.model.act(obs[None])
        return {
            "action": action_json(actions[0]),
            "replica": self.replica,
            "model_ms": model_ms,
            "batch": 1,
        }

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.0)
    async def _batched(self, observations: list[np.ndarray]) -> list[dict[str, Any]]:
        actions, model_ms = self.model.act(np.stack(observations))
        n = len(observations)
        return [
            {"action": action_json(a), "replica": self.replica, "model_ms": model_ms, "batch": n}
            for a in actions
        ]


def policy_app(
    spec: ModelSpec,
    *,
    replicas: int,
    cpus_per_replica: float,
    max_ongoing_requests: int,
    max_queued_requests: int,
    max_batch_size: int = 1,
    batch_wait_timeout_s: float = 0.0,
) -> Any:
    """The bound application of one :class:`PolicyServer` deployment (``serve.run`` takes it)."""
    deployment: Any = PolicyServer  # a serve.Deployment (the decorator's type is lost to mypy)
    options = deployment.options(
        num_replicas=int(replicas),
        max_ongoing_requests=int(max_ongoing_requests),
        max_queued_requests=int(max_queued_requests),
        ray_actor_options={"num_cpus": float(cpus_per_replica)},
        graceful_shutdown_timeout_s=1.0,
    )
    return options.bind(spec.to_dict(), int(max_batch_size), float(batch_wait_timeout_s))
