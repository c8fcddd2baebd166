"""``probe.npz``: observations saved with a checkpoint, with the logits and greedy actions the
policy gave them, so that any reload can prove it acts the same.

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
    actions: np.ndarray


def read_probe(ckpt: Path) -> Probe | None:
    """``probe.npz`` of a checkpoint folder; None where there is none."""
    import numpy as np

    path = ckpt / PROBE_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            return Probe(path, data["obs"], data["logits"], data["actions"])
    except Exception as exc:
        raise CheckpointError(
            f"{path} is truncated or unreadable ({type(exc).__name__}: {exc}); "
            f"expected the probe observations and logits saved with the checkpoint"
        ) from exc


def write_probe(ckpt: Path, obs: np.ndarray, logits: np.ndarray) -> Path:
    """Save ``probe.npz``: observations, the policy's logits and its greedy actions."""
    import numpy as np

    path = ckpt / PROBE_FILE
    np.savez(path, obs=obs, logits=logits, actions=logits.argmax(axis=1))
    return path


def check_probe(
    probe: Probe | None, logits_of: Callable[[np.ndarray], np.ndarray], device: str = "cpu"
) -> dict[str, Any] | None:
    """The reloaded policy gives the logits saved with the checkpoint (``probe.npz``).

    ``logits_of`` maps the probe observations to the reloaded policy's logits;
    ``device`` (``cpu`` / ``cuda``) picks the tolerance in :data:`PROBE_ATOL`.
    Returns the ``probe`` entry of ``summary.json`` (None without a probe).

    Raises:
        CheckpointError: the logits differ by more than the tolerance.
    """
    import numpy as np

    if probe is None:
        return None
    logits = np.asarray(logits_of(probe.obs))
    err = float(np.abs(logits - probe.logits).max())
    agreement = float((logits.argmax(axis=1) == probe.actions).mean())
    atol = PROBE_ATOL[device]
    if not err <= atol:
        raise CheckpointError(
            f"the policy restored from {probe.path.parent} does not reproduce the logits saved "
            f"with it in {probe.path} (max abs error {err:.3g}, tolerance {atol} on {device}): "
            f"the checkpoint's policy and {PROBE_FILE} come from different trainings"
        )
    return {
        "observations": int(len(logits)),
        "max_abs_logit_err": err,
        "greedy_agreement": agreement,
        "tolerance": atol,
    }
