"""Compressed variants of a trained policy: quantization-aware training, magnitude pruning,
structured pruning, pruning followed by int8 — each fine-tuned by distillation.

============================ ===================================================================
backend                      what is built
============================ ===================================================================
``tflite_qat``               quantization-aware training (tensorflow-model-optimization's
                             ``quantize_model``), then an int8 model (float32 in/out)
``tflite_prune50/75/90``     magnitude pruning to 50 / 75 / 90 % zero weights (``prune_low_
                             magnitude``, sparsity ramped up over the first half of the
                             fine-tuning), wrappers stripped, float32 model (zeros stored dense)
``tflite_prune75_int8``      the 75 % pruned model, then full-integer int8 post-training
                             quantization as ``tflite_int8`` (same calibration set)
``tflite_struct50``          structured pruning: half the units of every hidden layer (MLP) or
                             half the channels of every conv layer (image policies) removed,
                             those with the smallest L2 norm of their weights, so the layers
                             shrink and the arithmetic with them; float32 model
============================ ===================================================================

tensorflow-model-optimization wraps only Keras 2 (``tf_keras``) models: QAT and
magnitude pruning start from :func:`rlperf.tflite.export.build_keras_policy` with
``api="tf_keras"`` (the builder of every other variant). Structured pruning slices
the torch policy into a smaller one of the same class and exports that with the
verified Keras export. The one-hot layers of a Discrete observation are fixed
(exact) and never pruned or trained.

The training signal is **distillation** from the trained torch policy: the
compressed model is fitted (mean squared error) to the torch policy's logits (and
values, ``heads=both``) on the calibration set's observations, which hold no frame
of the fidelity set the variant is then checked on. Config keys (``edge.*``):
``finetune_steps``, ``finetune_lr`` (one rate or a list: one fine-tune per rate, the
lowest held-out error kept), ``finetune_batch``; the calibration set's.

Each fit is guarded on a held-out fifth of those observations
(:class:`rlperf.tflite.finetune.Guard`: the best weights kept, the rate halved on a
rise), so a rate sized for a small MLP cannot wreck a 2-million-weight conv policy.
:func:`compress_policy` returns the Keras model and what its build measured; the
variant builder (:func:`rlperf.tflite.artifacts.build_variant`) converts it as the
backend's spec says (:mod:`rlperf.specs.backends`) and caches it.

Magnitude pruning leaves the ``.tflite`` the same size (TFLite stores the zeros
dense) and the latency the same on x86 (XNNPACK's sparse kernels are not enabled
there): what it buys is the gzip size. The results say so (docs/compression.md).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import numpy as np

from rlperf.specs.backends import BackendSpec
from rlperf.tflite.export import (
    build_keras_policy,
    continuous_actions,
    export_policy,
    policy_input_shape,
    torch_outputs,
)
from rlperf.tflite.finetune import Guard, fit_epochs, held_out, keras_distill, steps_per_epoch
from rlperf.tflite.tflite_model import InputNormalization

log = logging.getLogger("rlperf.tflite")


def _trainable_layers(model: Any, fixed_action_map: bool = False) -> list[Any]:
    """The layers that carry the policy's weights (not the fixed one-hot encoding; with
    ``fixed_action_map`` not a Box policy's map onto [low, high] either: pruning a
    diagonal of one or two weights would zero an action dimension)."""
    return [
        layer
        for layer in model.layers
        if layer.get_weights()
        and not layer.name.startswith("one_hot")
        and not (fixed_action_map and layer.name == "action")
    ]


def student_inputs(net: Any, observations: np.ndarray) -> np.ndarray:
    """The observations as the Keras student takes them (float32, the policy's input shape)."""
    return observations.astype(np.float32).reshape(len(observations), *policy_input_shape(net))


def teacher_targets(net: Any, observations: np.ndarray, heads: str) -> Any:
    """The torch policy's outputs the student is fitted to (list for ``heads=both``)."""
    logits, values = torch_outputs(net, observations, heads)
    return [logits, values] if heads == "both" else logits


def quantization_aware(
    net: Any,
    heads: str,
    x: np.ndarray,
    y: Any,
    settings: dict,
    input_range: tuple[np.ndarray, np.ndarray] | None = None,
    input_normalization: InputNormalization | None = None,
) -> Any:
    """QAT by distillation; returns (the batch-1 QAT model, what the fit measured).

    With ``input_normalization`` the model takes normalized observations (``x`` is
    normalized already; the inverse folded into its first layer, as post-training int8's).

    The fake-quantization ranges start from the float model's activation ranges on ``x``
    (tensorflow-model-optimization starts them at [-6, 6] and moves them by an exponential
    average with decay 0.999 per step: a policy's logits of +-20 would stay clipped for
    thousands of steps). The input's range also covers ``input_range`` (the observation
    space's finite bounds, as post-training int8 takes them): an observation beyond the
    calibration set's would otherwise be clipped (Pendulum's fastest swings: actions up to
    46 % of the range off).
    """
    # TensorFlow (tf_keras, tensorflow-model-optimization): deferred, only its backends load it.
    import tensorflow_model_optimization as tfmot
    import tf_keras

    def qat_model(batch_size: int | None) -> tuple[Any, Any, list[Any]]:
        base = build_keras_policy(net, heads, batch_size, "tf_keras", input_normalization)
        trainable = _trainable_layers(base)

        def annotate(layer: Any) -> Any:
            if layer in trainable:
                return tfmot.quantization.keras.quantize_annotate_layer(layer)
            return layer

        annotated = tf_keras.models.clone_model(base, clone_function=annotate)
        return tfmot.quantization.keras.quantize_apply(annotated), base, trainable

    train, base, trainable = qat_model(None)
    _start_ranges(train, base, trainable, _with_bounds(x, input_range))
    fit = keras_distill(train, x, y, settings, [])
    single = qat_model(1)[0]
    single.set_weights(train.get_weights())
    return single, fit


def _with_bounds(x: np.ndarray, input_range: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """``x`` with the finite ``input_range`` bounds appended as two more rows (what the
    input's quantization range is taken over; the activations see them too)."""
    if input_range is None:
        return x
    low, high = (np.broadcast_to(np.asarray(b, np.float32), x.shape[1:]) for b in input_range)
    low = np.where(np.isfinite(low), low, x.min(axis=0))
    high = np.where(np.isfinite(high), high, x.max(axis=0))
    return np.concatenate([x, np.stack([low, high]).astype(np.float32)])


def _start_ranges(qmodel: Any, base: Any, trainable: list[Any], x: np.ndarray) -> None:
    """Set the QAT model's ranges (``*_min`` / ``*_max``) to those of the float model
    ``base``: its activations' on ``x`` before the activation (``pre_activation``), after
    it (``post_activation``) and the input's (the quantize layer), and its kernels'
    (``kernel``: per output channel where the variable has one entry per channel).
    tensorflow-model-optimization sets the kernel ranges at the first training step and
    leaves them at [-6, 6] until then, which an 8-bit grid of weights of about 0.01 reads
    as zeros: the model before fine-tuning would not be the one post-training int8 gives."""
    # TensorFlow: deferred, as in quantization_aware.
    import tf_keras

    probe = tf_keras.Model(base.inputs, [layer.output for layer in trainable])

    def outputs() -> list[np.ndarray]:
        # Called eagerly: ``predict`` traces once and would keep the activations of its
        # first call, so the "pre-activation" ranges would be the post-activation ones.
        parts = [probe(x[i : i + 256], training=False) for i in range(0, len(x), 256)]
        if len(trainable) == 1:
            parts = [[p] for p in parts]
        return [np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(len(trainable))]

    post = outputs()
    saved = [layer.activation for layer in trainable]
    for layer in trainable:
        layer.activation = tf_keras.activations.linear
    try:
        pre = outputs()
    finally:
        for layer, act in zip(trainable, saved, strict=True):
            layer.activation = act
    ranges: dict[str, np.ndarray] = {}
    for layer, a, b in zip(trainable, pre, post, strict=True):
        ranges[f"quant_{layer.name}/pre_activation"] = a
        ranges[f"quant_{layer.name}/post_activation"] = b
        ranges[f"quant_{layer.name}/kernel"] = layer.get_weights()[0]
    for layer in qmodel.layers:
        for w in layer.weights:
            name = w.name.split(":")[0]
            if not name.endswith(("_min", "_max")):
                continue
            values = x if layer.name.startswith("quantize_layer") else ranges.get(name[:-4])
            if values is None:
                continue
            if name[:-4].endswith("/kernel"):
                # Symmetric, as the kernel quantizer is: per output channel (the last axis)
                # or for the whole kernel.
                axes = tuple(range(values.ndim - 1)) if w.shape.num_elements() > 1 else None
                high = np.abs(values).max(axis=axes).astype(np.float32)
                w.assign(np.broadcast_to(-high if name.endswith("_min") else high, w.shape))
                continue
            low, high = min(0.0, float(values.min())), max(0.0, float(values.max()))
            w.assign(np.full(w.shape, low if name.endswith("_min") else high, np.float32))


def magnitude_pruned(
    net: Any, heads: str, x: np.ndarray, y: Any, settings: dict, sparsity: float
) -> Any:
    """Magnitude pruning by distillation, wrappers stripped; (batch-1 model, what the fit
    measured). The sparsity ramps up over the first half of the steps; the :class:`Guard`
    keeps weights from the second half (at the full sparsity) only."""
    # TensorFlow: deferred, as in quantization_aware.
    import tensorflow_model_optimization as tfmot
    import tf_keras

    sp = tfmot.sparsity.keras
    per_epoch = steps_per_epoch(settings, len(x))
    steps = fit_epochs(settings, len(x)) * per_epoch
    ramp = max(1, steps // 2)
    schedule = sp.PolynomialDecay(0.0, sparsity, 0, ramp, frequency=max(1, steps // 20))
    base = build_keras_policy(net, heads, None, api="tf_keras")
    trainable = _trainable_layers(base, fixed_action_map=True)

    def wrap(layer: Any) -> Any:
        return (
            sp.prune_low_magnitude(layer, pruning_schedule=schedule)
            if layer in trainable
            else layer
        )

    pruned = tf_keras.models.clone_model(base, clone_function=wrap)
    # Armed from the first epoch end past the ramp's last mask update.
    fit = keras_distill(pruned, x, y, settings, [sp.UpdatePruningStep()], arm_step=ramp + 1)
    stripped = sp.strip_pruning(pruned)
    single = build_keras_policy(net, heads, 1, api="tf_keras")
    single.set_weights(stripped.get_weights())
    return single, fit


def structured_pruned(net: Any, keep: float, x: np.ndarray, settings: dict) -> tuple[Any, dict]:
    """A smaller torch policy of the same class, then distilled from ``net`` (watched by a
    :class:`Guard`); (student, what the fit measured).

    MLP policies: every hidden layer keeps ``keep`` of its units (largest L2 norm of
    incoming weights). Image policies: every conv layer of both trunks keeps ``keep`` of
    its channels (largest L2 norm of the filter), and the next layer and the heads lose
    the matching input channels — channel pruning, so the convolutions themselves shrink.
    """
    # torch: deferred, the TensorFlow backends and a given .tflite never need it.
    import torch

    student: Any
    if getattr(net, "kind", "vision") == "mlp":
        from rlperf.models.mlp_net import MlpNet  # torch, as above

        hiddens = [max(1, round(h * keep)) for h in net.hiddens]
        student = MlpNet(net.obs_spec, net.action_spec, hiddens, net.activation,
                         squash=net.squash, value=net.has_value)  # fmt: skip
        _slice_linears(net.pi_net, student.pi_net)
        if net.has_value:
            _slice_linears(net.vf_net, student.vf_net)
        threads = 1  # small batches of a small MLP: more threads only wait for each other
    else:
        from rlperf.models.vision_net import VisionNet  # torch, as above

        filters = [[max(1, round(o * keep)), k, st] for o, k, st in net.conv_filters]
        student = VisionNet(net.obs_shape, net.num_actions, filters)
        _slice_convs(net.pi_trunk, net.pi_logits, student.pi_trunk, student.pi_logits)
        _slice_convs(net.vf_trunk, net.vf_out, student.vf_trunk, student.vf_out)
        threads = torch.get_num_threads()
    torch.manual_seed(0)
    held = torch.from_numpy(held_out(len(x)))
    obs = torch.from_numpy(np.ascontiguousarray(x))
    has_value = getattr(net, "has_value", True)  # SAC's actor has no value network
    # A Box policy's actions depend on the mean half of its outputs only (log_std: no).
    width = net.num_outputs // 2 if continuous_actions(net) else net.num_outputs
    with torch.no_grad():
        t_logits = net.logits(obs)[:, :width]
        t_values = net.value(obs) if has_value else None
    fit_idx = torch.nonzero(~held).flatten()
    opt = torch.optim.Adam(student.parameters(), lr=settings["lr"])

    def set_lr(lr: float) -> None:
        for group in opt.param_groups:
            group["lr"] = lr

    def loss_on(idx: Any) -> Any:
        loss = torch.nn.functional.mse_loss(student.logits(obs[idx])[:, :width], t_logits[idx])
        if t_values is not None:
            loss = loss + torch.nn.functional.mse_loss(student.value(obs[idx]), t_values[idx])
        return loss

    def held_out_loss() -> float:
        with torch.no_grad():
            return float(loss_on(held))

    guard = Guard(lambda: {k: v.clone() for k, v in student.state_dict().items()},
                  student.load_state_dict, set_lr, settings["lr"])  # fmt: skip
    per_epoch = steps_per_epoch(settings, len(x))
    rng = np.random.default_rng(0)
    loss = torch.zeros(())
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        guard.check(0, held_out_loss())
        student.train()
        for step in range(1, settings["steps"] + 1):
            idx = fit_idx[torch.from_numpy(rng.integers(0, len(fit_idx), settings["batch"]))]
            loss = loss_on(idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % per_epoch == 0 or step == settings["steps"]:
                guard.check(step, held_out_loss())
        guard.finish()
    finally:
        torch.set_num_threads(saved_threads)
    student.eval()
    return student, {"distill_loss": float(loss.item()), **guard.report()}


def _kept(norms: Any, n: int) -> Any:
    """Indices of the ``n`` largest ``norms``, in their original order."""
    # torch: deferred, as in structured_pruned.
    import torch

    return torch.sort(torch.argsort(norms, descending=True)[:n]).values


def _slice_linears(src: Any, dst: Any) -> None:
    """Copy the kept units of ``src``'s Linear layers into the smaller ``dst``."""
    # torch: deferred, as in structured_pruned.
    import torch

    src_lin = [m for m in src if hasattr(m, "weight")]
    dst_lin = [m for m in dst if hasattr(m, "weight")]
    kept_in = torch.arange(src_lin[0].in_features)
    with torch.no_grad():
        for i, (s, d) in enumerate(zip(src_lin, dst_lin, strict=True)):
            last = i == len(src_lin) - 1
            w = s.weight[:, kept_in]
            kept_out = (
                torch.arange(s.out_features) if last else _kept(w.norm(dim=1), d.out_features)
            )
            d.weight.copy_(w[kept_out])
            d.bias.copy_(s.bias[kept_out])
            kept_in = kept_out


def _slice_convs(src_trunk: Any, src_head: Any, dst_trunk: Any, dst_head: Any) -> None:
    """Copy the kept channels of a conv trunk and its 1x1 head into the smaller ones."""
    # torch: deferred, as in structured_pruned.
    import torch

    kept_in = torch.arange(src_trunk.convs[0].in_channels)
    with torch.no_grad():
        for s, d in zip(src_trunk.convs, dst_trunk.convs, strict=True):
            w = s.weight[:, kept_in]
            kept_out = _kept(w.flatten(1).norm(dim=1), d.out_channels)
            d.weight.copy_(w[kept_out])
            d.bias.copy_(s.bias[kept_out])
            kept_in = kept_out
        dst_head.weight.copy_(src_head.weight[:, kept_in])
        dst_head.bias.copy_(src_head.bias)


def compress_policy(
    spec: BackendSpec,
    net: Any,
    heads: str,
    calibration: Any,
    settings: dict[str, Any],
    input_range: tuple[np.ndarray, np.ndarray] | None = None,
    input_normalization: InputNormalization | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The batch-1 Keras model of a compression backend, ready for its conversion
    (``spec.variant``), and what its build measured (the ``<file>.json`` of the cache).

    ``input_normalization`` (QAT, per-feature input scaling): the student takes normalized
    observations, fitted to the teacher's outputs on the raw ones, and its input covers
    [-1, 1].

    One guarded fine-tune per learning rate of ``settings["lr"]``
    (:func:`rlperf.tflite.finetune.finetune_settings`); the model with the lowest held-out
    error is the one returned. Structured pruning's smaller torch policy goes through the
    verified export (its check is ``info["export"]``).
    """
    recipe = spec.recipe
    assert recipe is not None, f"{spec.name} is not a compression backend"
    obs = calibration.observations
    x = student_inputs(net, obs)
    y = teacher_targets(net, obs, heads) if recipe.method != "structured" else None
    norm = input_normalization if recipe.method == "qat" else None
    if norm is not None:
        x = norm.apply(x)
        unit = np.ones(norm.shape, np.float32)
        input_range = (-unit, unit)
    info: dict[str, Any] = {"recipe": asdict(recipe), "finetune": settings,
                            "distillation_observations": int(len(x)),
                            "held_out_observations": int(held_out(len(x)).sum())}  # fmt: skip
    log.info(
        "building %s (%s) by distillation on %d observations", spec.name, recipe.method, len(x)
    )
    builds = []
    for lr in settings["lr"]:
        one = {**settings, "lr": lr}
        if recipe.method == "qat":
            built = quantization_aware(net, heads, x, y, one, input_range, norm)
        elif recipe.method == "prune":
            built = magnitude_pruned(net, heads, x, y, one, recipe.sparsity)
        else:
            built = structured_pruned(net, recipe.keep, obs, one)
        log.info("%s at lr %g: held-out MSE %.4g", spec.name, lr, built[1]["holdout_loss_kept"])
        builds.append((lr, *built))
    lr, model, fit = min(builds, key=lambda b: b[2]["holdout_loss_kept"])
    info.update(fit)
    info["lr_chosen"] = lr
    info["lr_tried"] = [{"lr": r, **f} for r, _, f in builds]
    if recipe.method != "structured":
        return model, info
    info["layers"] = getattr(model, "hiddens", None) or [f[0] for f in model.conv_filters]
    keras_model, check = export_policy(model, obs, heads)
    info["export"] = check.to_dict()
    return keras_model, info
