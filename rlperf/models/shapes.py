"""Conv-stack shape arithmetic (TensorFlow 'same' / 'valid' padding), torch-free.

Used by config validation (before anything expensive is imported) and by the
torch and Keras builders, so that all three agree on every layer's padding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlperf.errors import ConvStackError


@dataclass(frozen=True)
class ConvLayerShape:
    """One conv layer of the trunk with its computed geometry."""

    index: int
    in_hw: int
    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    padding: str  # "same" or "valid"
    pad_before: int  # TF 'same' puts the extra pixel after: pad_after >= pad_before
    pad_after: int
    out_hw: int


def parse_filter(spec: Sequence[Any], index: int) -> tuple[int, int, int]:
    """``[out_channels, [kh, kw], stride]`` -> (out_channels, k, stride); square kernels only."""
    if len(spec) != 3:
        raise ConvStackError(
            f"model.conv_filters[{index}]={list(spec)!r}: expected [out_channels, [kh, kw], stride]"
        )
    out_ch, kernel, stride = spec
    if isinstance(kernel, Sequence) and not isinstance(kernel, str):
        kernel = list(kernel)
        if len(kernel) != 2 or kernel[0] != kernel[1]:
            raise ConvStackError(
                f"model.conv_filters[{index}] kernel={kernel!r}: only square kernels [k, k] "
                "are supported"
            )
        kernel = kernel[0]
    if isinstance(stride, Sequence) and not isinstance(stride, str):
        stride = list(stride)
        if len(stride) != 2 or stride[0] != stride[1]:
            raise ConvStackError(
                f"model.conv_filters[{index}] stride={stride!r}: only square strides are supported"
            )
        stride = stride[0]
    for name, value in (("out_channels", out_ch), ("kernel", kernel), ("stride", stride)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConvStackError(
                f"model.conv_filters[{index}] {name}={value!r}: must be a positive integer"
            )
    return int(out_ch), int(kernel), int(stride)


def conv_stack_shapes(
    dim: int, in_channels: int, conv_filters: Sequence[Sequence[Any]]
) -> list[ConvLayerShape]:
    """Compute every layer's geometry; raise ConvStackError unless the last reaches 1x1.

    All layers but the last use TF 'same' padding (out = ceil(in / stride)); the
    last uses 'valid' (out = floor((in - k) / stride) + 1) and must produce 1x1.
    """
    if not conv_filters:
        raise ConvStackError("model.conv_filters is empty: at least one conv layer is needed")
    layers: list[ConvLayerShape] = []
    hw, ch = dim, in_channels
    last = len(conv_filters) - 1
    for i, spec in enumerate(conv_filters):
        out_ch, k, s = parse_filter(spec, i)
        if i < last:
            out_hw = math.ceil(hw / s)
            pad_total = max((out_hw - 1) * s + k - hw, 0)
            before, after = pad_total // 2, pad_total - pad_total // 2
            padding = "same"
        else:
            out_hw = (hw - k) // s + 1 if hw >= k else 0
            before = after = 0
            padding = "valid"
        layers.append(ConvLayerShape(i, hw, ch, out_ch, k, s, padding, before, after, out_hw))
        hw, ch = out_hw, out_ch
    if layers[-1].out_hw != 1:
        raise ConvStackError(
            f"model.conv_filters does not reach 1x1 for model.dim={dim}: the last layer "
            f"('valid' padding) outputs {max(layers[-1].out_hw, 0)}x{max(layers[-1].out_hw, 0)}. "
            f"Computed shapes:\n{format_shapes(layers)}\n"
            f"Choose the last kernel equal to its input size ({layers[-1].in_hw})."
        )
    return layers


def format_shapes(layers: Sequence[ConvLayerShape]) -> str:
    """A human-readable table of the layer geometry, for errors and ``--cfg`` style output."""
    rows = [
        f"  conv{ly.index}: {ly.in_hw}x{ly.in_hw}x{ly.in_channels} "
        f"-[{ly.out_channels}, {ly.kernel}x{ly.kernel}, stride {ly.stride}, {ly.padding}]-> "
        f"{max(ly.out_hw, 0)}x{max(ly.out_hw, 0)}x{ly.out_channels}"
        for ly in layers
    ]
    return "\n".join(rows)
