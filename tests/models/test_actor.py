"""The reference actor of Box policies (rlperf.models.actor), SAC's module acting with it,
its actor saved as rlperf's policy file, and the probe's action check
(docs/rollout.md#continuous-actions)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlperf.errors import CheckpointError
from rlperf.layout import POLICY_FILE
from rlperf.models.actor import action_range, box_actions
from rlperf.models.mlp_net import MlpNet, space_spec
from rlperf.models.policy_file import load_policy, save_policy
from rlperf.runs.probe import check_probe, read_probe, torch_policy_fns, write_probe

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
TWO_D = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def test_reference_actor_of_each_head() -> None:
    spec = space_spec(TWO_D)
    inputs = np.array([[0.0, 0.5, -9.0, -9.0], [2.0, -3.0, 0.0, 0.0]])  # [mean (2), log_std (2)]
    # tanh: low + (tanh(mean) + 1) (high - low) / 2; log_std plays no part.
    expected = np.array([[0.0, (np.tanh(0.5) + 1) / 2], [2 * np.tanh(2.0), (np.tanh(-3) + 1) / 2]])
    np.testing.assert_allclose(box_actions(inputs, spec, "tanh"), expected, rtol=1e-6)
    # clip: the mean taken as lying in [-1, 1], mapped linearly, clipped.
    np.testing.assert_allclose(
        box_actions(inputs, spec, "clip"), [[0.0, 0.75], [2.0, 0.0]], rtol=1e-6
    )
    assert box_actions(inputs, spec, "tanh").dtype == np.float32
    np.testing.assert_allclose(action_range(spec), [4.0, 1.0])
    # An unbounded dimension keeps tanh(mean) (tanh) or the mean (clip), as RLlib does.
    free = space_spec(gym.spaces.Box(-np.inf, np.inf, (1,), np.float32))
    np.testing.assert_allclose(box_actions([[3.0, 0.0]], free, "clip"), [[3.0]])
    np.testing.assert_allclose(box_actions([[3.0, 0.0]], free, "tanh"), [[np.tanh(3.0)]], 1e-6)
    with pytest.raises(ValueError, match="squash='sigmoid'"):
        box_actions(inputs, spec, "sigmoid")


def test_rllib_greedy_sac_action_is_not_the_reference_but_rlperfs_module_is() -> None:
    """RLlib 2.60's TorchSquashedGaussian.to_deterministic() gives the unsquashed mean
    (logits [2, 0] -> 2.0); rlperf's SAC module's gives tanh(2) = 0.964."""
    from ray.rllib.core.distribution.torch.torch_distribution import TorchSquashedGaussian

    from rlperf.models.rl_module import ReferenceSquashedGaussian

    logits = torch.tensor([[2.0, 0.0]])
    rllib = TorchSquashedGaussian.from_logits(logits).to_deterministic().sample()
    ours = ReferenceSquashedGaussian.from_logits(logits).to_deterministic().sample()
    assert float(rllib) == pytest.approx(2.0)
    assert float(ours) == pytest.approx(np.tanh(2.0))


def _sac_module(hiddens: list[int], action_space: gym.spaces.Box) -> Any:
    """rlperf's SAC module as SACConfig builds it (RLlib's defaults, the MLP's hiddens)."""
    from ray.rllib.algorithms.sac import SACConfig
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rlperf.models.rl_module import SacRLModule

    torch.manual_seed(0)
    model = {"fcnet_hiddens": hiddens, "fcnet_activation": "relu"}
    config = SACConfig().rl_module(
        rl_module_spec=RLModuleSpec(module_class=SacRLModule, model_config=model)
    )
    spec = config.get_rl_module_spec(spaces={DEFAULT_MODULE_ID: (OBS, action_space)})
    return spec.build()


@pytest.mark.parametrize("action_space", [gym.spaces.Box(-2.0, 2.0, (1,), np.float32), TWO_D])
def test_sac_actor_saved_as_policy_file_acts_as_the_module(tmp_path, action_space) -> None:
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.spaces.space_utils import unsquash_action

    module = _sac_module([32, 16], action_space)
    net = module.actor_net([32, 16], "relu")
    assert (net.squash, net.has_value) == ("tanh", False)
    path = save_policy(net, tmp_path / POLICY_FILE)
    loaded = load_policy(path)
    obs = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    with torch.inference_mode():
        dist_inputs = module.forward_inference({Columns.OBS: torch.from_numpy(obs)})[
            Columns.ACTION_DIST_INPUTS
        ]
    np.testing.assert_allclose(loaded.logits(torch.from_numpy(obs)).detach(), dist_inputs, 1e-6)
    # RLlib's greedy path with rlperf's module: to_deterministic, then unsquash_action.
    dist = module.get_inference_action_dist_cls().from_logits(dist_inputs)
    rllib_actions = unsquash_action(dist.to_deterministic().sample().numpy(), action_space)
    np.testing.assert_allclose(loaded.actions_of(dist_inputs.numpy()), rllib_actions, atol=1e-6)
    np.testing.assert_allclose(loaded.greedy_action(obs[0]), rllib_actions[0], atol=1e-6)
    with pytest.raises(ValueError, match="without a value network"):
        loaded.value(torch.from_numpy(obs))
    # An actor of other layers than the model's is refused, naming both.
    with pytest.raises(ValueError, match="linear layers"):
        module.actor_net([64], "relu")


def test_probe_checks_box_actions_against_the_range(tmp_path) -> None:
    torch.manual_seed(0)
    net = MlpNet.for_spaces(OBS, TWO_D, [16], "tanh", squash="tanh", value=False)
    obs = np.random.default_rng(1).uniform(-1, 1, (32, 3)).astype(np.float32)
    logits_of, device, actions_of = torch_policy_fns(net)
    assert actions_of is not None
    logits = logits_of(obs)
    write_probe(tmp_path, obs, logits, net.actions_of(logits), action_range(net.action_spec))
    probe = read_probe(tmp_path)
    assert probe is not None and probe.continuous
    out = check_probe(probe, logits_of, device, actions_of)
    assert out is not None and out["max_action_err_of_range"] <= 1e-6
    assert "greedy_agreement" not in out  # no argmax for a Box policy
    # The same network acting with the Gaussian head's rule (clip(mean)) is caught.
    clip = MlpNet.from_model_config({**net.model_config(), "squash": "clip"})
    clip.load_state_dict(net.state_dict())
    with pytest.raises(CheckpointError, match="does not act as the reference actor"):
        check_probe(probe, logits_of, device, *torch_policy_fns(clip)[2:])


@pytest.mark.parametrize("squash", ["tanh", "clip"])
def test_keras_export_of_the_reference_actor(squash: str) -> None:
    """The exported graph computes the reference actor (saturated means too: the clip of a
    Gaussian head, tanh's flat ends) from FULLY_CONNECTED and activation ops only."""
    from rlperf.tflite.export import build_keras_policy, torch_outputs

    torch.manual_seed(1)
    net = MlpNet.for_spaces(OBS, TWO_D, [16], "tanh", squash=squash, value=squash == "clip")
    with torch.no_grad():
        net.pi_net[-1].weight.mul_(8.0)  # means well beyond [-1, 1] on some observations
    obs = np.random.default_rng(2).uniform(-1, 1, (256, 3)).astype(np.float32)
    reference = torch_outputs(net, obs)[0]
    mean = net.logits(torch.from_numpy(obs)).detach().numpy()[:, :2]
    assert (np.abs(mean) > 1).any() and (np.abs(mean) < 1).any()
    np.testing.assert_allclose(reference, box_actions(net.logits(torch.from_numpy(obs)).detach(),
                               net.action_spec, squash))  # fmt: skip
    model = build_keras_policy(net, batch_size=None)
    np.testing.assert_allclose(model.predict(obs, verbose=0), reference, atol=1e-5)
    kinds = {type(layer).__name__ for layer in model.layers}
    assert kinds <= {"InputLayer", "Dense", "Activation"}, kinds


def test_dqn_q_network_with_dueling_heads_folds_into_one_layer(tmp_path) -> None:
    """A dueling DQN's ``V + A - mean(A)`` is linear in the encoder's features: the saved
    MlpNet's outputs are the module's Q-values (large ones too), its argmax the greedy action."""
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rlperf.models.rl_module import DqnRLModule

    torch.manual_seed(0)
    model = {"fcnet_hiddens": [32, 32], "fcnet_activation": "tanh"}
    config = DQNConfig().rl_module(
        rl_module_spec=RLModuleSpec(module_class=DqnRLModule, model_config=model)
    )
    actions = gym.spaces.Discrete(4)
    module = config.get_rl_module_spec(spaces={DEFAULT_MODULE_ID: (OBS, actions)}).build()
    assert module.uses_dueling
    with torch.no_grad():  # Q-values of ~100, as a trained CartPole DQN's
        module.vf.net.mlp[0].bias.fill_(100.0)
    obs = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32))
    with torch.inference_mode():
        out = module.forward_inference({Columns.OBS: obs})
    q = out[Columns.ACTION_DIST_INPUTS].numpy()
    assert np.abs(q).max() > 90
    net = load_policy(save_policy(module.actor_net([32, 32], "tanh"), tmp_path / "p.pt"))
    saved = net.logits(obs).detach().numpy()
    np.testing.assert_allclose(saved, q, rtol=0, atol=1e-5 * np.abs(q).max())
    assert (saved.argmax(axis=1) == out[Columns.ACTIONS].numpy()).all()
    assert not net.has_value and net.num_outputs == 4
