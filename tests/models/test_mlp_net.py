"""MLP policies (rlperf.models.mlp_net), the policy file with a model kind, learner resources."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlperf.algos import plan_resources
from rlperf.errors import ConfigError, InfeasibleError
from rlperf.layout import POLICY_FILE
from rlperf.models.mlp_net import MlpNet, space_spec
from rlperf.models.policy_file import load_policy, save_policy
from rlperf.models.vision_net import VisionNet
from rlperf.resources.plan import Machine, check_feasible
from rlperf.validation.validate import validate_config

TWO_CORES = Machine(cpus=(0, 1), gpus=0, gpu_source="test")
TWO_GPUS = Machine(cpus=tuple(range(16)), gpus=2, gpu_source="test")


def test_discrete_observations_are_one_hot_encoded() -> None:
    net = MlpNet.for_spaces(gym.spaces.Discrete(5), gym.spaces.Discrete(3), [8], "tanh")
    states = torch.tensor([0, 3, 4, 3])
    x = net.encode(states)
    assert x.dtype == torch.float32 and x.shape == (4, 5)
    np.testing.assert_array_equal(x.numpy(), np.eye(5, dtype=np.float32)[[0, 3, 4, 3]])
    torch.testing.assert_close(net.logits(states), net.pi_net(x))
    logits = net.logits(states)
    assert logits.shape == (4, 3) and torch.equal(logits[1], logits[3])
    assert net.value(states).shape == (4,)


def test_box_actions_get_mean_and_log_std_and_a_greedy_action_in_bounds() -> None:
    obs = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    act = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    net = MlpNet.for_spaces(obs, act, [16, 16], "relu")
    assert net.num_outputs == 2  # RLlib's TorchDiagGaussian inputs: mean, log_std
    with torch.no_grad():
        net.pi_net[-1].weight.zero_()
        net.pi_net[-1].bias.copy_(torch.tensor([0.5, -1.0]))
    # RLlib maps a mean in [-1, 1] onto [low, high] (normalize_actions): 0.5 -> 1.0.
    np.testing.assert_allclose(net.greedy_action(np.zeros(3, np.float32)), [1.0])
    with torch.no_grad():
        net.pi_net[-1].bias.copy_(torch.tensor([3.0, -1.0]))
    np.testing.assert_allclose(net.greedy_action(np.zeros(3, np.float32)), [2.0])  # clipped


@pytest.mark.parametrize(
    ("obs_space", "act_space"),
    [
        (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)),
        (gym.spaces.Discrete(16), gym.spaces.Discrete(4)),
        (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,))),
    ],
)
def test_mlp_policy_file_reloads_without_ray_and_acts_the_same(tmp_path, obs_space, act_space):
    torch.manual_seed(0)
    net = MlpNet.for_spaces(obs_space, act_space, [32, 32], "tanh")
    path = save_policy(net, tmp_path / POLICY_FILE, extra={"iteration": 3})
    loaded = load_policy(path)
    assert isinstance(loaded, MlpNet) and loaded.model_config() == net.model_config()
    obs_space.seed(1)
    observations = [obs_space.sample() for _ in range(50)]
    batch = torch.as_tensor(np.stack(observations))
    torch.testing.assert_close(loaded.logits(batch), net.logits(batch), rtol=0, atol=0)
    for o in observations:
        np.testing.assert_array_equal(loaded.greedy_action(o), net.greedy_action(o))
    payload = torch.load(path, weights_only=True)
    assert payload["format_version"] == 2 and payload["model_config"]["kind"] == "mlp"
    assert payload["model_config"]["obs"] == space_spec(obs_space)


def test_format_1_vision_files_still_load(tmp_path) -> None:
    net = VisionNet((42, 42, 4), 6, [[4, [8, 8], 4], [8, [4, 4], 2], [16, [6, 6], 1]])
    old = net.model_config()
    del old["kind"]  # rlperf 0.1 wrote no kind
    torch.save(
        {"format_version": 1, "rlperf_version": "0.1.0", "model_config": old,
         "state_dict": net.state_dict(), "extra": {}},
        tmp_path / POLICY_FILE,
    )  # fmt: skip
    loaded = load_policy(tmp_path)
    assert isinstance(loaded, VisionNet)
    frame = np.random.default_rng(0).integers(0, 256, (42, 42, 4), dtype=np.uint8)
    assert loaded.greedy_action(frame) == net.greedy_action(frame)


# ------------------------------------------------------------------ learners


def test_learner_actors_take_a_cpu_each_and_are_refused_before_ray(compose_cfg) -> None:
    plan = plan_resources(compose_cfg("learners=2", "workers=1"))
    assert (plan.num_learners, plan.gpus_per_learner, plan.cpus_per_learner) == (2, 0.0, 1.0)
    assert plan.required_cpus == 4  # driver + 1 env runner + 2 learners
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, TWO_CORES, overcommit_cpus=False)
    msg = str(err.value)
    assert "workers=1 learners=2 needs 4 CPU bundles" in msg
    assert "+ 2 for 2 learner actor(s)" in msg and "Ray will have 2 CPUs" in msg
    check_feasible(plan, TWO_CORES, overcommit_cpus=True)
    check_feasible(plan_resources(compose_cfg("learners=1", "workers=0")), TWO_CORES, False)
    default = plan_resources(compose_cfg())
    assert default.num_learners == 0 and default.required_cpus == 2  # PPO learns in the driver


def test_learners_reconcile_with_gpu_layouts(compose_cfg) -> None:
    both = plan_resources(compose_cfg("gpu_layout=both_driver"))
    assert (both.num_learners, both.gpus_per_learner, both.cpus_per_learner) == (2, 1.0, 0.0)
    assert both.required_cpus == 2  # GPU learners take no CPU bundle of their own
    assert plan_resources(compose_cfg("gpu_layout=both_driver", "learners=2")) == both
    check_feasible(both, TWO_GPUS, overcommit_cpus=False)
    with pytest.raises(ConfigError, match="learners=1 with a GPU layout that gives the learners 2"):
        validate_config(compose_cfg("gpu_layout=both_driver", "learners=1"))
    one = plan_resources(compose_cfg("gpu_layout=gpu0_driver", "learners=1"))
    assert (one.num_learners, one.gpus_per_learner) == (1, 1.0)
    local = plan_resources(compose_cfg("gpu_layout=gpu0_driver"))
    assert (local.num_learners, local.gpus_per_learner) == (0, 1.0)


def test_scale_keys_compose_and_validate(compose_cfg) -> None:
    cfg = compose_cfg("env_runner.num_envs=8", "env.engine=gymnasium_async",
                      "env_runner.torch_threads=2", "learners=0")  # fmt: skip
    validate_config(cfg)
    plan = plan_resources(cfg)
    assert (plan.envs_per_env_runner, plan.vectorize_mode) == (8, "async")
    assert plan.env_runner_torch_threads == 2
    with pytest.raises(Exception, match="engine"):
        compose_cfg("env.engine=threads")
    for bad, key in (("env_runner.torch_threads=0", "env_runner.torch_threads"),
                     ("learners=-1", "learners=-1")):  # fmt: skip
        with pytest.raises(ConfigError, match=key):
            validate_config(compose_cfg(bad))
