"""MLP policies for vector and Discrete observations, as a plain torch module (no Ray).

The module API every rlperf policy network shares (:class:`~rlperf.models.vision_net.VisionNet`
too), which the RLModules (:mod:`rlperf.models.rl_module`), the policy file
(:mod:`rlperf.models.policy_file`), the probe, the rollout and the edge export use:

- ``kind`` (``"mlp"``), ``obs_shape`` (the shape of one observation as the env gives
  it: ``()`` for a ``Discrete`` state), ``num_outputs`` (width of the policy head);
- ``logits(obs)``: the action-distribution inputs ``(B, num_outputs)`` — logits for
  ``Discrete`` actions; for a ``Box`` of ``d`` actions the concatenation
  ``[mean (d), log_std (d)]``, RLlib's ``TorchDiagGaussian`` layout (SAC's squashed
  Gaussian takes the same layout);
- ``value(obs)``: state values ``(B,)`` (not for an actor saved without a value
  network: SAC's);
- ``greedy_action(obs)``: one observation in, the deterministic action out (argmax,
  or the reference actor of :mod:`rlperf.models.actor` for a ``Box``);
- ``model_config()``: what rebuilds it (:func:`MlpNet.from_model_config`).

Policy and value have networks of their own (no shared layers, like the study's
VisionNetwork). ``Discrete(n)`` observations are one-hot encoded inside
:meth:`MlpNet.encode`; ``Box`` observations are flattened to float32. Q-functions
(SAC) are not part of this module: an algorithm that needs them builds them
with :func:`mlp_layers` on :meth:`MlpNet.encode`'s features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlperf.models.actor import SQUASHES, box_actions

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "silu": nn.SiLU,
}


def space_spec(space: Any) -> dict[str, Any]:
    """A JSON-able description of a ``Discrete`` or ``Box`` space (saved with the weights)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, spaces.Box):
        return {
            "type": "box",
            "shape": [int(d) for d in space.shape],
            "low": np.asarray(space.low, dtype=np.float64).ravel().tolist(),
            "high": np.asarray(space.high, dtype=np.float64).ravel().tolist(),
        }
    raise ValueError(f"an MLP policy takes Discrete or Box spaces, not {space}")


def mlp_layers(
    in_features: int, hiddens: Sequence[int], activation: str, out_features: int
) -> nn.Sequential:
    """Linear layers with ``activation`` after every hidden one; the output layer is linear."""
    layers: list[nn.Module] = []
    width = in_features
    for size in hiddens:
        layers += [nn.Linear(width, int(size)), ACTIVATIONS[activation]()]
        width = int(size)
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


class MlpNet(nn.Module):
    """Policy and value MLPs (see the module docstring for the API).

    Args:
        obs_spec, action_spec: :func:`space_spec` of the observation and action spaces.
        hiddens: hidden layer sizes (``model.hiddens``).
        activation: ``model.activation`` (tanh, relu, elu, silu).
        squash: how a ``Box`` head's mean becomes the action (``clip``: a Gaussian
            head; ``tanh``: SAC's squashed Gaussian; :mod:`rlperf.models.actor`).
        value: build the value network (False: an actor alone, SAC's policy).
    """

    kind = "mlp"

    def __init__(
        self,
        obs_spec: dict[str, Any],
        action_spec: dict[str, Any],
        hiddens: Sequence[int],
        activation: str = "tanh",
        squash: str = "clip",
        value: bool = True,
    ) -> None:
        super().__init__()
        if squash not in SQUASHES:
            raise ValueError(f"squash={squash!r} must be one of {', '.join(SQUASHES)}")
        self.squash, self.has_value = str(squash), bool(value)
        self.obs_spec, self.action_spec = dict(obs_spec), dict(action_spec)
        self.hiddens = [int(h) for h in hiddens]
        self.activation = str(activation)
        discrete_obs = obs_spec["type"] == "discrete"
        self.obs_shape: tuple[int, ...] = () if discrete_obs else tuple(obs_spec["shape"])
        self.in_features = int(obs_spec["n"]) if discrete_obs else int(np.prod(self.obs_shape))
        if action_spec["type"] == "discrete":
            self.num_outputs = int(action_spec["n"])
        else:
            if len(action_spec["shape"]) != 1:
                raise ValueError(f"Box actions must be 1-D, got shape {action_spec['shape']}")
            self.num_outputs = 2 * int(action_spec["shape"][0])  # mean and log_std
        self.pi_net = mlp_layers(self.in_features, self.hiddens, self.activation, self.num_outputs)
        self.vf_net = (
            mlp_layers(self.in_features, self.hiddens, self.activation, 1) if value else None
        )

    @classmethod
    def for_spaces(
        cls,
        obs_space: Any,
        action_space: Any,
        hiddens: Sequence[int],
        activation: str,
        **kwargs: Any,
    ) -> MlpNet:
        """The network for gymnasium spaces (``kwargs``: ``squash``, ``value``)."""
        return cls(space_spec(obs_space), space_spec(action_space), hiddens, activation, **kwargs)

    @classmethod
    def from_model_config(cls, config: dict[str, Any]) -> MlpNet:
        """Rebuild from :meth:`model_config`."""
        return cls(
            config["obs"],
            config["actions"],
            config["hiddens"],
            config["activation"],
            squash=str(config.get("squash", "clip")),
            value=bool(config.get("value", True)),
        )

    @property
    def discrete_actions(self) -> bool:
        return bool(self.action_spec["type"] == "discrete")

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations as the env gives them -> float features ``(B, in_features)``."""
        if self.obs_spec["type"] == "discrete":
            return F.one_hot(obs.reshape(-1).long(), self.in_features).to(torch.float32)
        return obs.reshape(obs.shape[0], -1).to(torch.float32)

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        """Action-distribution inputs ``(B, num_outputs)`` (logits, or mean and log_std)."""
        return cast(torch.Tensor, self.pi_net(self.encode(obs)))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``(B,)``."""
        if self.vf_net is None:
            raise ValueError("this policy was saved without a value network (an actor alone)")
        return cast(torch.Tensor, self.vf_net(self.encode(obs))).flatten()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.logits(obs)

    @torch.inference_mode()
    def greedy_action(self, obs: Any) -> Any:
        """The deterministic action for one observation, as RLlib's greedy path gives it.

        Discrete: the argmax (int). Box: the reference actor
        (:func:`rlperf.models.actor.box_actions` with this net's ``squash``).
        """
        x = torch.as_tensor(np.asarray(obs)).unsqueeze(0)
        out = self.logits(x)
        if self.discrete_actions:
            return int(out[0].argmax().item())
        return self.actions_of(out.numpy())[0]

    def actions_of(self, dist_inputs: np.ndarray) -> np.ndarray:
        """Box: the reference actor's actions ``(B, d)`` of distribution inputs ``(B, 2d)``."""
        return box_actions(dist_inputs, self.action_spec, self.squash)

    def model_config(self) -> dict[str, Any]:
        """What rebuilds this network (saved next to its weights)."""
        return {
            "kind": self.kind,
            "obs": self.obs_spec,
            "actions": self.action_spec,
            "hiddens": self.hiddens,
            "activation": self.activation,
            "squash": self.squash,
            "value": self.has_value,
        }
