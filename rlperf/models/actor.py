"""The reference actor of a continuous-action policy: action-distribution inputs in, the
deterministic action the env gets out. One definition, which greedy evaluation, the
rollout, the probe, the edge export and serve are all checked against.

A ``Box`` policy's distribution inputs are ``[mean (d), log_std (d)]`` (RLlib's
layout). How the mean becomes an action depends on the head the policy was trained
with (``squash`` of the saved model config):

``clip``  a Gaussian head (PPO, APPO, IMPALA): RLlib (``normalize_actions=True``, its
          default) takes the mean as lying in [-1, 1], maps it linearly onto
          [low, high] (``unsquash_action``) and clips it there:
          ``clip(low + (mean + 1) (high - low) / 2, low, high)``.
``tanh``  a squashed Gaussian (SAC): ``low + (tanh(mean) + 1) (high - low) / 2``, the
          mode of the distribution the policy was trained to act with. RLlib 2.60's
          ``TorchSquashedGaussian.to_deterministic()`` returns the unsquashed mean
          instead (its greedy actions are ``clip(mean)``); rlperf's SAC module
          overrides it (:class:`rlperf.models.rl_module.SacRLModule`).

An unbounded dimension (``low`` or ``high`` infinite) is left as the mean (``clip``)
or ``tanh(mean)`` (``tanh``), as RLlib leaves it. numpy only: the edge and serve
stages use it without torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: ``squash`` -> what the head is (docs/rollout.md#continuous-actions).
SQUASHES = {
    "clip": "Gaussian mean mapped linearly onto [low, high], clipped",
    "tanh": "squashed Gaussian: low + (tanh(mean) + 1) (high - low) / 2",
}


def action_bounds(action_spec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``low`` and ``high`` of a saved ``Box`` action spec (float64, flattened)."""
    low = np.asarray(action_spec["low"], dtype=np.float64).ravel()
    high = np.asarray(action_spec["high"], dtype=np.float64).ravel()
    return low, high


def action_range(action_spec: dict[str, Any]) -> np.ndarray:
    """``high - low`` per action dimension (inf where unbounded)."""
    low, high = action_bounds(action_spec)
    return high - low


def box_actions(dist_inputs: Any, action_spec: dict[str, Any], squash: str) -> np.ndarray:
    """The reference actor: distribution inputs ``(B, 2d)`` -> actions ``(B, d)`` float32."""
    if squash not in SQUASHES:
        raise ValueError(f"squash={squash!r} must be one of {', '.join(SQUASHES)}")
    x = np.asarray(dist_inputs, dtype=np.float64)
    d = x.shape[-1] // 2
    mean = x[..., :d]
    low, high = action_bounds(action_spec)
    bounded = np.isfinite(low) & np.isfinite(high)
    unit = np.tanh(mean) if squash == "tanh" else mean
    with np.errstate(invalid="ignore", over="ignore"):  # unbounded: inf - inf, unused
        scaled = np.clip(low + (unit + 1.0) * (high - low) / 2.0, low, high)
    out = np.where(bounded, scaled, unit)
    return out.astype(np.float32)


def relative_action_error(
    actions: np.ndarray, reference: np.ndarray, span: np.ndarray
) -> np.ndarray:
    """``|actions - reference| / span`` per observation and dimension (float64)."""
    diff = np.abs(np.asarray(actions, np.float64) - np.asarray(reference, np.float64))
    return diff / np.asarray(span, np.float64)
