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

A fifth of those observations is held out of the fit and watched (:class:`Guard`):
the weights with the lowest held-out error are the ones kept (for QAT and structured
pruning the compressed model before any fine-tuning counts too), and when the held-out
error rises past ``RISE`` times its best the best weights come back and the learning
rate halves. So
a rate sized for a small MLP cannot wreck a 2-million-weight conv policy: its
fine-tune steps down to a rate that helps, or keeps the model it started from.

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


#: Share of the distillation observations held out of the fit to judge it (:class:`Guard`).
HOLDOUT = 0.2
#: A held-out error this many times its best so far means the fine-tune is diverging.
RISE = 1.5


def learning_rates(value: Any) -> list[float]:
    """``edge.finetune_lr``: one rate or a list of them, as a list of floats."""
    if isinstance(value, (int, float, str)):
        return [float(value)]
    return [float(v) for v in value]


def finetune_settings(cfg: Any) -> dict[str, Any]:
    """``edge.finetune_*`` and the guard's constants (part of a compressed file's cache
    name: a file built by another recipe is not reused)."""
    return {
        "steps": int(cfg.edge.finetune_steps),
        "lr": learning_rates(cfg.edge.finetune_lr),
        "batch": int(cfg.edge.finetune_batch),
        "holdout": HOLDOUT,
        "rise": RISE,
    }


class Guard:
    """Watches a fine-tune on held-out observations, one :meth:`check` per epoch.

    Keeps the weights with the lowest held-out error (the model at the first check counts
    too) and, when the error rises past ``RISE`` times that best (or is not finite),
    restores them and halves the learning rate. It watches from ``arm_step`` on:
    magnitude pruning's error rises by design while its sparsity ramps up, and weights
    from then have other masks. :meth:`finish` restores the best weights; :meth:`report`
    says what happened (held-out error at the first check and of the kept weights, the
    halvings, the final rate).
    """

    def __init__(self, get_weights: Any, set_weights: Any, set_lr: Any, lr: float,
                 arm_step: int = 0) -> None:  # fmt: skip
        self._get, self._set, self._set_lr = get_weights, set_weights, set_lr
        self.lr, self.arm_step = lr, arm_step
        self.best: float = math.inf
        self.best_step: int | None = None
        self.start_loss: float | None = None
        self.halvings = 0
        self._weights: Any = None

    def check(self, step: int, loss: float) -> None:
        """The held-out error after ``step`` optimizer steps."""
        if self.start_loss is None:
            self.start_loss = loss
        if step < self.arm_step:
            return
        if not math.isfinite(loss) or loss > RISE * self.best:
            if self._weights is not None:
                self._set(self._weights)
            self.lr /= 2
            self._set_lr(self.lr)
            self.halvings += 1
        elif loss < self.best:
            self.best, self.best_step, self._weights = loss, step, self._get()

    def finish(self) -> float:
        """Restore the kept weights; their held-out error."""
        if self._weights is not None:
            self._set(self._weights)
        return self.best

    def report(self) -> dict[str, Any]:
        return {"holdout_loss_start": self.start_loss, "holdout_loss_kept": self.best,
                "kept_step": self.best_step, "lr_halvings": self.halvings,
                "final_lr": self.lr}  # fmt: skip


def _held_out(n: int) -> np.ndarray:
    """Which of ``n`` distillation observations are held out of the fit (every fifth)."""
    held = np.zeros(n, bool)
    held[:: round(1 / HOLDOUT)] = True
    return held


def _split(x: np.ndarray, y: Any) -> tuple[np.ndarray, Any, np.ndarray, Any]:
    """(fit x, fit y, held-out x, held-out y)."""
    held = _held_out(len(x))

    def part(v: Any, mask: np.ndarray) -> Any:
        return [a[mask] for a in v] if isinstance(v, list) else v[mask]

    return x[~held], part(y, ~held), x[held], part(y, held)


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


def _steps_per_epoch(settings: dict[str, Any], n: int) -> int:
    return math.ceil(int((~_held_out(n)).sum()) / settings["batch"])


def _fit_epochs(settings: dict[str, Any], n: int) -> int:
    """Epochs of a Keras fit on ``n`` distillation observations (the fifth held out)."""
    return _epochs(settings, int((~_held_out(n)).sum()))


def _fit(model: Any, x: np.ndarray, y: Any, settings: dict[str, Any], callbacks: list[Any],
         arm_step: int = 0) -> dict[str, Any]:  # fmt: skip
    """Distil ``model`` on ``x`` less the held-out fifth, watched by a :class:`Guard`; the
    fit's final loss and the guard's report."""
    import tensorflow as tf
    import tf_keras

    tf.random.set_seed(0)  # the fit's shuffling: the same file from the same inputs
    fx, fy, hx, hy = _split(x, y)
    per_epoch = _steps_per_epoch(settings, len(x))
    model.compile(optimizer=tf_keras.optimizers.Adam(settings["lr"]), loss="mse")

    def set_lr(lr: float) -> None:
        model.optimizer.learning_rate.assign(lr)

    epochs = _fit_epochs(settings, len(x))
    guard = Guard(model.get_weights, model.set_weights, set_lr, settings["lr"], arm_step)
    guard.check(0, float(model.evaluate(hx, hy, batch_size=256, verbose=0)))

    class Watch(tf_keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            guard.check((epoch + 1) * per_epoch, float((logs or {})["val_loss"]))

    hist = model.fit(fx, fy, batch_size=settings["batch"], epochs=epochs,
                     verbose=0, shuffle=True, validation_data=(hx, hy),
                     callbacks=[*callbacks, Watch()])  # fmt: skip
    guard.finish()
    return {"distill_loss": float(hist.history["loss"][-1]), **guard.report()}


def quantization_aware(net: Any, heads: str, x: np.ndarray, y: Any, settings: dict) -> Any:
    """QAT by distillation; returns (the batch-1 QAT model, what the fit measured).

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
    fit = _fit(train, x, y, settings, [])
    single = qat_model(1)[0]
    single.set_weights(train.get_weights())
    return single, fit


def _start_ranges(qmodel: Any, base: Any, trainable: list[Any], x: np.ndarray) -> None:
    """Set the QAT model's ranges (``*_min`` / ``*_max``) to those of the float model
    ``base``: its activations' on ``x`` before the activation (``pre_activation``), after
    it (``post_activation``) and the input's (the quantize layer), and its kernels'
    (``kernel``: per output channel where the variable has one entry per channel).
    tensorflow-model-optimization sets the kernel ranges at the first training step and
    leaves them at [-6, 6] until then, which an 8-bit grid of weights of about 0.01 reads
    as zeros: the model before fine-tuning would not be the one post-training int8 gives."""
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
    import tensorflow_model_optimization as tfmot
    import tf_keras

    from rlperf.tflite.export import build_keras_policy

    sp = tfmot.sparsity.keras
    per_epoch = _steps_per_epoch(settings, len(x))
    steps = _fit_epochs(settings, len(x)) * per_epoch
    ramp = max(1, steps // 2)
    schedule = sp.PolynomialDecay(0.0, sparsity, 0, ramp, frequency=max(1, steps // 20))
    base = build_keras_policy(net, heads, None, api="tf_keras")
    trainable = _trainable_layers(base)

    def wrap(layer: Any) -> Any:
        return (
            sp.prune_low_magnitude(layer, pruning_schedule=schedule)
            if layer in trainable
            else layer
        )

    pruned = tf_keras.models.clone_model(base, clone_function=wrap)
    # Armed from the first epoch end past the ramp's last mask update.
    fit = _fit(pruned, x, y, settings, [sp.UpdatePruningStep()], arm_step=ramp + 1)
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
    held = torch.from_numpy(_held_out(len(x)))
    obs = torch.from_numpy(np.ascontiguousarray(x))
    with torch.no_grad():
        t_logits, t_values = net.logits(obs), net.value(obs)
    fit_idx = torch.nonzero(~held).flatten()
    opt = torch.optim.Adam(student.parameters(), lr=settings["lr"])

    def set_lr(lr: float) -> None:
        for group in opt.param_groups:
            group["lr"] = lr

    def loss_on(idx: Any) -> Any:
        return torch.nn.functional.mse_loss(
            student.logits(obs[idx]), t_logits[idx]
        ) + torch.nn.functional.mse_loss(student.value(obs[idx]), t_values[idx])

    def held_out_loss() -> float:
        with torch.no_grad():
            return float(loss_on(held))

    guard = Guard(lambda: {k: v.clone() for k, v in student.state_dict().items()},
                  student.load_state_dict, set_lr, settings["lr"])  # fmt: skip
    per_epoch = _steps_per_epoch(settings, len(x))
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

    One guarded fine-tune per learning rate of ``settings["lr"]``; the model with the
    lowest held-out error is the one converted. ``convert(model, variant)`` is
    :func:`rlperf.tflite.convert.convert_keras` with the calibration set and input range
    bound (``variant``: fp32, int8, qat).
    """
    from rlperf.tflite.export import export_policy

    recipe = RECIPES[backend]
    obs = calibration.observations
    x = _inputs(net, obs)
    y = _targets(net, obs, heads) if recipe.method != "structured" else None
    info: dict[str, Any] = {"recipe": asdict(recipe), "finetune": settings,
                            "distillation_observations": int(len(x)),
                            "held_out_observations": int(_held_out(len(x)).sum())}  # fmt: skip
    log.info("building %s (%s) by distillation on %d observations", backend, recipe.method, len(x))
    builds = []
    for lr in settings["lr"]:
        one = {**settings, "lr": lr}
        if recipe.method == "qat":
            built = quantization_aware(net, heads, x, y, one)
        elif recipe.method == "prune":
            built = magnitude_pruned(net, heads, x, y, one, recipe.sparsity)
        else:
            built = structured_pruned(net, recipe.keep, obs, one)
        log.info("%s at lr %g: held-out MSE %.4g", backend, lr, built[1]["holdout_loss_kept"])
        builds.append((lr, *built))
    lr, model, fit = min(builds, key=lambda b: b[2]["holdout_loss_kept"])
    info.update(fit)
    info["lr_chosen"] = lr
    info["lr_tried"] = [{"lr": r, **f} for r, _, f in builds]
    if recipe.method == "qat":
        return convert(model, "qat"), info
    if recipe.method == "prune":
        return convert(model, "int8" if recipe.int8 else "fp32"), info
    info["layers"] = getattr(model, "hiddens", None) or [f[0] for f in model.conv_filters]
    keras_model, check = export_policy(model, obs, heads)
    info["export"] = check.to_dict()
    return convert(keras_model, "fp32"), info
