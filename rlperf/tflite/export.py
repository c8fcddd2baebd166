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

MLP policies (:class:`~rlperf.models.mlp_net.MlpNet`) become Dense layers
with the same activations (torch ``Linear`` weights transposed). The Keras
model takes the observation as the env gives it, as float32: a ``Box`` in its
own shape (flattened inside), a ``Discrete`` state as one number ``(1,)``. The
torch module's one-hot encoding of that state is rebuilt from two fixed Dense +
ReLU layers — ``relu(1 - relu(s - i) - relu(i - s))`` for every state ``i``,
exactly 1 at ``i = s`` and 0 elsewhere for an integer ``s`` — so the exported
graph holds only FULLY_CONNECTED and activation ops, which every TFLite variant
(int8 and the Edge TPU included) runs; no ONE_HOT or GATHER op.

The same builder makes the model with Keras 3 (``keras``, the export every
variant starts from) or with Keras 2 (``tf_keras``: what
tensorflow-model-optimization wraps for quantization-aware training and
pruning, :mod:`rlperf.tflite.compress`): ``api=`` picks the module; the layers,
names and weights are the same.

``heads="policy"`` exports the policy branch only (acting needs no value
function: half the compute); ``heads="both"`` adds the value branch as a
second output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rlperf.errors import ExportVerificationError
from rlperf.models.actor import action_bounds, action_range, relative_action_error

if TYPE_CHECKING:
    from rlperf.models.mlp_net import MlpNet
    from rlperf.models.vision_net import VisionNet
    from rlperf.tflite.tflite_model import InputNormalization

    PolicyNet = VisionNet | MlpNet

HEADS = ("policy", "both")
#: The Keras modules the builder can use (``build_keras_policy(api=...)``).
KERAS_APIS = ("keras", "tf_keras")


def keras_module(api: str) -> Any:
    """``keras`` (Keras 3) or ``tf_keras`` (Keras 2, for tensorflow-model-optimization)."""
    import importlib

    if api not in KERAS_APIS:
        raise ValueError(f"api={api!r} must be one of {KERAS_APIS}")
    return importlib.import_module(api)


def continuous_actions(net: PolicyNet) -> bool:
    """A Box-action policy: its exported policy head gives actions, not logits."""
    return getattr(net, "kind", "vision") == "mlp" and not cast("MlpNet", net).discrete_actions


def torch_outputs(
    net: PolicyNet, observations: np.ndarray, heads: str = "policy", batch: int = 256
) -> tuple[np.ndarray, np.ndarray | None]:
    """What the exported policy head computes, by the torch module: logits ``(N, A)``, or
    a Box policy's reference actions ``(N, d)`` (:mod:`rlperf.models.actor`); and values
    ``(N,)`` for ``heads="both"``."""
    # torch: deferred, serve imports this module and a served model_path never loads torch.
    import torch

    logits, values = [], []
    with torch.inference_mode():
        for i in range(0, len(observations), batch):
            x = torch.from_numpy(np.ascontiguousarray(observations[i : i + batch]))
            out = net.logits(x).numpy()
            box = continuous_actions(net)
            logits.append(cast("MlpNet", net).actions_of(out) if box else out)
            if heads == "both":
                values.append(net.value(x).numpy())
    return np.concatenate(logits), (np.concatenate(values) if heads == "both" else None)


def _copy_trunk(keras: Any, x: Any, trunk: Any, prefix: str) -> Any:
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


def _copy_head(keras: Any, x: Any, conv: Any, name: str) -> Any:
    layer = keras.layers.Conv2D(conv.out_channels, 1, name=f"{name}_conv")
    x = layer(x)
    kernel = conv.weight.detach().cpu().numpy().transpose(2, 3, 1, 0)
    layer.set_weights([kernel.astype(np.float32), conv.bias.detach().cpu().numpy()])
    return keras.layers.Reshape((conv.out_channels,), name=name)(x)


#: Keras activation of each ``model.activation`` (torch module of the same name).
KERAS_ACTIVATIONS = {"tanh": "tanh", "relu": "relu", "elu": "elu", "silu": "silu"}


def policy_input_shape(net: PolicyNet) -> tuple[int, ...]:
    """Shape of one observation at the exported model's input (without the batch)."""
    if (
        getattr(net, "kind", "vision") == "mlp"
        and cast("MlpNet", net).obs_spec["type"] == "discrete"
    ):
        return (1,)
    return tuple(int(d) for d in net.obs_shape)


def _one_hot(keras: Any, x: Any, n: int) -> Any:
    """Exact one-hot of an integer state ``x`` ``(B, 1)`` from fixed Dense + ReLU layers."""
    states = np.arange(n, dtype=np.float32)
    diff = keras.layers.Dense(2 * n, activation="relu", name="one_hot_diff")
    x = diff(x)  # [relu(s - i), relu(i - s)] for every state i
    diff.set_weights([np.concatenate([np.ones(n), -np.ones(n)])[None].astype(np.float32),
                      np.concatenate([-states, states])])  # fmt: skip
    pick = keras.layers.Dense(n, activation="relu", name="one_hot")
    x = pick(x)  # relu(1 - |s - i|)
    pick.set_weights([-np.vstack([np.eye(n), np.eye(n)]).astype(np.float32),
                      np.ones(n, np.float32)])  # fmt: skip
    return x


#: A per-feature input normalization folded into a first layer: (center, half-width) of
#: the flattened observation (:class:`rlperf.tflite.tflite_model.InputNormalization`).
Fold = tuple[np.ndarray, np.ndarray]


def _folded(kernel: np.ndarray, bias: np.ndarray, fold: Fold | None) -> list[np.ndarray]:
    """A first layer's Dense weights ``[kernel (in, out), bias]`` taking normalized input
    ``z = (x - center) / half`` and computing what it computed on ``x``: ``x = half z +
    center``, so ``kernel' = diag(half) kernel`` and ``bias' = bias + center kernel``."""
    if fold is None:
        return [kernel, bias]
    center, half = (np.asarray(v, np.float64).ravel() for v in fold)
    k = np.asarray(kernel, np.float64)
    return [(k * half[:, None]).astype(np.float32), (bias + center @ k).astype(np.float32)]


def _copy_mlp(
    keras: Any, x: Any, layers: Any, activation: str, prefix: str, fold: Fold | None = None
) -> Any:
    """Dense copies of a torch ``Sequential`` of Linear layers (activation after all but the
    last; ``fold`` into the first)."""
    linears = [m for m in layers if hasattr(m, "weight")]
    for i, lin in enumerate(linears):
        last = i == len(linears) - 1
        dense = keras.layers.Dense(
            lin.out_features,
            activation=None if last else KERAS_ACTIVATIONS[activation],
            name=f"{prefix}_dense{i}" if not last else prefix,
        )
        x = dense(x)
        kernel, bias = lin.weight.detach().cpu().numpy().T.copy(), lin.bias.detach().cpu().numpy()
        dense.set_weights(_folded(kernel, bias, fold if i == 0 else None))
    return x


def _actor_tail(keras: Any, x: Any, net: MlpNet, fold: Fold | None = None) -> Any:
    """A Box policy's reference actor (:mod:`rlperf.models.actor`): the hidden layers, the
    mean half of the last layer, then ``tanh`` (SAC) or a clip to [-1, 1] (a Gaussian head:
    ``relu6`` of ``3 (mean + 1)``, folded into the layer's weights), then the linear map
    onto [low, high] as a diagonal Dense layer ``action``. Only FULLY_CONNECTED and
    activation ops: int8 quantizes the output over the action range. ``fold``: into the
    first layer."""
    linears: list[Any] = [m for m in net.pi_net if hasattr(m, "weight")]
    hidden, last = linears[:-1], linears[-1]
    for i, lin in enumerate(hidden):
        dense = keras.layers.Dense(
            lin.out_features, activation=KERAS_ACTIVATIONS[net.activation], name=f"logits_dense{i}"
        )
        x = dense(x)
        kernel, bias = lin.weight.detach().numpy().T.copy(), lin.bias.detach().numpy()
        dense.set_weights(_folded(kernel, bias, fold if i == 0 else None))
    d = net.num_outputs // 2
    w, b = last.weight.detach().numpy()[:d].T.copy(), last.bias.detach().numpy()[:d].copy()
    if not hidden:
        w, b = _folded(w, b, fold)
    low, high = action_bounds(net.action_spec)
    if net.squash == "tanh":
        mean = keras.layers.Dense(d, name="action_mean")
        x = mean(x)
        mean.set_weights([w, b])
        x = keras.layers.Activation("tanh", name="action_tanh")(x)
        # unit = tanh(mean) in [-1, 1]: action = low + (unit + 1) (high - low) / 2
        kernel, bias = (high - low) / 2.0, low + (high - low) / 2.0
    else:
        # relu6(3 (mean + 1)) = 3 (clip(mean, -1, 1) + 1): a fused activation of the
        # FULLY_CONNECTED op (XNNPACK and the Edge TPU run it in int8; a separate
        # MINIMUM would stay on the CPU's builtin kernels).
        mean = keras.layers.Dense(d, activation="relu6", name="action_mean")
        x = mean(x)
        mean.set_weights([3.0 * w, 3.0 * (b + 1.0)])
        kernel, bias = (high - low) / 6.0, low
    scale = keras.layers.Dense(d, name="action")
    x = scale(x)
    scale.set_weights([np.diag(kernel).astype(np.float32), bias.astype(np.float32)])
    return x


def _build_keras_mlp(
    keras: Any, net: MlpNet, heads: str, batch_size: int | None, fold: Fold | None
) -> Any:
    inp = keras.Input(policy_input_shape(net), batch_size=batch_size, name="observations")
    if net.obs_spec["type"] == "discrete":
        if fold is not None:
            raise ValueError("a Discrete observation has no per-feature input normalization")
        features = _one_hot(keras, inp, net.in_features)
    else:
        features = keras.layers.Flatten(name="flatten")(inp) if len(net.obs_shape) > 1 else inp
    if net.discrete_actions:
        outputs = [_copy_mlp(keras, features, net.pi_net, net.activation, "logits", fold)]
    else:
        outputs = [_actor_tail(keras, features, net, fold)]
    if heads == "both":
        outputs.append(_copy_mlp(keras, features, net.vf_net, net.activation, "value", fold))
    return keras.Model(inp, outputs if heads == "both" else outputs[0], name=f"rlperf_{heads}")


def build_keras_policy(
    net: PolicyNet,
    heads: str = "policy",
    batch_size: int | None = 1,
    api: str = "keras",
    input_normalization: InputNormalization | None = None,
) -> Any:
    """A ``keras.Model`` computing the torch policy: the raw observation (pixels as floats)
    in, logits (and value) out.

    Args:
        net: the trained torch policy (VisionNet or MlpNet).
        heads: ``"policy"`` (logits only) or ``"both"`` (outputs ``[logits, value]``).
        batch_size: fixed batch of the input (1 for export: static shapes for the
            Edge TPU compiler and XNNPACK); None for a batched verification model.
        api: ``"keras"`` (Keras 3) or ``"tf_keras"`` (Keras 2, for
            tensorflow-model-optimization).
        input_normalization: a Box MLP policy's per-feature normalization: the model then
            takes normalized observations, the inverse folded into its first layers.
    """
    keras = keras_module(api)
    if heads not in HEADS:
        raise ValueError(f"edge.heads={heads!r} must be one of {HEADS}")
    fold = None if input_normalization is None else input_normalization.arrays()
    if getattr(net, "kind", "vision") == "mlp":
        return _build_keras_mlp(keras, cast("MlpNet", net), heads, batch_size, fold)
    if fold is not None:
        raise ValueError("per-feature input normalization is for MLP policies of Box observations")
    dim, _, channels = net.obs_shape
    inp = keras.Input((dim, dim, channels), batch_size=batch_size, name="observations")
    pi = _copy_trunk(keras, inp, net.pi_trunk, "pi")
    outputs = [_copy_head(keras, pi, net.pi_logits, "logits")]
    if heads == "both":
        vf = _copy_trunk(keras, inp, net.vf_trunk, "vf")
        outputs.append(_copy_head(keras, vf, net.vf_out, "value"))
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
    # "logits", or "actions" for a Box policy: then the errors are relative to each
    # dimension's range (high - low), and there is no argmax to agree on.
    outputs: str = "logits"

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
    model: Any, net: PolicyNet, observations: np.ndarray, heads: str, tolerance: float
) -> ExportCheck:
    """Run ``model`` and the torch ``net`` on ``observations``; compare (no exception)."""
    ref_logits, ref_values = torch_outputs(net, observations, heads)
    inputs = observations.astype(np.float32).reshape(len(observations), *policy_input_shape(net))
    out = model.predict(inputs, batch_size=64, verbose=0)
    values = (out[1], ref_values) if heads == "both" and ref_values is not None else None
    policy_out = out[0] if values is not None else out
    if continuous_actions(net):
        return compare_actions(policy_out, ref_logits, cast("MlpNet", net), tolerance, values)
    return compare_logits(policy_out, ref_logits, tolerance, values)


def compare_actions(
    candidate: np.ndarray,
    reference: np.ndarray,
    net: MlpNet,
    tolerance: float,
    values: tuple[np.ndarray, np.ndarray] | None = None,
) -> ExportCheck:
    """Compare a Box policy's exported actions ``(N, d)`` with the reference actor's:
    the largest error relative to each dimension's range must be within ``tolerance``."""
    reference = np.asarray(reference, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64).reshape(reference.shape)
    rel = relative_action_error(candidate, reference, action_range(net.action_spec))
    check = ExportCheck(
        observations=int(len(reference)),
        agreement=float("nan"),
        max_abs_logit_err=float(rel.max(initial=0.0)),
        mean_abs_logit_err=float(rel.mean()) if rel.size else float("nan"),
        tolerance=float(tolerance),
        allowed_err=float(tolerance),
        near_ties=0,
        disagreements_beyond_ties=0,
        outputs="actions",
    )
    if values is not None:
        check.value_max_abs_err = float(
            np.abs(np.ravel(values[0]) - np.ravel(values[1])).max(initial=0.0)
        )
    value_ok = check.value_max_abs_err is None or check.value_max_abs_err <= tolerance * max(
        1.0, float(np.abs(values[1]).max(initial=0.0)) if values is not None else 1.0
    )
    check.passed = check.max_abs_logit_err <= tolerance and value_ok
    return check


def export_policy(
    net: PolicyNet, observations: np.ndarray, heads: str = "policy", tolerance: float = 1e-4
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
        if check.outputs == "actions":
            raise ExportVerificationError(
                f"the Keras rebuild of the policy does not match the torch module's reference "
                f"actor on {check.observations} observations: max action error "
                f"{check.max_abs_logit_err:.3g} of the range (allowed "
                f"edge.export_tolerance={tolerance})"
            )
        raise ExportVerificationError(
            f"the Keras rebuild of the policy does not match the torch module on "
            f"{check.observations} observations: max abs logit error "
            f"{check.max_abs_logit_err:.3g} (allowed {check.allowed_err:.3g} from "
            f"edge.export_tolerance={tolerance}), greedy-action agreement {check.agreement:.4f} "
            f"({check.disagreements_beyond_ties} disagreements beyond near-ties)"
        )
    return build_keras_policy(net, heads, batch_size=1), check
