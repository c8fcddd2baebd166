"""The ``rlperf`` command: a thin Hydra shell around the stages.

Composition and ``--help`` import only Hydra and the schemas; the stage that
runs imports Ray, torch or TensorFlow itself. The exit status follows
docs/exit-codes.md (:mod:`rlperf.errors`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import hydra
from omegaconf import DictConfig

from rlperf.config.schema import register_configs
from rlperf.config.search_path import (
    SHIPPED_CONF,
    preset_file_overrides,
    user_primary_config_clash,
)
from rlperf.console.filters import TF_IMPORT_LOGGER, OnceFilter
from rlperf.errors import ConfigError, ExitCode, run_command
from rlperf.specs.stages import READ_BY

#: Short for ``verbosity=verbose`` (Hydra itself has no ``-v``).
VERBOSE_FLAGS = ("-v", "--verbose")

_job_started = False
_job_error: Exception | None = None


@hydra.main(version_base="1.3", config_path=SHIPPED_CONF, config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    global _job_started, _job_error
    _job_started = True
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    # rlperf.stages pulls the job wrapper, rlperf.algos, gymnasium and ale_py: deferred so
    # that `--help` and `--cfg job` import only Hydra and the schemas.
    from rlperf.stages import run_stage

    if HydraConfig.get().mode != RunMode.RUN:  # a sweep's cell: its launcher reports
        return run_stage(cfg)
    try:
        refuse_sweep_options(HydraConfig.get())
        warn_other_stage_keys(HydraConfig.get(), str(cfg.stage))
        return run_stage(cfg)
    except Exception as exc:
        # Raised again by _run: Hydra would first print "Error executing job ...".
        _job_error = exc
        return None


#: Config nodes that only a multirun (``-m``) reads: set in a single run they do nothing.
SWEEP_ONLY = ("hydra.sweeper.", "hydra.launcher.")


def refuse_sweep_options(hydra_cfg: Any) -> None:
    """A single run (no ``-m``) given sweep options: the command line's are an error (the
    user asked for a sweep or a search and would get one plain job, minutes later), a
    preset's ``hydra.sweeper.params`` a one-line warning (the preset runs one job: its
    defaults). ``hydra_cfg``: Hydra's config of this run (``HydraConfig.get()``)."""
    given = [o for o in hydra_cfg.overrides.hydra if o.lstrip("+~").startswith(SWEEP_ONLY)]
    if given:
        raise ConfigError(
            f"{', '.join(given)}: sweep options do nothing in a single run; add -m to "
            "sweep or search (docs/sweeps.md, docs/search.md)"
        )
    params = hydra_cfg.sweeper.get("params") if "sweeper" in hydra_cfg else None
    if params:
        axes = ", ".join(f"{k}={v}" for k, v in params.items())
        print(
            f"rlperf: warning: hydra.sweeper.params ({axes}) has no effect without -m: this "
            "runs one job with the defaults; add -m to sweep them",
            file=sys.stderr,
        )


def warn_other_stage_keys(hydra_cfg: Any, stage: str) -> None:
    """One warning line per command-line override of a key only other stages read
    (``rollout.episodes=5`` in a training run, ``run=...`` given to training): the run
    goes on, and the terminal says the key does nothing here."""
    for override in hydra_cfg.overrides.task:
        key = override.lstrip("+~").split("=", 1)[0]
        readers = READ_BY.get(key.split(".", 1)[0])
        if readers is not None and stage not in readers:
            print(
                f"rlperf: warning: {override} does nothing in a stage={stage} run (read by "
                + " / ".join(f"stage={r}" for r in readers)
                + ")",
                file=sys.stderr,
            )


def _run() -> None:
    _hydra_main()
    if _job_error is not None:
        raise _job_error


def expand_verbose_flag(args: list[str]) -> list[str]:
    """``-v`` / ``--verbose`` -> the override ``verbosity=verbose``."""
    if not any(a in VERBOSE_FLAGS for a in args):
        return args
    return ["verbosity=verbose", *(a for a in args if a not in VERBOSE_FLAGS)]


def _composition_error(exc: BaseException) -> bool:
    """Hydra's errors before any job started: a bad override or config name (exit 2)."""
    from hydra.errors import HydraException

    return isinstance(exc, HydraException) and not _job_started


def main() -> None:
    """Console-script entry point; exits with the status of docs/exit-codes.md."""
    global _job_started, _job_error
    _job_started, _job_error = False, None
    # RLlib imports TensorFlow whenever it is installed, even for torch
    # algorithms: ~4 s and ~500 MB in the driver and in every env runner (Ray
    # workers inherit this environment). The edge stage imports TensorFlow itself.
    os.environ.setdefault("RLLIB_TEST_NO_TF_IMPORT", "1")
    # RLlib then logs "Not importing TensorFlow for test purposes" at each of its ~40
    # imports of TensorFlow: once is enough, in the log (rlperf.console.filters).
    tf_logger = logging.getLogger(TF_IMPORT_LOGGER)
    if not any(isinstance(f, OnceFilter) for f in tf_logger.filters):
        tf_logger.addFilter(OnceFilter())
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Hydra re-raises instead of printing "Error executing job" and exiting 1:
    # rlperf maps every exception to its exit status itself.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    clash = user_primary_config_clash()
    if clash is not None:
        print(
            f"rlperf: {clash} would replace rlperf's primary config; a conf/ folder in the "
            f"working directory may hold group options (conf/experiment/*.yaml, ...) but "
            f"not config.yaml (docs/configuration.md#your-own-configs)",
            file=sys.stderr,
        )
        raise SystemExit(ExitCode.user_error)
    try:
        sys.argv[1:] = preset_file_overrides(expand_verbose_flag(sys.argv[1:]))
    except ValueError as exc:
        print(f"rlperf: {exc}", file=sys.stderr)
        raise SystemExit(ExitCode.user_error) from None
    register_configs()
    raise SystemExit(run_command(_run, "rlperf", _composition_error))


if __name__ == "__main__":
    main()
