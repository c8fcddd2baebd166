"""Checks of single config values that every validator shares (the algorithms' own in
:mod:`rlperf.algos`, the groups' and stages' in :mod:`rlperf.validation.validate`).

Each raises :class:`~rlperf.errors.ConfigError` naming the key and the value. Imports
only :mod:`rlperf.errors`, so the leaves below validation (the algorithm specs) use it
without importing the config package, which validation above them is part of.
"""

from __future__ import annotations

from typing import Any

from rlperf.errors import ConfigError


def positive(key: str, value: Any, allow_zero: bool = False) -> None:
    """``value`` is a number > 0 (>= 0 with ``allow_zero``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{key}={value!r} is not valid; it must be a number {bound}")


def fraction(key: str, value: Any, low_open: bool = False) -> None:
    """``value`` is in [0, 1] ((0, 1] with ``low_open``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and (0 < value <= 1 if low_open else 0 <= value <= 1)
    if not ok:
        raise ConfigError(f"{key}={value!r} must be in {'(0, 1]' if low_open else '[0, 1]'}")
