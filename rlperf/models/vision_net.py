"""The study's "VisionNetwork" as a plain torch module (no Ray needed to use it).

Architecture (docs/study.md#models): a conv trunk with TF-style 'same' padding and ReLU for
every layer but the last, whose 'valid' conv reaches 1x1xC; policy logits from a
1x1 conv to the actions; the value function has its own identical trunk and a
1x1 conv to one output (no shared layers). Observations are uint8 NHWC frames,
scaled to [0, 1] inside the module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlperf.models.shapes import ConvLayerShape, conv_stack_shapes, parse_filter


class ConvTrunk(nn.Module):
    """Conv layers with precomputed TF padding; the last layer is 'valid' and 1x1."""

    def __init__(self, layers: Sequence[ConvLayerShape], final_relu: bool = True) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv2d(ly.in_channels, ly.out_channels, ly.kernel, ly.stride) for ly in layers
        )
        # (left, right, top, bottom) for F.pad; None where no padding is needed.
        self._pads: list[tuple[int, int, int, int] | None] = [
            (ly.pad_before, ly.pad_after, ly.pad_before, ly.pad_after)
            if ly.pad_before or ly.pad_after
            else None
            for ly in layers
        ]
        self._final_relu = final_relu
        self._final_kernel = layers[-1].kernel
        for conv in self._conv_layers():
            nn.init.xavier_uniform_(conv.weight)
            nn.init.zeros_(cast(torch.Tensor, conv.bias))

    def _conv_layers(self) -> list[nn.Conv2d]:
        return [cast(nn.Conv2d, c) for c in self.convs]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *hidden, last = self._conv_layers()
        for conv, pad in zip(hidden, self._pads, strict=False):
            if pad is not None:
                x = F.pad(x, pad)
            x = F.relu(conv(x))
        # The last conv is 'valid' with a 1x1 output: it only sees the top-left
        # k x k window, so it equals a linear layer on that window flattened in
        # (C, H, W) order. As a GEMM it is ~5x faster than oneDNN's conv at batch 1
        # for the study's 11x11 kernels, and numerically the same computation.
        k = self._final_kernel
        if x.shape[-1] != k or x.shape[-2] != k:
            x = x[..., :k, :k]
        x = F.linear(x.flatten(1), last.weight.flatten(1), last.bias)
        x = x[:, :, None, None]
        return F.relu(x) if self._final_relu else x


class VisionNet(nn.Module):
    """Policy and value networks of the study, each with its own conv trunk.

    The module API of every rlperf policy network is in :mod:`rlperf.models.mlp_net`.

    Args:
        obs_shape: (dim, dim, channels) of the uint8 observation.
        num_actions: size of the discrete action space.
        conv_filters: ``[[out_channels, [k, k], stride], ...]`` (``model.conv_filters``).
    """

    kind = "vision"

    def __init__(
        self, obs_shape: Sequence[int], num_actions: int, conv_filters: Sequence[Sequence[Any]]
    ) -> None:
        super().__init__()
        dim, dim_w, channels = (int(v) for v in obs_shape)
        if dim != dim_w:
            raise ValueError(f"observation must be square, got {tuple(obs_shape)}")
        self.obs_shape = (dim, dim, channels)
        self.num_actions = int(num_actions)
        self.num_outputs = self.num_actions
        # Canonical [out, [k, k], stride] form, parsed (and validated) in one place.
        parsed = (parse_filter(f, i) for i, f in enumerate(conv_filters))
        self.conv_filters = [[out, [k, k], stride] for out, k, stride in parsed]
        layers = conv_stack_shapes(dim, channels, self.conv_filters)
        features = layers[-1].out_channels
        # The study's trunks end with ReLU before the 1x1 heads (RLlib VisionNetwork).
        self.pi_trunk = ConvTrunk(layers)
        self.pi_logits = nn.Conv2d(features, self.num_actions, 1)
        self.vf_trunk = ConvTrunk(layers)
        self.vf_out = nn.Conv2d(features, 1, 1)
        for head in (self.pi_logits, self.vf_out):
            nn.init.xavier_uniform_(head.weight)
            nn.init.zeros_(cast(torch.Tensor, head.bias))

    @staticmethod
    def to_nchw(obs: torch.Tensor) -> torch.Tensor:
        """uint8/float NHWC in 0..255 -> contiguous float NCHW in [0, 1].

        ``permute`` alone leaves a channels-last view; torch's conv is ~8x slower
        on it at batch 1, hence the explicit ``contiguous()``.
        """
        return (obs.to(torch.float32) * (1.0 / 255.0)).permute(0, 3, 1, 2).contiguous()

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        """Policy logits (B, num_actions) for NHWC observations (B, dim, dim, C)."""
        return self.pi_logits(self.pi_trunk(self.to_nchw(obs))).flatten(1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values (B,) for NHWC observations."""
        return self.vf_out(self.vf_trunk(self.to_nchw(obs))).flatten()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.logits(obs)

    @torch.inference_mode()
    def greedy_action(self, obs: np.ndarray) -> int:
        """Greedy action for one uint8 observation (dim, dim, C) — no Ray, no connectors."""
        x = torch.from_numpy(np.ascontiguousarray(obs)).unsqueeze(0)
        return int(self.logits(x).argmax(dim=1).item())

    @classmethod
    def from_model_config(cls, config: dict[str, Any]) -> VisionNet:
        """Rebuild from :meth:`model_config` (also a policy file of format 1, without kind)."""
        return cls(config["obs_shape"], config["num_actions"], config["conv_filters"])

    def model_config(self) -> dict[str, Any]:
        """What is needed to rebuild this network (saved next to its weights)."""
        return {
            "kind": self.kind,
            "obs_shape": list(self.obs_shape),
            "num_actions": self.num_actions,
            "conv_filters": self.conv_filters,
        }
