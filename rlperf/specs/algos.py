"""What an algorithm is to rlperf: one :class:`AlgoSpec` per ``algo.name``.

Each algorithm's module (:mod:`rlperf.algos.ppo`, ...) defines its spec beside its
builder and its validator; :data:`rlperf.algos.SPECS` collects them. The spec's class
sits here with the other specs (standard library only: the config and the resource plan
are named for the type checker alone). Classes that
pull RLlib (its algorithm, rlperf's timing) are named by ``"module:attr"`` and loaded
when used, so importing a spec stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from rlperf.resources.plan import ResourcePlan


@dataclass(frozen=True)
class ActionSpace:
    """The action space an algorithm takes, and what to suggest when an env has another."""

    space: str  # the gymnasium space class name: "Discrete", "Box"
    env_hint: str  # a fitting env option
    algo_hint: str  # another algorithm for the other kind of actions


@dataclass(frozen=True)
class AlgoSpec:
    """One algorithm: its RLlib class, what it takes, how rlperf builds, checks and times it."""

    name: str  # algo.name
    rllib_class: str  # "module:Class" of RLlib's Algorithm; its default config is the base
    # The AlgorithmConfig with rlperf's settings: builder(default config, cfg, plan).
    builder: Callable[[Any, DictConfig, ResourcePlan], Any]
    # The algorithm's own config checks (cfg), after those every algorithm has.
    validator: Callable[[DictConfig], None]
    timing: str  # "module:Class" of its rlperf.algos.timing.Timing
    # RLlib's num_learners default, what learners=null gives without a multi-GPU layout.
    default_learners: int = 0
    actions: ActionSpace | None = None  # None: any action space

    def rllib_config(self) -> Any:
        """RLlib's default ``AlgorithmConfig`` of the algorithm (imports RLlib)."""
        return load(self.rllib_class).get_default_config()

    def timing_class(self) -> type:
        """Its :class:`rlperf.algos.timing.Timing` subclass (imports RLlib)."""
        cls = load(self.timing)
        assert isinstance(cls, type)
        return cls


def load(path: str) -> Any:
    """The object ``"module:attr"`` names."""
    module, _, attr = path.partition(":")
    return getattr(import_module(module), attr)
