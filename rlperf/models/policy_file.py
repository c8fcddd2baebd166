"""``rlperf_policy.pt``: a trained policy's weights and how to rebuild its network, without Ray.

Payload (``torch.save``, loaded with ``weights_only=True``)::

    format_version  2 (1: rlperf 0.1/0.2 files, vision networks only; still read)
    rlperf_version  the rlperf that wrote it
    model_config    the network's model_config(): "kind" (vision | mlp) and its geometry
    state_dict      the weights
    extra           e.g. {"iteration": 20}

Format 2 added ``model_config["kind"]``; a format-1 file has no kind and holds a
:class:`~rlperf.models.vision_net.VisionNet`. An rlperf that reads only format 1
refuses a format-2 file with a clear message instead of failing on an MLP.

Two readers: :func:`load_policy` rebuilds the network (a user's script, the
export), :func:`read_policy_payload` checks a checkpoint's file before a
downstream stage uses it (:func:`rlperf.runs.checkpoint.load_trained_run`: format,
and an rlperf of the same major.minor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlperf import __version__
from rlperf.errors import CheckpointError, PolicyLoadError
from rlperf.layout import POLICY_FILE, compatible_version, major_minor
from rlperf.models.mlp_net import MlpNet
from rlperf.models.vision_net import VisionNet

#: Written by :func:`save_policy`.
POLICY_FORMAT_VERSION = 2
#: Read by :func:`load_policy` and :func:`read_policy_payload`.
READABLE_FORMAT_VERSIONS = (1, 2)


def count_trainable_params(module: nn.Module) -> int:
    """Number of trainable parameters of a torch module."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def model_kind(model_config: dict[str, Any]) -> str:
    """``kind`` of a saved model config (``vision`` for format-1 files, which have none)."""
    return str(model_config.get("kind", "vision"))


def build_net(model_config: dict[str, Any]) -> nn.Module:
    """The (untrained) network a saved ``model_config`` describes."""
    kind = model_kind(model_config)
    if kind == "vision":
        return VisionNet.from_model_config(model_config)
    if kind == "mlp":
        return MlpNet.from_model_config(model_config)
    raise PolicyLoadError(f"model kind {kind!r} is not one this rlperf builds (vision, mlp)")


def save_policy(net: Any, path: Path, extra: dict[str, Any] | None = None) -> Path:
    """Write weights + model config to ``path`` (a file), loadable by :func:`load_policy`."""
    payload = {
        "format_version": POLICY_FORMAT_VERSION,
        "rlperf_version": __version__,
        "model_config": net.model_config(),
        "state_dict": net.state_dict(),
        "extra": extra or {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


def load_policy(path: Path | str) -> Any:
    """Rebuild the network (VisionNet or MlpNet) of a policy file or checkpoint folder (no Ray)."""
    path = Path(path)
    if path.is_dir():
        path = path / POLICY_FILE
    if not path.is_file():
        raise PolicyLoadError(f"no rlperf policy at {path}: expected the file {POLICY_FILE}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated or not a torch file
        raise PolicyLoadError(f"cannot read policy file {path}: {exc}") from exc
    version = payload.get("format_version") if isinstance(payload, dict) else None
    if version not in READABLE_FORMAT_VERSIONS:
        raise PolicyLoadError(
            f"{path}: policy format version {version!r}, this rlperf reads "
            f"versions {', '.join(map(str, READABLE_FORMAT_VERSIONS))}"
        )
    net = build_net(payload["model_config"])
    try:
        net.load_state_dict(payload["state_dict"])
    except RuntimeError as exc:
        raise PolicyLoadError(
            f"{path}: weights do not match the saved model config: {exc}"
        ) from exc
    net.eval()
    return net


def read_policy_payload(ckpt: Path) -> dict[str, Any]:
    """``rlperf_policy.pt`` of checkpoint folder ``ckpt``: readable, of a readable format
    version, from an rlperf of this major.minor (no network built).

    Raises:
        CheckpointError: naming the file and what was expected.
    """
    path = ckpt / POLICY_FILE
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"{path} is truncated or not a torch file ({type(exc).__name__}: {exc}); expected "
            f"the rlperf policy file written with the checkpoint"
        ) from exc
    if not isinstance(payload, dict) or "model_config" not in payload:
        raise CheckpointError(f"{path}: not an rlperf policy file (no model_config)")
    fmt = payload.get("format_version")
    saved = str(payload.get("rlperf_version", "unknown"))
    if fmt not in READABLE_FORMAT_VERSIONS or not compatible_version(saved, __version__):
        raise CheckpointError(
            f"{path} was written by rlperf {saved} (policy format {fmt!r}); this is rlperf "
            f"{__version__}, which reads checkpoints of rlperf "
            f"{'.'.join(major_minor(__version__))}.x with policy format "
            f"{' or '.join(map(str, READABLE_FORMAT_VERSIONS))} (it writes "
            f"{POLICY_FORMAT_VERSION}); retrain with this rlperf or use the rlperf that trained it"
        )
    return payload
