"""Sweeps of the test suite run each configuration once unless a test says otherwise."""

from __future__ import annotations

from collections.abc import Sequence

#: A test sweep runs each configuration once unless it says otherwise: a grid's default
#: is 2 runs (docs/sweeps.md#repeats), which would double every sweep of the suite.
ONE_RUN = "hydra.sweeper.repeats.min=1"


def one_run(args: Sequence[str]) -> list[str]:
    """``args`` of a sweep (``-m``) with :data:`ONE_RUN` unless they set repeats."""
    if "-m" not in args or any(a.startswith("hydra.sweeper.repeats") for a in args):
        return list(args)
    return [*args, ONE_RUN]
