"""Building the compressed variants (rlperf.tflite.compress, rlperf.tflite.finetune,
rlperf.tflite.artifacts): structured pruning of MLP and image policies, the guard of the
distillation fine-tune, and the compressed files' names (docs/compression.md). The edge
stage on those variants is in tests/edge/test_edge_compression.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def test_structured_pruning_shrinks_the_layers_and_keeps_the_actions(cartpole_policy_run) -> None:
    from rlperf.models.policy_file import count_trainable_params, load_policy
    from rlperf.tflite.calibration import collect_observations
    from rlperf.tflite.compress import structured_pruned
    from rlperf.tflite.export import torch_outputs

    net = load_policy(cartpole_policy_run["policy"])
    env = {"kind": "gym", "id": "CartPole-v1", "config": None, "max_episode_steps": None}
    obs = collect_observations(env, 400, seed=3)[0]
    student, fit = structured_pruned(net, 0.5, obs[:300], {"steps": 600, "lr": 3e-3, "batch": 32})
    assert student.hiddens == [32, 32]
    assert count_trainable_params(student) == 2 * (4 * 32 + 32 + 32 * 32 + 32) + 66 + 33
    held_out = obs[300:]
    same = torch_outputs(student, held_out)[0].argmax(1) == torch_outputs(net, held_out)[0].argmax(
        1
    )
    assert same.mean() >= 0.95 and fit["distill_loss"] < 1.0
    # Fine-tuning helped on the observations it held out of the fit.
    assert fit["holdout_loss_kept"] < 0.5 * fit["holdout_loss_start"]


def test_guard_keeps_the_best_weights_and_halves_the_rate_on_a_rise() -> None:
    from rlperf.tflite.finetune import RISE, Guard

    weights, rates = {"w": 0}, []
    guard = Guard(lambda: dict(weights), weights.update, rates.append, 1e-2)
    for step, (w, loss) in enumerate([(0, 4.0), (1, 2.0), (2, 1.0), (3, RISE * 1.0 + 0.1)]):
        weights["w"] = w
        guard.check(step, loss)
    # The rise restored step 2's weights and halved the rate.
    assert weights == {"w": 2} and rates == [5e-3]
    weights["w"] = 4
    guard.check(4, float("nan"))  # a diverged fit: the same
    assert weights == {"w": 2} and rates == [5e-3, 2.5e-3]
    weights["w"] = 5
    guard.check(5, 1.2)  # worse than the best, not a rise: trained on, not kept
    assert guard.finish() == 1.0 and weights == {"w": 2}
    assert guard.report() == {"holdout_loss_start": 4.0, "holdout_loss_kept": 1.0,
                              "kept_step": 2, "lr_halvings": 2, "final_lr": 2.5e-3}  # fmt: skip


def test_guard_keeps_nothing_from_before_its_arm_step() -> None:
    from rlperf.tflite.finetune import Guard

    weights, rates = {"w": 0}, []
    guard = Guard(lambda: dict(weights), weights.update, rates.append, 1.0, arm_step=10)
    for step, loss in [(0, 0.5), (5, 0.9), (10, 3.0), (15, 2.0), (20, 9.0)]:
        weights["w"] = step
        guard.check(step, loss)
    # Before step 10 (a sparsity ramp: the error rises by design) nothing is kept and the
    # rise at 5 halves nothing; armed at 10, the model as it is counts, and the rise at
    # 20 brings back step 15's weights.
    assert rates == [0.5] and guard.finish() == 2.0 and weights == {"w": 15}
    assert guard.report()["holdout_loss_start"] == 0.5


def test_a_diverging_distillation_steps_its_rate_down_until_it_helps(cartpole_policy_run) -> None:
    from rlperf.models.policy_file import load_policy
    from rlperf.tflite.calibration import collect_observations
    from rlperf.tflite.compress import structured_pruned

    net = load_policy(cartpole_policy_run["policy"])
    env = {"kind": "gym", "id": "CartPole-v1", "config": None, "max_episode_steps": None}
    obs = collect_observations(env, 300, seed=3)[0]
    # A rate 10 000 times the default: each rise is undone and the rate halved until it
    # helps; what is kept is better than the sliced model before the fit.
    _, fit = structured_pruned(net, 0.5, obs, {"steps": 300, "lr": 30.0, "batch": 32})
    assert fit["lr_halvings"] >= 5 and fit["final_lr"] <= 30.0 / 32
    assert fit["holdout_loss_kept"] < 0.1 * fit["holdout_loss_start"]


def test_channel_pruning_of_an_image_policy_slices_every_conv_and_head() -> None:
    import torch

    from rlperf.models.vision_net import VisionNet
    from rlperf.tflite.compress import structured_pruned

    torch.manual_seed(0)
    net = VisionNet((42, 42, 4), 6, [[8, [8, 8], 4], [16, [4, 4], 2], [32, [6, 6], 1]])
    obs = np.random.default_rng(0).integers(0, 256, (96, 42, 42, 4), dtype=np.uint8)
    x = torch.from_numpy(obs)
    # Keeping every channel is an exact copy: the slicing keeps each filter with its
    # inputs and the heads with theirs.
    whole, _ = structured_pruned(net, 1.0, obs, {"steps": 0, "lr": 1e-3, "batch": 16})
    with torch.no_grad():
        assert torch.allclose(whole.logits(x), net.logits(x), atol=1e-5)
        assert torch.allclose(whole.value(x), net.value(x), atol=1e-5)
    # Half the channels: the strongest filters kept (their weights are the originals'),
    # then distillation brings the outputs back towards the teacher's.
    sliced, _ = structured_pruned(net, 0.5, obs, {"steps": 0, "lr": 1e-3, "batch": 16})
    assert [f[0] for f in sliced.conv_filters] == [4, 8, 16]
    norms = net.pi_trunk.convs[0].weight.flatten(1).norm(dim=1)
    kept = torch.sort(torch.argsort(norms, descending=True)[:4]).values
    assert torch.equal(sliced.pi_trunk.convs[0].weight, net.pi_trunk.convs[0].weight[kept])

    def error(student: Any) -> float:
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(student.logits(x), net.logits(x)))

    trained, _ = structured_pruned(net, 0.5, obs, {"steps": 150, "lr": 3e-3, "batch": 16})
    assert error(trained) < 0.5 * error(sliced)


def test_compressed_file_names_keep_their_cache_key() -> None:
    """The names of compressed files (and so the caches already built) change only with the
    build recipe (``COMPRESSION_RECIPE``, 2 since QAT's input range covers the observation
    space): the hash of the fine-tune settings, the calibration set, the int8 I/O and it."""
    from omegaconf import OmegaConf

    from rlperf.tflite.artifacts import compressed_file_name, variant_file_name
    from rlperf.tflite.finetune import finetune_settings

    default = OmegaConf.create(
        {"edge": {"finetune_steps": 600, "finetune_lr": [3e-3, 1e-3, 3e-4], "finetune_batch": 32}}
    )
    settings = finetune_settings(default)
    assert settings == {"steps": 600, "lr": [3e-3, 1e-3, 3e-4], "batch": 32,
                        "holdout": 0.2, "rise": 1.5}  # fmt: skip
    name = compressed_file_name("policy", "tflite_qat", "uint8", "0123456789", settings)
    assert name == "policy-qat-4c0f103378.tflite"
    normalized = compressed_file_name("policy", "tflite_qat", "uint8", "0123", settings, True)
    assert normalized != compressed_file_name(
        "policy", "tflite_qat", "uint8", "0123", settings
    )  # a QAT file of normalized input is another file
    one_rate = OmegaConf.create(
        {"edge": {"finetune_steps": 400, "finetune_lr": 1e-3, "finetune_batch": 16}}
    )
    name = compressed_file_name(
        "both", "tflite_prune75_int8", "int8", "abcdef0123", finetune_settings(one_rate)
    )
    assert name == "both-prune75_int8-6b96b2a23c.tflite"
    assert variant_file_name("policy", "int8", "uint8", "0123456789") == (
        "policy-int8-uint8-0123456789.tflite"
    )
    assert variant_file_name("both", "fp16", "int8", "0123456789") == "both-fp16.tflite"
