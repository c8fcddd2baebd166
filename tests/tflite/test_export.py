"""The TFLite export (rlperf.tflite.export): the Keras rebuild and fp32 TFLite of the study's
models reproduce the torch logits, near ties are tolerated and nothing else, and a wrong
rebuild fails the export (real TensorFlow, LiteRT). The variants of a trained policy and
the edge job are in tests/edge/test_edge_pipeline.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from rlperf.errors import ExportVerificationError
from tests.conftest import CONF

pytestmark = pytest.mark.slow

TOL = 1e-4


def _model_cfg(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONF / "model" / f"{name}.yaml").read_text())


def _random_net(name: str, seed: int = 0) -> Any:
    import torch

    from rlperf.models.vision_net import VisionNet

    mc = _model_cfg(name)
    torch.manual_seed(seed)
    net = VisionNet((mc["dim"], mc["dim"], 4), 6, mc["conv_filters"]).eval()
    with torch.no_grad():  # non-zero biases, so bias handling is checked too
        for m in list(net.pi_trunk.convs) + list(net.vf_trunk.convs) + [net.pi_logits, net.vf_out]:
            m.bias.normal_(0.0, 0.05)
    return net


def _frames(dim: int, count: int, seed: int) -> np.ndarray:
    from rlperf.tflite.calibration import collect_observations

    return collect_observations({"dim": dim, "max_episode_steps": 120}, count, seed)[0]


@pytest.mark.parametrize("name", ["model1", "model3", "model4"])
def test_export_equivalence_study_models(name: str) -> None:
    """Keras rebuild and fp32 TFLite reproduce the torch logits (random weights)."""
    from rlperf.tflite.convert import convert_keras
    from rlperf.tflite.export import export_policy, torch_outputs
    from rlperf.tflite.runtime import TfliteActor

    net = _random_net(name)
    obs = _frames(net.obs_shape[0], 24, seed=5)
    heads = "both" if name == "model1" else "policy"
    model, check = export_policy(net, obs, heads, TOL)
    assert check.passed
    assert check.agreement == 1.0
    assert check.max_abs_logit_err <= TOL
    if heads == "both":
        assert check.value_max_abs_err is not None and check.value_max_abs_err <= TOL
    assert model.inputs[0].shape == (1, *net.obs_shape)

    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"rlperf-test-{name}-{os.getpid()}.tflite"
    tmp.write_bytes(convert_keras(model, "fp32"))
    try:
        actor = TfliteActor(tmp, 6)
        n_convs = len(net.conv_filters)
        expected_convs = (n_convs + 1) * (2 if heads == "both" else 1)
        assert actor.info.op_counts["CONV_2D"] == expected_convs
        assert actor.delegate.status == "full"  # XNNPACK takes every fp32 op
        ref = torch_outputs(net, obs)[0]
        got = actor.logits(obs)
        assert (got.argmax(1) == ref.argmax(1)).all()
        assert np.abs(got - ref).max() <= TOL
    finally:
        tmp.unlink(missing_ok=True)


def test_compare_logits_tolerates_only_near_ties() -> None:
    from rlperf.tflite.export import compare_logits

    ref = np.array([[1.0, 1.0 + 1e-6, 0.0], [2.0, 0.0, 0.0]])
    flipped_tie = np.array([[1.0 + 2e-6, 1.0, 0.0], [2.0, 0.0, 0.0]])
    check = compare_logits(flipped_tie, ref, TOL)
    assert check.near_ties == 1 and check.agreement == 0.5 and check.passed
    flipped_clear = np.array([[1.0, 1.0 + 1e-6, 0.0], [0.0, 2.0, 0.0]])
    assert not compare_logits(flipped_clear, ref, TOL).passed


def test_export_fails_loudly_on_wrong_weights(monkeypatch) -> None:
    """A rebuild that forgets the module's /255 scaling must fail the export, not ship."""
    import rlperf.tflite.export as export

    real = export.build_keras_policy

    def broken(net: Any, heads: str = "policy", batch_size: int | None = 1) -> Any:
        model = real(net, heads, batch_size)
        layer = model.get_layer("pi_conv0")
        kernel, bias = layer.get_weights()
        layer.set_weights([kernel * 255.0, bias])  # scaling not folded
        return model

    monkeypatch.setattr(export, "build_keras_policy", broken)
    net = _random_net("model1")
    with pytest.raises(ExportVerificationError, match="max abs logit error"):
        export.export_policy(net, _frames(84, 8, seed=2), "policy", TOL)
