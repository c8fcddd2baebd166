"""The model presets shipped in ``conf/model/``, readable without Hydra."""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml

from rlperf.config.search_path import shipped_conf_dir


@cache
def model_presets() -> dict[str, tuple[int, list[list[Any]]]]:
    """name -> (input dim, conv_filters) for every vision ``model`` option (model1..model6,
    tiny, tiny2; the MLP options have no conv stack)."""
    out: dict[str, tuple[int, list[list[Any]]]] = {}
    for path in sorted((shipped_conf_dir() / "model").glob("*.yaml")):
        node = yaml.safe_load(path.read_text())
        if "conv_filters" in node:
            out[node["name"]] = (int(node["dim"]), node["conv_filters"])
    return out


def study_models() -> dict[str, tuple[int, list[list[Any]]]]:
    """The study's six models (docs/study.md), without the small ``tiny`` and ``tiny2``."""
    return {k: v for k, v in model_presets().items() if k.startswith("model")}
