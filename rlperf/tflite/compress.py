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
``finetune_steps``, ``finetune_lr``, ``finetune_batch``; the calibration set's.

Magnitude pruning leaves the ``.tflite`` the same size (TFLite stores the zeros
dense) and the latency the same on x86 (XNNPACK's sparse kernels are not enabled
there): what it buys is the gzip size. The results say so (docs/compression.md).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

log = logging.getLogger("rlperf.tflite")


@dataclass(frozen=True)
class Recipe:
    """How one compressed backend is made."""

    method: str  # qat | prune | structured
    sparsity: float = 0.0  # prune: share of zero weights in every pruned layer
    keep: float = 1.0  # structured: share of hidden units kept
    int8: bool = False  # prune: then full-integer post-training quantization


#: The compression backends (``backend.name``) and how each is made.
RECIPES: dict[str, Recipe] = {
    "tflite_qat": Recipe("qat"),
    "tflite_prune50": Recipe("prune", sparsity=0.5),
    "tflite_prune75": Recipe("prune", sparsity=0.75),
    "tflite_prune90": Recipe("prune", sparsity=0.9),
    "tflite_prune75_int8": Recipe("prune", sparsity=0.75, int8=True),
    "tflite_struct50": Recipe("structured", keep=0.5),
}


def finetune_settings(cfg: Any) -> dict[str, Any]:
    """``edge.finetune_*`` (part of a compressed file's cache name)."""
    return {
        "steps": int(cfg.edge.finetune_steps),
        "lr": float(cfg.edge.finetune_lr),
        "batch": int(cfg.edge.finetune_batch),
    }


def _targets(net: Any, observations: np.ndarray, heads: str) -> Any:
    """The torch policy's outputs the student is fitted to (list for ``heads=both``)."""
    from rlperf.tflite.export import torch_outputs

    logits, values = torch_outputs(net, observations, heads)
    return [logits, values] if heads == "both" else logits


def _epochs(settings: dict[str, Any], n: int) -> int:
    return max(1, math.ceil(settings["steps"] * settings["batch"] / max(1, n)))


def _trainable_layers(model: Any) -> list[Any]:
    """The layers that carry the policy's weights (not the fixed one-hot encoding)."""
    return [
        layer
        for layer in model.layers
        if layer.get_weights() and not layer.name.startswith("one_hot")
    ]


def _inputs(net: Any, observations: np.ndarray) -> np.ndarray:
    from rlperf.tflite.export import policy_input_shape

    return observations.astype(np.float32).reshape(len(observations), *policy_input_shape(net))


def _fit(model: Any, x: np.ndarray, y: Any, settings: dict[str, Any], callbacks: list[Any]) -> Any:
    import tf_keras

    model.compile(optimizer=tf_keras.optimizers.Adam(settings["lr"]), loss="mse")
    hist = model.fit(x, y, batch_size=settings["batch"], epochs=_epochs(settings, len(x)),
                     verbose=0, shuffle=True, callbacks=callbacks)  # fmt: skip
    return float(hist.history["loss"][-1])


def quantization_aware(net: Any, heads: str, x: np.ndarray, y: Any, settings: dict) -> Any:
    """QAT by distillation; returns (the batch-1 QAT model, final loss).

    The fake-quantization ranges start from the float model's activation ranges on ``x``
    (tensorflow-model-optimization starts them at [-6, 6] and moves them by an exponential
    average with decay 0.999 per step: a policy's logits of +-20 would stay clipped for
    thousands of steps).
    """
    import tensorflow_model_optimization as tfmot
    import tf_keras

    from rlperf.tflite.export import build_keras_policy

    def qat_model(batch_size: int | None) -> tuple[Any, Any, list[Any]]:
        base = build_keras_policy(net, heads, batch_size, api="tf_keras")
        trainable = _trainable_layers(base)

        def annotate(layer: Any) -> Any:
            if layer in trainable:
                return tfmot.quantization.keras.quantize_annotate_layer(layer)
            return layer

        annotated = tf_keras.models.clone_model(base, clone_function=annotate)
        return tfmot.quantization.keras.quantize_apply(annotated), base, trainable

    train, base, trainable = qat_model(None)
    _start_ranges(train, base, trainable, x)
    loss = _fit(train, x, y, settings, [])
    single = qat_model(1)[0]
    single.set_weights(train.get_weights())
    return single, loss


def _start_ranges(qmodel: Any, base: Any, trainable: list[Any], x: np.ndarray) -> None:
    """Set the QAT model's activation ranges (``*_min`` / ``*_max``) to those the float
    model ``base`` shows on ``x``: before the activation (``pre_activation``), after it
    (``post_activation``), and the input's (the quantize layer)."""
    import tf_keras

    probe = tf_keras.Model(base.inputs, [layer.output for layer in trainable])
    post = probe.predict(x, batch_size=256, verbose=0)
    saved = [layer.activation for layer in trainable]
    for layer in trainable:
        layer.activation = tf_keras.activations.linear
    try:
        pre = probe.predict(x, batch_size=256, verbose=0)
    finally:
        for layer, act in zip(trainable, saved, strict=True):
            layer.activation = act
    if len(trainable) == 1:
        pre, post = [pre], [post]
    ranges: dict[str, np.ndarray] = {}
    for layer, a, b in zip(trainable, pre, post, strict=True):
        ranges[f"quant_{layer.name}/pre_activation"] = a
        ranges[f"quant_{layer.name}/post_activation"] = b
    for layer in qmodel.layers:
        for w in layer.weights:
            name = w.name.split(":")[0]
            if not name.endswith(("_min", "_max")):
                continue
            values = x if layer.name.startswith("quantize_layer") else ranges.get(name[:-4])
            if values is not None:
                low, high = min(0.0, float(values.min())), max(0.0, float(values.max()))
                w.assign(np.full(w.shape, low if name.endswith("_min") else high, np.float32))


def magnitude_pruned(
    net: Any, heads: str, x: np.ndarray, y: Any, settings: dict, sparsity: float
) -> Any:
    """Magnitude pruning by distillation, wrappers stripped; (batch-1 model, final loss)."""
    import tensorflow_model_optimization as tfmot
    import tf_keras

    from rlperf.tflite.export import build_keras_policy

    sp = tfmot.sparsity.keras
    steps = _epochs(settings, len(x)) * math.ceil(len(x) / settings["batch"])
    schedule = sp.PolynomialDecay(
        0.0, sparsity, 0, max(1, steps // 2), frequency=max(1, steps // 20)
    )
    base = build_keras_policy(net, heads, None, api="tf_keras")
    trainable = _trainable_layers(base)

    def wrap(layer: Any) -> Any:
        return (
            sp.prune_low_magnitude(layer, pruning_schedule=schedule)
            if layer in trainable
            else layer
        )

    pruned = tf_keras.models.clone_model(base, clone_function=wrap)
    loss = _fit(pruned, x, y, settings, [sp.UpdatePruningStep()])
    stripped = sp.strip_pruning(pruned)
    single = build_keras_policy(net, heads, 1, api="tf_keras")
    single.set_weights(stripped.get_weights())
    return single, loss


def structured_pruned(net: Any, keep: float, x: np.ndarray, settings: dict) -> tuple[Any, float]:
    """A smaller torch policy of the same class, then distilled from ``net``; (student, loss).

    MLP policies: every hidden layer keeps ``keep`` of its units (largest L2 norm of
    incoming weights). Image policies: every conv layer of both trunks keeps ``keep`` of
    its channels (largest L2 norm of the filter), and the next layer and the heads lose
    the matching input channels — channel pruning, so the convolutions themselves shrink.
    """
    import torch

    student: Any
    if getattr(net, "kind", "vision") == "mlp":
        from rlperf.models.mlp_net import MlpNet

        hiddens = [max(1, round(h * keep)) for h in net.hiddens]
        student = MlpNet(net.obs_spec, net.action_spec, hiddens, net.activation)
        for src, dst in ((net.pi_net, student.pi_net), (net.vf_net, student.vf_net)):
            _slice_linears(src, dst)
        threads = 1  # small batches of a small MLP: more threads only wait for each other
    else:
        from rlperf.models.vision_net import VisionNet

        filters = [[max(1, round(o * keep)), k, st] for o, k, st in net.conv_filters]
        student = VisionNet(net.obs_shape, net.num_actions, filters)
        _slice_convs(net.pi_trunk, net.pi_logits, student.pi_trunk, student.pi_logits)
        _slice_convs(net.vf_trunk, net.vf_out, student.vf_trunk, student.vf_out)
        threads = torch.get_num_threads()
    torch.manual_seed(0)
    obs = torch.from_numpy(np.ascontiguousarray(x))
    with torch.no_grad():
        t_logits, t_values = net.logits(obs), net.value(obs)
    opt = torch.optim.Adam(student.parameters(), lr=settings["lr"])
    rng = np.random.default_rng(0)
    loss = torch.zeros(())
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    student.train()
    try:
        for _ in range(settings["steps"]):
            idx = torch.from_numpy(rng.integers(0, len(x), settings["batch"]))
            loss = torch.nn.functional.mse_loss(student.logits(obs[idx]), t_logits[idx])
            loss = loss + torch.nn.functional.mse_loss(student.value(obs[idx]), t_values[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(saved_threads)
    student.eval()
    return student, float(loss.item())


def _kept(norms: Any, n: int) -> Any:
    """Indices of the ``n`` largest ``norms``, in their original order."""
    import torch

    return torch.sort(torch.argsort(norms, descending=True)[:n]).values


def _slice_linears(src: Any, dst: Any) -> None:
    """Copy the kept units of ``src``'s Linear layers into the smaller ``dst``."""
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


def build_compressed(
    backend: str, net: Any, heads: str, calibration: Any, settings: dict, convert: Any
) -> tuple[bytes, dict[str, Any]]:
    """The ``.tflite`` bytes of a compression backend and what its build measured.

    ``convert(model, variant)`` is :func:`rlperf.tflite.convert.convert_keras` with the
    calibration set and input range bound (``variant``: fp32, int8, qat).
    """
    from rlperf.tflite.export import export_policy

    recipe = RECIPES[backend]
    x = _inputs(net, calibration.observations)
    info: dict[str, Any] = {"recipe": asdict(recipe), "finetune": settings,
                            "distillation_observations": int(len(x))}  # fmt: skip
    log.info("building %s (%s) by distillation on %d observations", backend, recipe.method, len(x))
    if recipe.method == "qat":
        model, info["distill_loss"] = quantization_aware(
            net, heads, x, _targets(net, calibration.observations, heads), settings
        )
        return convert(model, "qat"), info
    if recipe.method == "prune":
        y = _targets(net, calibration.observations, heads)
        model, info["distill_loss"] = magnitude_pruned(net, heads, x, y, settings, recipe.sparsity)
        return convert(model, "int8" if recipe.int8 else "fp32"), info
    student, info["distill_loss"] = structured_pruned(
        net, recipe.keep, calibration.observations, settings
    )
    info["layers"] = getattr(student, "hiddens", None) or [f[0] for f in student.conv_filters]
    model, check = export_policy(student, calibration.observations, heads)
    info["export"] = check.to_dict()
    return convert(model, "fp32"), info
