"""``probe.npz``: observations saved with a checkpoint, with the logits and greedy actions the
policy gave them, so that any reload can prove it acts the same.

For a ``Box`` policy the actions are the reference actor's (:mod:`rlperf.models.actor`)
of the trained module's distribution inputs, and ``action_range`` holds ``high - low``
per dimension: a reload must give those actions within ``PROBE_ATOL`` x range too.

The training job writes it beside ``rlperf_policy.pt`` (:func:`write_probe`); the
rollout, edge and serve stages read it (:func:`read_probe`) and check their
restored policy against it within :data:`~rlperf.layout.PROBE_ATOL`
(:func:`check_probe`). numpy is imported by the functions that need it, so
reading a run's files stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlperf.errors import CheckpointError
from rlperf.layout import PROBE_ATOL, PROBE_FILE

if TYPE_CHECKING:
    import numpy as np


@dataclass
class Probe:
    """``probe.npz``: observations with the logits and greedy actions of the saved policy."""

    path: Path
    obs: np.ndarray
    logits: np.ndarray
    actions: np.ndarray  # (N,) argmax, or (N, d) Box actions
    action_range: np.ndarray | None = None  # (d,) high - low of a Box policy

    @property
    def continuous(self) -> bool:
        return self.action_range is not None


def read_probe(ckpt: Path) -> Probe | None:
    """``probe.npz`` of a checkpoint folder; None where there is none."""
    import numpy as np

    path = ckpt / PROBE_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            span = data["action_range"] if "action_range" in data.files else None
            return Probe(path, data["obs"], data["logits"], data["actions"], span)
    except Exception as exc:
        raise CheckpointError(
            f"{path} is truncated or unreadable ({type(exc).__name__}: {exc}); "
            f"expected the probe observations and logits saved with the checkpoint"
        ) from exc


def write_probe(
    ckpt: Path,
    obs: np.ndarray,
    logits: np.ndarray,
    actions: np.ndarray | None = None,
    action_range: np.ndarray | None = None,
) -> Path:
    """Save ``probe.npz``: observations, the policy's logits and its greedy actions (the
    argmax unless ``actions`` are given: a Box policy's, with its ``action_range``)."""
    import numpy as np

    path = ckpt / PROBE_FILE
    arrays: dict[str, Any] = {"obs": obs, "logits": logits}
    arrays["actions"] = logits.argmax(axis=1) if actions is None else actions
    if action_range is not None:
        arrays["action_range"] = np.asarray(action_range)
    np.savez(path, **arrays)
    return path


def check_probe(
    probe: Probe | None,
    logits_of: Callable[[np.ndarray], np.ndarray],
    device: str = "cpu",
    actions_of: Callable[[np.ndarray], np.ndarray] | None = None,
) -> dict[str, Any] | None:
    """The reloaded policy gives the logits (and a Box policy the actions) saved with the
    checkpoint (``probe.npz``).

    ``logits_of`` maps the probe observations to the reloaded policy's logits;
    ``actions_of`` (required for a Box policy) to its greedy actions, which must be the
    saved reference actor's within ``PROBE_ATOL`` x each dimension's range;
    ``device`` (``cpu`` / ``cuda``) picks the tolerance in :data:`PROBE_ATOL`.
    Returns the ``probe`` entry of ``summary.json`` (None without a probe).

    Raises:
        CheckpointError: the logits or actions differ by more than the tolerance.
    """
    import numpy as np

    if probe is None:
        return None
    logits = np.asarray(logits_of(probe.obs))
    err = float(np.abs(logits - probe.logits).max())
    atol = PROBE_ATOL[device]
    # Relative above 1: float rounding grows with the values (a DQN's Q-values of ~100).
    allowed = atol * max(1.0, float(np.abs(probe.logits).max(initial=0.0)))
    if not err <= allowed:
        raise CheckpointError(
            f"the policy restored from {probe.path.parent} does not reproduce the logits saved "
            f"with it in {probe.path} (max abs error {err:.3g}, tolerance {atol} on {device}, "
            f"relative above 1): the checkpoint's policy and {PROBE_FILE} come from different "
            f"trainings"
        )
    out: dict[str, Any] = {"observations": int(len(logits)), "max_abs_logit_err": err}
    if probe.continuous:
        if actions_of is None:
            raise ValueError("a Box policy's probe needs actions_of")
        out["max_action_err_of_range"] = _check_actions(probe, actions_of, atol, device)
    else:
        out["greedy_agreement"] = float((logits.argmax(axis=1) == probe.actions).mean())
    return {**out, "tolerance": atol}


def _check_actions(
    probe: Probe, actions_of: Callable[[np.ndarray], np.ndarray], atol: float, device: str
) -> float:
    """Largest action error relative to the range (unbounded: to max(1, |action|))."""
    import numpy as np

    assert probe.action_range is not None
    saved = np.asarray(probe.actions, np.float64)
    got = np.asarray(actions_of(probe.obs), np.float64).reshape(saved.shape)
    span = np.where(np.isfinite(probe.action_range), probe.action_range, 1.0)
    span = np.maximum(span, np.where(np.isfinite(probe.action_range), 0.0, np.abs(saved)))
    rel = float((np.abs(got - saved) / span).max())
    if not rel <= atol:
        raise CheckpointError(
            f"the policy restored from {probe.path.parent} does not act as the reference actor "
            f"saved in {probe.path}: its greedy actions differ by up to {rel:.3g} of the action "
            f"range (tolerance {atol} on {device}); see docs/rollout.md#continuous-actions"
        )
    return rel


def torch_policy_fns(
    net: Any,
) -> tuple[Callable[[np.ndarray], np.ndarray], str, Callable[[np.ndarray], np.ndarray] | None]:
    """``(logits_of, "cpu", actions_of)`` of a torch policy network for :func:`check_probe`:
    its logits (the action-distribution inputs), and for a Box policy its reference
    actor's actions (None otherwise)."""
    import numpy as np
    import torch

    def logits_of(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return np.asarray(net.logits(torch.from_numpy(np.ascontiguousarray(obs))).numpy())

    if net.kind != "mlp" or net.discrete_actions:
        return logits_of, "cpu", None
    return logits_of, "cpu", lambda obs: net.actions_of(logits_of(obs))
