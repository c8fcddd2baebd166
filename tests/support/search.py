"""A search's trials for tests that compose a preset's cells without running it."""

from __future__ import annotations

from omegaconf import DictConfig


def search_corners(sweeper: DictConfig, overrides: list[str]) -> list[list[str]]:
    """A search's trials at the corners of its space: every axis at its first value or
    lower bound, then every axis at its last value or upper bound (docs/search.md)."""
    from rlperf.sweep.space import parse_space, with_params

    space = parse_space(with_params(sweeper.params, overrides), str(sweeper.search.algorithm))
    ends = [
        {a.key: (a.values[i] if a.kind == "choice" else (a.low, a.high)[i]) for a in space.axes}
        for i in (0, -1)
    ]
    return [space.overrides(point) for point in ends]
