"""The study's network as an RLlib new-API-stack ``TorchRLModule`` for PPO.

Imported only by the stages that start RLlib. The RLModule wraps
:class:`rlperf.models.vision_net.VisionNet` so that the same weights can be
saved to (and reloaded from) a plain torch file without Ray.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule

from rlperf.models.vision_net import VisionNet


class VisionNetRLModule(TorchRLModule, ValueFunctionAPI):
    """PPO RLModule; ``model_config`` must hold ``conv_filters`` (``model.conv_filters``)."""

    def setup(self) -> None:
        conv_filters = cast(dict[str, Any], self.model_config)["conv_filters"]
        obs_space = cast(gym.spaces.Box, self.observation_space)
        act_space = cast(gym.spaces.Discrete, self.action_space)
        self.net = VisionNet(obs_space.shape, int(act_space.n), conv_filters)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.net.logits(batch[Columns.OBS])}

    def compute_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        return self.net.value(batch[Columns.OBS])
