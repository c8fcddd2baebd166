"""Identity of a sweep cell: a hash of its resolved config, not Hydra's job number.

Hydra numbers the jobs of a multirun in the order it expands the overrides, so
the same cell gets another number as soon as a sweep is extended or reordered.
Resume therefore keys cells by :func:`cell_hash`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.layout import NON_IDENTITY_KEYS

# A cell's statuses are the runs' own (:class:`rlperf.vocabulary.RunStatus`, with
# ``pending`` before its trial starts); FINAL_STATUSES there says which are kept
# on resume. The keys left out of the hash, and the cell's file, are named in
# rlperf.layout too (NON_IDENTITY_KEYS, CELL_FILE): the report reads them.


def identity_config(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The resolved job config minus ``NON_IDENTITY_KEYS`` (rlperf.layout), a plain dict.

    Interpolations are resolved where they can be; a config whose interpolations
    cannot be resolved outside its job (e.g. ``${hydra:runtime.output_dir}``
    without a Hydra config set) is hashed unresolved rather than refused.
    """
    if not isinstance(cfg, DictConfig):
        return {str(k): v for k, v in cfg.items() if k not in NON_IDENTITY_KEYS}
    out: dict[str, Any] = {}
    for key in cfg:
        if key in NON_IDENTITY_KEYS:
            continue
        # Key by key, so that the left-out nodes (Hydra's, with its own resolvers)
        # are never resolved; interpolations still resolve against the whole config.
        try:
            value = cfg[key]
            if OmegaConf.is_config(value):
                value = OmegaConf.to_container(value, resolve=True)
            out[str(key)] = value
        except Exception:
            raw = OmegaConf.to_container(cfg, resolve=False)
            assert isinstance(raw, dict)
            out[str(key)] = raw[key]
    return out


def cell_hash(cfg: DictConfig | Mapping[str, Any], length: int = 16) -> str:
    """Stable hex digest of :func:`identity_config` (key order does not matter)."""
    blob = json.dumps(identity_config(cfg), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def is_rlperf_config(cfg: DictConfig | Mapping[str, Any]) -> bool:
    """Whether ``cfg`` is an rlperf job config (has the keys that decide its resources).

    The launcher also runs plain Hydra apps (Hydra's launcher test suites do):
    their cells ask for one CPU and need no special Ray start.
    """
    return all(k in cfg for k in ("stage", "workers", "gpu_layout", "cpu_affinity", "env_runner"))
