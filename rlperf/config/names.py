"""The naming scheme of config groups and presets, and the names being retired.

Groups are named by what they select (``model``, ``env``, ``algo``,
``gpu_layout``, ``cpu_affinity``, ``backend``); ``study_*_row`` groups hold one
row of a 2021-study matrix each. Presets (``experiment=...``): ``quickstart``
(the default), ``study_*`` for the 2021 study's experiments, and new presets
named by the question they answer (``<topic>``), with ``<topic>_small`` sized
for a 2-core machine. docs/configuration.md#names has the table.

Old names keep working for one release: the ``conf/`` options are thin aliases
of the new ones, and :func:`log_deprecated_choices` says what to use instead.
It logs (``logging``) rather than raising a ``DeprecationWarning``: the test
suite turns rlperf's own DeprecationWarnings into errors, and a renamed preset
must keep running.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger("rlperf")

#: The release that drops the old names.
REMOVED_IN = "0.3"

#: group -> {old option: new option} for presets that were renamed.
RENAMED_OPTIONS: dict[str, dict[str, str]] = {
    "experiment": {
        "study": "study_sizes",
        "thesis_training": "study_training",
        "thesis_cpu": "study_cpu",
        "thesis_rollout": "study_rollout",
        "thesis_edge": "study_edge",
    },
}

#: old group -> new group (the options keep their names).
RENAMED_GROUPS: dict[str, str] = {
    "exp": "study_training_row",
    "rollout_exp": "study_rollout_row",
}


def deprecated_choices(choices: Mapping[str, str | None]) -> list[str]:
    """One message per retired name among Hydra's group ``choices`` (``{group: option}``)."""
    notes = []
    for group, option in choices.items():
        if option is None:
            continue
        new = RENAMED_OPTIONS.get(group, {}).get(str(option))
        if new is not None:
            notes.append(
                f"{group}={option} is deprecated and will be removed in rlperf {REMOVED_IN}; "
                f"use {group}={new}"
            )
        if group in RENAMED_GROUPS:
            notes.append(
                f"{group}={option} is deprecated and will be removed in rlperf {REMOVED_IN}; "
                f"use {RENAMED_GROUPS[group]}={option}"
            )
    return notes


def log_deprecated_choices(choices: Mapping[str, str | None] | None = None) -> list[str]:
    """Log :func:`deprecated_choices` of ``choices`` (default: this Hydra run's); return them."""
    if choices is None:
        choices = _hydra_choices()
    notes = deprecated_choices(choices)
    for note in notes:
        log.warning(note)
    return notes


def _hydra_choices() -> Mapping[str, str | None]:
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return {}
        return dict(HydraConfig.get().runtime.choices)
    except Exception:  # no Hydra app around this call
        return {}
