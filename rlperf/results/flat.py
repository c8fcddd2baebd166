"""Nested result trees (a config, a fingerprint, a summary) as flat, dotted keys.

The report compares cells on these keys, and tracking sends them as parameters and tags
(:mod:`rlperf.tracking`): one spelling of a config key everywhere, Hydra's own
(``train.stop.episode_return``).
"""

from __future__ import annotations

import json
from typing import Any


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts to dotted keys; lists become compact JSON strings (hashable)."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value:
                out.update(flatten(value, name))
            else:
                out[name] = _leaf(value)
    elif prefix:
        out[prefix] = _leaf(tree)
    return out


def _leaf(value: Any) -> Any:
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return value
