"""Rebuild the trained torch policy in Keras and prove it computes the same logits.

The torch :class:`~rlperf.models.vision_net.VisionNet` and the Keras model are
the same network: conv kernels are copied OIHW -> HWIO; every layer but the
last uses Keras ``padding="same"``, which is TensorFlow's 'same' (the odd
pixel of padding goes after, exactly as :func:`~rlperf.models.shapes.conv_stack_shapes`
pads the torch module); the last trunk conv is 'valid' and reaches 1x1 (the
torch module computes it as a linear layer on the top-left k x k window - the
same numbers); the heads are 1x1 convs. The module's ``x / 255`` is folded
into the first conv's kernel, so the Keras model takes raw 0..255 pixels as
float32 and has no separate scaling op (for int8 this makes the input tensor
the raw frame, quantized losslessly with scale 1).

``heads="policy"`` exports the policy branch only (acting needs no value
function: half the compute); ``heads="both"`` adds the value branch as a
second output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rlperf.tflite import ExportVerificationError

if TYPE_CHECKING:
    from rlperf.models.vision_net import VisionNet

HEADS = ("policy", "both")


def torch_outputs(
    net: VisionNet, observations: np.ndarray, heads: str = "policy", batch: int = 256
) -> tuple[np.ndarray, np.ndarray | None]:
    """Logits ``(N, A)`` (and values ``(N,)`` for ``heads="both"``) of the torch module."""
    import torch

    logits, values = [], []
    with torch.inference_mode():
        for i in range(0, len(observations), batch):
            x = torch.from_numpy(np.ascontiguousarray(observations[i : i + batch]))
            logits.append(net.logits(x).numpy())
            if heads == "both":
                values.append(net.value(x).numpy())
    return np.concatenate(logits), (np.concatenate(values) if heads == "both" else None)


def _copy_trunk(x: Any, trunk: Any, prefix: str) -> Any:
    import keras

    convs = list(trunk.convs)
    for i, conv in enumerate(convs):
        last = i == len(convs) - 1
        layer = keras.layers.Conv2D(
            conv.out_channels,
            conv.kernel_size[0],
            strides=conv.stride[0],
            padding="valid" if last else "same",
            activation="relu",  # the study's trunks end with ReLU too (before the heads)
            name=f"{prefix}_conv{i}",
        )
        x = layer(x)
        kernel = conv.weight.detach().cpu().numpy().transpose(2, 3, 1, 0)  # OIHW -> HWIO
        if i == 0:
            kernel = kernel * np.float32(1.0 / 255.0)  # the module's obs / 255, folded
        layer.set_weights([kernel.astype(np.float32), conv.bias.detach().cpu().numpy()])
    return x


def _copy_head(x: Any, conv: Any, name: str) -> Any:
    import keras

    layer = keras.layers.Conv2D(conv.out_channels, 1, name=f"{name}_conv")
    x = layer(x)
    kernel = conv.weight.detach().cpu().numpy().transpose(2, 3, 1, 0)
    layer.set_weights([kernel.astype(np.float32), conv.bias.detach().cpu().numpy()])
    return keras.layers.Reshape((conv.out_channels,), name=name)(x)


def build_keras_policy(net: VisionNet, heads: str = "policy", batch_size: int | None = 1) -> Any:
    """A ``keras.Model`` computing the torch policy: raw float pixels in, logits (and value) out.

    Args:
        net: the trained torch policy.
        heads: ``"policy"`` (logits only) or ``"both"`` (outputs ``[logits, value]``).
        batch_size: fixed batch of the input (1 for export: static shapes for the
            Edge TPU compiler and XNNPACK); None for a batched verification model.
    """
    import keras

    if heads not in HEADS:
        raise ValueError(f"edge.heads={heads!r} must be one of {HEADS}")
    dim, _, channels = net.obs_shape
    inp = keras.Input((dim, dim, channels), batch_size=batch_size, name="observations")
    outputs = [_copy_head(_copy_trunk(inp, net.pi_trunk, "pi"), net.pi_logits, "logits")]
    if heads == "both":
        outputs.append(_copy_head(_copy_trunk(inp, net.vf_trunk, "vf"), net.vf_out, "value"))
    return keras.Model(inp, outputs if heads == "both" else outputs[0], name=f"rlperf_{heads}")


@dataclass
class ExportCheck:
    """Numerical comparison of an exported model with the torch policy."""

    observations: int
    agreement: float  # share of observations with the same greedy action
    max_abs_logit_err: float
    mean_abs_logit_err: float
    tolerance: float  # allowed max error: tolerance * max(1, max |torch logit|)
    allowed_err: float
    # Observations whose two best torch logits are closer than allowed_err: a
    # different argmax there is within the tolerance and does not fail the check.
    near_ties: int
    disagreements_beyond_ties: int
    value_max_abs_err: float | None = None
    passed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_logits(
    candidate: np.ndarray,
    reference: np.ndarray,
    tolerance: float,
    values: tuple[np.ndarray, np.ndarray] | None = None,
) -> ExportCheck:
    """Compare logits ``(N, A)`` of an exported model with the torch reference."""
    candidate = np.asarray(candidate, dtype=np.float64).reshape(reference.shape)
    reference = np.asarray(reference, dtype=np.float64)
    err = np.abs(candidate - reference)
    allowed = float(tolerance * max(1.0, float(np.abs(reference).max(initial=0.0))))
    same = candidate.argmax(axis=1) == reference.argmax(axis=1)
    top2 = np.sort(reference, axis=1)[:, -2:] if reference.shape[1] > 1 else None
    tie = (
        (top2[:, 1] - top2[:, 0] <= 2 * allowed) if top2 is not None else np.zeros(len(same), bool)
    )
    check = ExportCheck(
        observations=int(len(reference)),
        agreement=float(same.mean()) if len(same) else float("nan"),
        max_abs_logit_err=float(err.max(initial=0.0)),
        mean_abs_logit_err=float(err.mean()) if err.size else float("nan"),
        tolerance=float(tolerance),
        allowed_err=allowed,
        near_ties=int(tie.sum()),
        disagreements_beyond_ties=int((~same & ~tie).sum()),
    )
    if values is not None:
        check.value_max_abs_err = float(
            np.abs(np.ravel(values[0]) - np.ravel(values[1])).max(initial=0.0)
        )
    check.passed = (
        check.max_abs_logit_err <= allowed
        and check.disagreements_beyond_ties == 0
        and (check.value_max_abs_err is None or check.value_max_abs_err <= allowed)
    )
    return check


def verify_keras_policy(
    model: Any, net: VisionNet, observations: np.ndarray, heads: str, tolerance: float
) -> ExportCheck:
    """Run ``model`` and the torch ``net`` on ``observations``; compare (no exception)."""
    ref_logits, ref_values = torch_outputs(net, observations, heads)
    out = model.predict(observations.astype(np.float32), batch_size=64, verbose=0)
    if heads == "both" and ref_values is not None:
        return compare_logits(out[0], ref_logits, tolerance, (out[1], ref_values))
    return compare_logits(out, ref_logits, tolerance)


def export_policy(
    net: VisionNet, observations: np.ndarray, heads: str = "policy", tolerance: float = 1e-4
) -> tuple[Any, ExportCheck]:
    """Rebuild ``net`` in Keras, verify it on real ``observations``, return (batch-1 model, check).

    Config keys (``edge.*``): ``heads``, ``export_tolerance``.

    Raises:
        ExportVerificationError: logits differ by more than ``tolerance`` (relative
            to logits above 1 in magnitude) or a greedy action differs where the
            torch policy has no near-tie.
    """
    verify_model = build_keras_policy(net, heads, batch_size=None)
    check = verify_keras_policy(verify_model, net, observations, heads, tolerance)
    if not check.passed:
        raise ExportVerificationError(
            f"the Keras rebuild of the policy does not match the torch module on "
            f"{check.observations} observations: max abs logit error "
            f"{check.max_abs_logit_err:.3g} (allowed {check.allowed_err:.3g} from "
            f"edge.export_tolerance={tolerance}), greedy-action agreement {check.agreement:.4f} "
            f"({check.disagreements_beyond_ties} disagreements beyond near-ties)"
        )
    return build_keras_policy(net, heads, batch_size=1), check
