"""rlperf's networks as RLlib new-API-stack ``TorchRLModule``s (PPO: policy and value).

Imported only by the stages that start RLlib. Each RLModule wraps a plain torch
network (:class:`~rlperf.models.vision_net.VisionNet`,
:class:`~rlperf.models.mlp_net.MlpNet`) as ``self.net``, so that the same
weights can be saved to (and reloaded from) ``rlperf_policy.pt`` without Ray
(:mod:`rlperf.models.policy_file`). :data:`RL_MODULES` maps ``model.kind`` to
its module class; :func:`rl_module_model_config` gives the ``model_config`` it
takes. Action distributions are RLlib's defaults for the action space
(``TorchCategorical`` for Discrete, ``TorchDiagGaussian`` for Box), whose inputs
are exactly what ``net.logits`` returns. SAC keeps RLlib's own module
(:class:`SacRLModule`), acting greedily with rlperf's reference actor.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import torch
from omegaconf import DictConfig, OmegaConf
from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import DefaultDQNTorchRLModule
from ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module import DefaultSACTorchRLModule
from ray.rllib.algorithms.tqc.torch.default_tqc_torch_rl_module import DefaultTQCTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import (
    TorchDeterministic,
    TorchSquashedGaussian,
)
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.apis.target_network_api import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.core.rl_module.torch import TorchRLModule

from rlperf.models.mlp_net import MlpNet
from rlperf.models.vision_net import VisionNet


class _PolicyValueRLModule(TorchRLModule, ValueFunctionAPI):
    """Forward = ``net.logits`` as the action-distribution inputs; values = ``net.value``."""

    net: Any

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.net.logits(batch[Columns.OBS])}

    def compute_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> torch.Tensor:
        return cast(torch.Tensor, self.net.value(batch[Columns.OBS]))


class VisionNetRLModule(_PolicyValueRLModule):
    """The study's network; ``model_config`` must hold ``conv_filters`` (``model.conv_filters``)."""

    def setup(self) -> None:
        conv_filters = cast(dict[str, Any], self.model_config)["conv_filters"]
        obs_space = cast(gym.spaces.Box, self.observation_space)
        act_space = cast(gym.spaces.Discrete, self.action_space)
        self.net = VisionNet(obs_space.shape, int(act_space.n), conv_filters)


class MlpRLModule(_PolicyValueRLModule):
    """An MLP; ``model_config`` must hold ``hiddens`` and ``activation`` (``model.*``)."""

    def setup(self) -> None:
        config = cast(dict[str, Any], self.model_config)
        self.net = MlpNet.for_spaces(
            self.observation_space, self.action_space, config["hiddens"], config["activation"]
        )


#: ``model.kind`` -> its RLModule class.
RL_MODULES: dict[str, type[TorchRLModule]] = {"vision": VisionNetRLModule, "mlp": MlpRLModule}


class _TargetNetworkMixin(TargetNetworkAPI):
    """APPO's target network: a frozen copy of ``net`` whose logits are the "old" policy
    of the clipped surrogate (RLlib's ``TargetNetworkAPI``; RLlib updates the copy)."""

    net: Any
    _old_net: Any

    def make_target_networks(self) -> None:
        self._old_net = make_target_network(self.net)

    def get_target_network_pairs(self) -> list[tuple[Any, Any]]:
        return [(self.net, self._old_net)]

    def forward_target(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: self._old_net.logits(batch[Columns.OBS])}

    def get_non_inference_attributes(self) -> list[str]:
        return ["_old_net"]


class VisionNetAPPORLModule(_TargetNetworkMixin, VisionNetRLModule):
    """:class:`VisionNetRLModule` with APPO's target network."""


class MlpAPPORLModule(_TargetNetworkMixin, MlpRLModule):
    """:class:`MlpRLModule` with APPO's target network."""


#: ``model.kind`` -> its RLModule class for APPO (with a target network).
APPO_RL_MODULES: dict[str, type[TorchRLModule]] = {
    "vision": VisionNetAPPORLModule,
    "mlp": MlpAPPORLModule,
}


def rl_module_model_config(model: DictConfig) -> dict[str, Any]:
    """The RLModule's ``model_config`` from the config's ``model`` subtree."""
    if str(model.get("kind") or "vision") == "mlp":
        return {"hiddens": list(model.hiddens), "activation": str(model.activation)}
    return {"conv_filters": OmegaConf.to_container(model.conv_filters)}


class ReferenceSquashedGaussian(TorchSquashedGaussian):
    """RLlib's squashed Gaussian whose deterministic action is the reference actor's:
    ``tanh(mean)`` in [-1, 1], which RLlib's ``unsquash_action`` then maps onto
    [low, high] (RLlib 2.60 returns the unsquashed mean; :mod:`rlperf.models.actor`)."""

    def to_deterministic(self) -> TorchDeterministic:
        return TorchDeterministic(loc=self._squash(self.loc))


class _SquashedActor:
    """An actor of ``pi_encoder`` then ``pi`` (RLlib's SAC and TQC modules) acting greedily
    with the reference actor (:class:`ReferenceSquashedGaussian`), so that ``judge=eval``,
    the rollout and RLlib's own evaluation act as the saved actor does. :meth:`actor_net`
    is that actor as rlperf's :class:`MlpNet` (``rlperf_policy.pt``)."""

    def get_inference_action_dist_cls(self) -> type[TorchSquashedGaussian]:
        return ReferenceSquashedGaussian

    def actor_net(self, hiddens: list[int], activation: str) -> MlpNet:
        """The policy network (``pi_encoder`` then ``pi``) as an :class:`MlpNet` with
        ``squash="tanh"`` and no value network, holding a copy of its weights."""
        module = cast(Any, self)  # an RLlib module of pi_encoder and pi (SAC's, TQC's)
        net = MlpNet.for_spaces(
            module.observation_space,
            module.action_space,
            hiddens,
            activation,
            squash="tanh",
            value=False,
        )
        src = [
            m
            for part in (module.pi_encoder, module.pi)
            for m in part.modules()
            if isinstance(m, torch.nn.Linear)
        ]
        dst = [m for m in net.pi_net.modules() if isinstance(m, torch.nn.Linear)]
        _copy_linears(src, dst, hiddens)
        return net.eval()


class SacRLModule(_SquashedActor, DefaultSACTorchRLModule):
    """RLlib's SAC module (policy, twin Q-networks, shaped by ``fcnet_hiddens``) with
    rlperf's greedy reference actor (:class:`_SquashedActor`)."""


class TqcRLModule(_SquashedActor, DefaultTQCTorchRLModule):
    """RLlib's TQC module (SAC's policy, critics of quantiles) with rlperf's greedy
    reference actor (:class:`_SquashedActor`)."""


class DqnRLModule(DefaultDQNTorchRLModule):
    """RLlib's DQN module whose greedy forward also returns its Q-values as the
    action-distribution inputs (RLlib's gives the argmax only), so that the probe and the
    rollout can compare them; :meth:`actor_net` is the Q-network as rlperf's
    :class:`MlpNet` (``rlperf_policy.pt``: greedy action = argmax of its outputs)."""

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        out = cast(dict[str, Any], super()._forward_inference(batch, **kwargs))
        out[Columns.ACTION_DIST_INPUTS] = self.compute_q_values(batch)[QF_PREDS]
        return out

    def actor_net(self, hiddens: list[int], activation: str) -> MlpNet:
        """The Q-network as an :class:`MlpNet` without a value network: the encoder's layers,
        then one linear layer of Q-values. A dueling head's ``V + A - mean(A)`` is linear in
        the encoder's features, so it folds into that layer exactly (up to float rounding):
        ``W_q = W_a - mean_rows(W_a) + w_v``, ``b_q = b_a - mean(b_a) + b_v``."""
        if self.num_atoms > 1:
            raise ValueError("distributional DQN (num_atoms > 1) has no rlperf actor")
        net = MlpNet.for_spaces(
            self.observation_space, self.action_space, hiddens, activation, value=False
        )
        encoder = [m for m in self.encoder.modules() if isinstance(m, torch.nn.Linear)]
        af = [m for m in self.af.modules() if isinstance(m, torch.nn.Linear)]
        if len(af) != 1:
            raise ValueError(f"DQN's Q head has {len(af)} linear layers; rlperf folds one")
        w, b = af[0].weight.double(), af[0].bias.double()
        if self.uses_dueling:
            vf = [m for m in self.vf.modules() if isinstance(m, torch.nn.Linear)]
            if len(vf) != 1:
                raise ValueError(f"DQN's value head has {len(vf)} linear layers; rlperf folds one")
            w = w - w.mean(dim=0, keepdim=True) + vf[0].weight.double()
            b = b - b.mean() + vf[0].bias.double()
        pairs = [(m.weight, m.bias) for m in encoder] + [(w.float(), b.float())]
        dst = [m for m in net.pi_net.modules() if isinstance(m, torch.nn.Linear)]
        _copy_linears(pairs, dst, hiddens)
        return net.eval()


def _copy_linears(src: list[Any], dst: list[Any], hiddens: list[int]) -> None:
    """Copy (weight, bias) pairs (or Linear layers) ``src`` into the Linear layers ``dst``."""
    pairs = [(m.weight, m.bias) if isinstance(m, torch.nn.Linear) else m for m in src]
    have = [tuple(w.shape) for w, _ in pairs]
    want = [tuple(m.weight.shape) for m in dst]
    if have != want:
        raise ValueError(
            f"the RLlib module's policy has linear layers {have}, not the MLP {hiddens} -> "
            f"{want}; cannot save it as rlperf's actor"
        )
    with torch.no_grad():
        for (w, b), m in zip(pairs, dst, strict=True):
            m.weight.copy_(w)
            m.bias.copy_(b)
