"""One spec per backend (``backend.name``): what executes it and how its file is made.

Every table about backends is derived from :data:`BACKEND_SPECS`: which TFLite
variant a backend runs, which backends compress the trained policy
(:data:`COMPRESSION_BACKENDS`, built by :mod:`rlperf.tflite.compress`), which
full-integer files ``edgetpu_compiler`` takes (:data:`EDGETPU_SOURCES`,
``edge.edgetpu_source``) and which post-training CPU variants a ``.tflite`` given
with ``model_path`` can be benchmarked as (:data:`POST_TRAINING_BACKENDS`).

Adding a backend: its member of :class:`Backend` (the enum composition checks), its
spec line, its ``conf/backend/<name>.yaml`` and docs (docs/development.md#adding-a-backend).
Standard library only, so the schema and the validation step read it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, auto
from typing import Literal


class Backend(StrEnum):
    """``backend.name``: what executes the policy (one :class:`BackendSpec` each)."""

    rllib = auto()
    tflite_fp32 = auto()
    tflite_int8 = auto()
    tflite_dynamic = auto()
    tflite_fp16 = auto()
    edgetpu = auto()
    # Compressed variants, fine-tuned by distillation (the recipes below).
    tflite_qat = auto()
    tflite_prune50 = auto()
    tflite_prune75 = auto()
    tflite_prune90 = auto()
    tflite_prune75_int8 = auto()
    tflite_struct50 = auto()


#: What executes a backend's model: RLlib's torch policy, LiteRT on the CPU, the Edge TPU.
Executor = Literal["rllib", "tflite", "edgetpu"]


@dataclass(frozen=True)
class Recipe:
    """How one compressed backend is made (recorded as ``calibration.compression.recipe``)."""

    method: str  # qat | prune | structured
    sparsity: float = 0.0  # prune: share of zero weights in every pruned layer
    keep: float = 1.0  # structured: share of hidden units kept
    int8: bool = False  # prune: then full-integer post-training quantization


@dataclass(frozen=True)
class BackendSpec:
    """One ``backend.name``.

    ``variant`` is the TFLite conversion the file goes through
    (:data:`rlperf.tflite.convert.VARIANTS`; ``None`` for the torch policy), ``recipe``
    the compression before it (``None``: post-training conversion of the exported
    policy), ``edgetpu_source`` whether its full-integer file can feed the Edge TPU
    compiler.
    """

    name: str  # a Backend
    executor: Executor
    variant: str | None = None
    recipe: Recipe | None = None
    edgetpu_source: bool = False

    def __post_init__(self) -> None:
        # Keyed by the enum, held as the plain string (YAML, JSON and messages write it so).
        object.__setattr__(self, "name", str(self.name))
        # A pruned-then-int8 recipe says int8 in its record; the conversion must agree.
        if self.recipe is not None and self.recipe.int8 != (self.variant == "int8"):
            raise ValueError(f"{self.name}: recipe int8={self.recipe.int8}, variant {self.variant}")

    @property
    def in_rllib(self) -> bool:
        """Runs RLlib's own torch policy (no exported file)."""
        return self.executor == "rllib"

    @property
    def on_edgetpu(self) -> bool:
        """Runs on the Edge TPU (its file compiled by ``edgetpu_compiler``)."""
        return self.executor == "edgetpu"

    @property
    def compressed(self) -> bool:
        """Fine-tuned from the trained policy (one cached file per backend and settings)."""
        return self.recipe is not None


#: Every backend, in the order the docs list them.
BACKEND_SPECS: tuple[BackendSpec, ...] = (
    BackendSpec(Backend.rllib, "rllib"),
    BackendSpec(Backend.tflite_fp32, "tflite", "fp32"),
    BackendSpec(Backend.tflite_fp16, "tflite", "fp16"),
    BackendSpec(Backend.tflite_dynamic, "tflite", "dynamic"),
    BackendSpec(Backend.tflite_int8, "tflite", "int8", edgetpu_source=True),
    BackendSpec(Backend.edgetpu, "edgetpu", "int8"),  # compiles the edge.edgetpu_source file
    BackendSpec(Backend.tflite_qat, "tflite", "qat", Recipe("qat"), edgetpu_source=True),
    BackendSpec(Backend.tflite_prune50, "tflite", "fp32", Recipe("prune", sparsity=0.5)),
    BackendSpec(Backend.tflite_prune75, "tflite", "fp32", Recipe("prune", sparsity=0.75)),
    BackendSpec(Backend.tflite_prune90, "tflite", "fp32", Recipe("prune", sparsity=0.9)),
    BackendSpec(
        Backend.tflite_prune75_int8,
        "tflite",
        "int8",
        Recipe("prune", sparsity=0.75, int8=True),
        edgetpu_source=True,
    ),
    BackendSpec(Backend.tflite_struct50, "tflite", "fp32", Recipe("structured", keep=0.5)),
)

#: ``backend.name`` -> its spec.
BACKENDS: dict[str, BackendSpec] = {spec.name: spec for spec in BACKEND_SPECS}
if set(BACKENDS) != set(Backend) or len(BACKENDS) != len(BACKEND_SPECS):
    raise ValueError(f"BACKEND_SPECS {list(BACKENDS)} must list every Backend once")


def backend_spec(name: object) -> BackendSpec:
    """The spec of ``backend.name`` ``name`` (a :class:`Backend` or its string)."""
    return BACKENDS[str(name)]


#: Backends that compress the trained policy (need ``run=`` / ``checkpoint=``).
COMPRESSION_BACKENDS: tuple[str, ...] = tuple(s.name for s in BACKEND_SPECS if s.compressed)

#: The full-integer variants ``backend=edgetpu`` can compile (``edge.edgetpu_source``).
EDGETPU_SOURCES: tuple[str, ...] = tuple(s.name for s in BACKEND_SPECS if s.edgetpu_source)

#: The CPU backends of a post-training conversion of the exported policy.
POST_TRAINING_BACKENDS: tuple[str, ...] = tuple(
    s.name for s in BACKEND_SPECS if s.executor == "tflite" and not s.compressed
)
