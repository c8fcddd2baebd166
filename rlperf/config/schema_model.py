"""The ``model`` group's schema: one dataclass per ``model.kind``.

An option extends its kind's schema (``defaults: [/schema/model/<kind>@_here_, _self_]``),
stored as ``schema/model/<kind>`` (:data:`MODEL_SCHEMAS`, registered by
:func:`rlperf.config.schema.register_configs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from omegaconf import MISSING


class ModelKind(StrEnum):
    """``model.kind``: the network family; each kind has its own keys (its dataclass below)."""

    vision = "vision"  # the study's conv VisionNetwork, for image observations
    mlp = "mlp"  # fully connected layers, for vector and Discrete observations


class Activation(StrEnum):
    """``model.activation`` of an MLP."""

    tanh = "tanh"
    relu = "relu"
    elu = "elu"
    silu = "silu"


@dataclass
class ModelConfig:
    """``model``: what every kind of network has. An option extends one kind's schema
    (``defaults: [/schema/model/<kind>@_here_, _self_]``), so a key of another kind is
    an error at composition."""

    name: str = MISSING
    kind: ModelKind = MISSING


@dataclass
class VisionModelConfig(ModelConfig):
    """``model.kind=vision``: the study's VisionNetwork geometry (image observations)."""

    kind: ModelKind = ModelKind.vision
    dim: int = 84
    framestack: int = 4
    # [[out_channels, [kh, kw], stride], ...]; the last layer is 'valid' and must reach 1x1.
    conv_filters: list[Any] = MISSING


@dataclass
class MlpModelConfig(ModelConfig):
    """``model.kind=mlp``: policy and value MLPs of their own (vector / Discrete observations).

    ``Discrete`` observations are one-hot encoded inside the network; a ``Box``
    action space gets a Gaussian head (mean and log-std), a ``Discrete`` one logits.
    """

    kind: ModelKind = ModelKind.mlp
    hiddens: list[int] = field(default_factory=lambda: [64, 64])
    activation: Activation = Activation.tanh


#: ``model.kind`` -> the schema of its keys.
MODEL_SCHEMAS: dict[str, type[ModelConfig]] = {
    ModelKind.vision: VisionModelConfig,
    ModelKind.mlp: MlpModelConfig,
}
