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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlperf.runs import POLICY_FILE

#: Written by :func:`save_policy`.
POLICY_FORMAT_VERSION = 2
#: Read by :func:`load_policy` and :func:`rlperf.runs.read_policy_payload`.
READABLE_FORMAT_VERSIONS = (1, 2)


class PolicyLoadError(ValueError):
    """A policy file that is missing, truncated, or of another format/model."""


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
        from rlperf.models.vision_net import VisionNet

        return VisionNet.from_model_config(model_config)
    if kind == "mlp":
        from rlperf.models.mlp_net import MlpNet

        return MlpNet.from_model_config(model_config)
    raise PolicyLoadError(f"model kind {kind!r} is not one this rlperf builds (vision, mlp)")


def save_policy(net: Any, path: Path, extra: dict[str, Any] | None = None) -> Path:
    """Write weights + model config to ``path`` (a file), loadable by :func:`load_policy`."""
    from rlperf import __version__

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
