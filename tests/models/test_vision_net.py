"""The study's VisionNetwork: parameter counts, shapes, padding, RLModule, save/load."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from rlperf.errors import PolicyLoadError
from rlperf.layout import POLICY_FILE
from rlperf.models.policy_file import (
    count_trainable_params,
    load_policy,
    save_policy,
)
from rlperf.models.shapes import ConvLayerShape, conv_stack_shapes
from rlperf.models.vision_net import VisionNet
from tests.conftest import CONF


def vision_net_param_count(
    dim: int, in_channels: int, conv_filters: Sequence[Sequence[Any]], num_actions: int
) -> int:
    """The study's parameter count by formula (the oracle the built network is checked
    against): two conv trunks, a 1x1 logits conv and a 1x1 value conv."""
    layers: list[ConvLayerShape] = conv_stack_shapes(dim, in_channels, conv_filters)
    trunk = sum(ly.out_channels * ly.in_channels * ly.kernel**2 + ly.out_channels for ly in layers)
    feat = layers[-1].out_channels
    return 2 * trunk + (feat * num_actions + num_actions) + (feat + 1)


SPEC_PARAMS = {"model1": 2_009_447, "model3": 1_108_359, "model4": 2_042_279}


def model_cfg(name: str) -> dict:
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(CONF / "model" / f"{name}.yaml")
    return {"dim": cfg.dim, "conv_filters": OmegaConf.to_container(cfg.conv_filters)}


def build(name: str) -> VisionNet:
    m = model_cfg(name)
    return VisionNet((m["dim"], m["dim"], 4), 6, m["conv_filters"])


@pytest.mark.parametrize("name", sorted(SPEC_PARAMS))
def test_parameter_counts_equal_spec(name: str) -> None:
    net = build(name)
    assert count_trainable_params(net) == SPEC_PARAMS[name]
    m = model_cfg(name)
    assert vision_net_param_count(m["dim"], 4, m["conv_filters"], 6) == SPEC_PARAMS[name]


@pytest.mark.parametrize(
    "name", ["model1", "model2", "model3", "model4", "model5", "model6", "tiny", "tiny2"]
)
def test_output_shapes_and_separate_trunks(name: str) -> None:
    net = build(name)
    dim = net.obs_shape[0]
    obs = torch.randint(0, 256, (3, dim, dim, 4), dtype=torch.uint8)
    assert net.logits(obs).shape == (3, 6)
    assert net.value(obs).shape == (3,)
    # No shared layers: the value trunk's parameters are distinct tensors.
    pi = {id(p) for p in net.pi_trunk.parameters()}
    assert not pi & {id(p) for p in net.vf_trunk.parameters()}
    assert count_trainable_params(net) == vision_net_param_count(
        dim, 4, model_cfg(name)["conv_filters"], 6
    )


def test_same_padding_puts_extra_pixel_after() -> None:
    layers = conv_stack_shapes(84, 4, model_cfg("model1")["conv_filters"])
    # 84 -k8 s4-> 21 (total pad 4: 2/2); 21 -k4 s2-> 11 (total pad 3: 1 before, 2 after).
    assert [(ly.pad_before, ly.pad_after, ly.out_hw) for ly in layers] == [
        (2, 2, 21),
        (1, 2, 11),
        (0, 0, 1),
    ]


def reference_logits(net: VisionNet, obs: torch.Tensor) -> torch.Tensor:
    """Plain conv layers with explicit TF padding (no GEMM shortcut)."""
    layers = conv_stack_shapes(net.obs_shape[0], 4, net.conv_filters)
    x = obs.float().permute(0, 3, 1, 2) / 255.0
    for ly, conv in zip(layers, net.pi_trunk.convs, strict=True):
        x = F.relu(conv(F.pad(x, (ly.pad_before, ly.pad_after) * 2)))
    return net.pi_logits(x).flatten(1)


@pytest.mark.parametrize("name", ["model1", "model3", "tiny"])
def test_forward_matches_plain_conv_reference(name: str) -> None:
    torch.manual_seed(0)
    net = build(name)
    for p in net.parameters():  # non-zero biases so every term matters
        torch.nn.init.uniform_(p, -0.05, 0.05)
    dim = net.obs_shape[0]
    obs = torch.randint(0, 256, (4, dim, dim, 4), dtype=torch.uint8)
    with torch.inference_mode():
        assert torch.allclose(net.logits(obs), reference_logits(net, obs), atol=1e-5)


def test_input_is_made_contiguous_nchw() -> None:
    obs = torch.randint(0, 256, (1, 84, 84, 4), dtype=torch.uint8)
    x = VisionNet.to_nchw(obs)
    assert x.shape == (1, 4, 84, 84) and x.is_contiguous() and x.dtype == torch.float32
    assert float(x.max()) <= 1.0


def test_greedy_action_is_argmax() -> None:
    net = build("model1")
    obs = np.random.default_rng(0).integers(0, 256, (84, 84, 4), dtype=np.uint8)
    with torch.inference_mode():
        expected = int(net.logits(torch.from_numpy(obs)[None]).argmax())
    assert net.greedy_action(obs) == expected


def test_save_load_roundtrip_and_errors(tmp_path) -> None:
    net = build("tiny")
    path = save_policy(net, tmp_path / "ckpt" / POLICY_FILE)
    again = load_policy(tmp_path / "ckpt")
    obs = torch.randint(0, 256, (5, 42, 42, 4), dtype=torch.uint8)
    with torch.inference_mode():
        assert torch.equal(net.logits(obs), again.logits(obs))
    with pytest.raises(PolicyLoadError, match="no rlperf policy at"):
        load_policy(tmp_path / "nowhere")
    truncated = tmp_path / "bad" / POLICY_FILE
    truncated.parent.mkdir()
    truncated.write_bytes(path.read_bytes()[:200])
    with pytest.raises(PolicyLoadError, match="cannot read policy file"):
        load_policy(truncated)
    payload = torch.load(path, weights_only=True)
    payload["format_version"] = 99
    torch.save(payload, tmp_path / "v99.pt")
    with pytest.raises(PolicyLoadError, match="format version 99"):
        load_policy(tmp_path / "v99.pt")


def test_rl_module_wraps_the_network() -> None:
    import gymnasium as gym
    from ray.rllib.core.columns import Columns

    from rlperf.models.rl_module import VisionNetRLModule

    m = model_cfg("model1")
    module = VisionNetRLModule(
        observation_space=gym.spaces.Box(0, 255, (84, 84, 4), np.uint8),
        action_space=gym.spaces.Discrete(6),
        model_config={"conv_filters": m["conv_filters"]},
    )
    assert count_trainable_params(module) == SPEC_PARAMS["model1"]
    obs = torch.randint(0, 256, (2, 84, 84, 4), dtype=torch.uint8)
    out = module.forward_inference({Columns.OBS: obs})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 6)
    assert module.compute_values({Columns.OBS: obs}).shape == (2,)
