"""Distillation fine-tuning of a compressed policy, guarded on held-out observations.

A fifth of the distillation observations is held out of the fit and watched
(:class:`Guard`): the weights with the lowest held-out error are the ones kept, and
when the held-out error rises past ``RISE`` times its best the best weights come back
and the learning rate halves (docs/compression.md). Config keys (``edge.*``):
``finetune_steps``, ``finetune_lr`` (one rate or a list), ``finetune_batch``.
:mod:`rlperf.tflite.compress` builds the compressed models and fits them with this.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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


def held_out(n: int) -> np.ndarray:
    """Which of ``n`` distillation observations are held out of the fit (every fifth)."""
    held = np.zeros(n, bool)
    held[:: round(1 / HOLDOUT)] = True
    return held


def split_held_out(x: np.ndarray, y: Any) -> tuple[np.ndarray, Any, np.ndarray, Any]:
    """(fit x, fit y, held-out x, held-out y)."""
    held = held_out(len(x))

    def part(v: Any, mask: np.ndarray) -> Any:
        return [a[mask] for a in v] if isinstance(v, list) else v[mask]

    return x[~held], part(y, ~held), x[held], part(y, held)


def _epochs(settings: dict[str, Any], n: int) -> int:
    return max(1, math.ceil(settings["steps"] * settings["batch"] / max(1, n)))


def steps_per_epoch(settings: dict[str, Any], n: int) -> int:
    return math.ceil(int((~held_out(n)).sum()) / settings["batch"])


def fit_epochs(settings: dict[str, Any], n: int) -> int:
    """Epochs of a Keras fit on ``n`` distillation observations (the fifth held out)."""
    return _epochs(settings, int((~held_out(n)).sum()))


def keras_distill(model: Any, x: np.ndarray, y: Any, settings: dict[str, Any], callbacks: list[Any],
         arm_step: int = 0) -> dict[str, Any]:  # fmt: skip
    """Distil ``model`` on ``x`` less the held-out fifth, watched by a :class:`Guard`; the
    fit's final loss and the guard's report."""
    # TensorFlow: deferred, tflite.artifacts imports this module for every edge and serve cell.
    import tensorflow as tf
    import tf_keras

    tf.random.set_seed(0)  # the fit's shuffling: the same file from the same inputs
    fx, fy, hx, hy = split_held_out(x, y)
    per_epoch = steps_per_epoch(settings, len(x))
    model.compile(optimizer=tf_keras.optimizers.Adam(settings["lr"]), loss="mse")

    def set_lr(lr: float) -> None:
        model.optimizer.learning_rate.assign(lr)

    epochs = fit_epochs(settings, len(x))
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
