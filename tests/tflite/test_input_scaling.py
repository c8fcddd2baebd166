"""Per-feature input scaling of a Box MLP policy (``edge.input_scaling=per_feature``): the
normalization folded into the first layer computes the same actions, it travels inside the
``.tflite`` file as metadata, and every reader of the file applies it before the input's
quantization (docs/edge.md#per-feature-input-scaling). The return-level effect on the
committed Pendulum policy: tests/edge/test_pendulum_policy.py."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlperf.models.mlp_net import MlpNet
from rlperf.tflite.artifacts import input_normalization
from rlperf.tflite.tflite_model import InputNormalization, read_tflite, with_input_normalization

#: Features of three ranges: an angle's cos and sin, an angular velocity, a position.
OBS = gym.spaces.Box(np.array([-1, -1, -8, -50], np.float32), np.array([1, 1, 8, 50], np.float32))
ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


@pytest.fixture(scope="module")
def policy() -> tuple[MlpNet, np.ndarray]:
    torch.manual_seed(0)
    net = MlpNet.for_spaces(OBS, ACT, [32, 32], "relu", squash="tanh", value=True)
    obs = np.random.default_rng(0).uniform(OBS.low, OBS.high, (256, 4)).astype(np.float32)
    return net, obs


def test_the_folded_first_layer_computes_the_same_actions(policy) -> None:
    from rlperf.tflite.export import build_keras_policy, torch_outputs

    net, obs = policy
    norm = input_normalization("per_feature", net, obs[:200], (OBS.low, OBS.high))
    assert norm is not None
    np.testing.assert_allclose(norm.half_width, [1, 1, 8, 50], rtol=1e-6)  # the bounds
    z = norm.apply(obs)
    assert np.abs(z).max() <= 1.0 + 1e-6 and np.abs(z).max() > 0.9
    reference, values = torch_outputs(net, obs, heads="both")
    model = build_keras_policy(net, "both", batch_size=None, input_normalization=norm)
    actions, value = model.predict(z, verbose=0)
    np.testing.assert_allclose(actions, reference, atol=1e-5)
    np.testing.assert_allclose(value.ravel(), values, atol=1e-4)  # both heads folded
    # Without finite bounds a feature's range is the calibration's, with headroom beyond it
    # (another episode reaches further; the int8 input clips what lies outside).
    from rlperf.tflite.artifacts import INPUT_HEADROOM

    data = input_normalization("per_feature", net, obs[:200], None)
    assert data is not None
    seen = (obs[:200].max(axis=0) - obs[:200].min(axis=0)) / 2
    np.testing.assert_allclose(data.half_width, INPUT_HEADROOM * seen, rtol=1e-5)
    # Off, or where it does not apply: no normalization.
    assert input_normalization("per_tensor", net, obs, None) is None
    frames = MlpNet.for_spaces(gym.spaces.Discrete(5), ACT, [8], "tanh", squash="tanh")
    assert input_normalization("per_feature", frames, np.arange(5), None) is None
    with pytest.raises(ValueError, match="edge.input_scaling='each'"):
        input_normalization("each", net, obs, None)


def test_the_file_carries_it_and_every_reader_applies_it(policy, tmp_path: Path) -> None:
    from rlperf.edge.edgetpu import _keep_input_normalization
    from rlperf.tflite.convert import convert_keras
    from rlperf.tflite.export import build_keras_policy, torch_outputs
    from rlperf.tflite.runtime import TfliteActor

    net, obs = policy
    norm = InputNormalization.of_range(OBS.low, OBS.high)
    model = build_keras_policy(net, batch_size=1, input_normalization=norm)
    plain = tmp_path / "plain.tflite"
    plain.write_bytes(convert_keras(model, "fp32"))
    assert read_tflite(plain).input_normalization is None
    tagged = tmp_path / "tagged.tflite"
    tagged.write_bytes(with_input_normalization(plain.read_bytes(), norm))
    assert read_tflite(tagged).input_normalization == norm  # read back exactly
    again = with_input_normalization(tagged.read_bytes(), norm)  # replaced, not added twice
    assert read_tflite(again).input_normalization == norm and len(again) == tagged.stat().st_size
    reference = torch_outputs(net, obs)[0]
    # The actor on raw observations: the file's normalization applied before the invoke.
    actor = TfliteActor(tagged, 2, continuous=True)
    np.testing.assert_allclose(actor.logits(obs), reference, atol=1e-5)
    # The same graph without the metadata is fed raw observations: wrong actions.
    blind = TfliteActor(plain, 2, continuous=True)
    assert np.abs(blind.logits(obs) - reference).max() > 0.1
    # A compiled file that lost the metadata gets it back from its source.
    _keep_input_normalization(tagged, plain)
    assert read_tflite(plain).input_normalization == norm
