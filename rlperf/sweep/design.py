"""The design of a grid's repeats: ``hydra.sweeper.repeats`` and ``hydra.sweeper.race``
(docs/sweeps.md#repeats), checked before anything runs.

Light (OmegaConf and the statistics only): the sweeper checks it before Hydra makes the
sweep folder; :mod:`rlperf.sweep.rounds` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import SweepError
from rlperf.results.storage import is_uri
from rlperf.runs.jobs import is_job_folder, runs_per_configuration, sweep_jobs
from rlperf.specs.stages import DEFAULT_STAGE, trains
from rlperf.stats.intervals import CONFIDENCE
from rlperf.stats.stopping import design_looks


@dataclass(frozen=True)
class Design:
    """How many runs each configuration gets, and when it stops getting more."""

    min: int = 1
    max: int = 1
    precision: float | None = None
    race: bool = False
    #: Folders or storage URIs of earlier sweeps whose repeated configurations on this
    #: machine make the run-to-run variance prior (``hydra.sweeper.repeats.prior``).
    prior: tuple[str, ...] = ()
    #: A downstream sweep over an upstream sweep that ran its configurations this many
    #: times: those runs are this sweep's repeats, so by default each cell runs once.
    upstream_runs: int = 0

    @classmethod
    def of(cls, config: DictConfig) -> Design:
        """The design of ``hydra.sweeper.repeats`` and ``hydra.sweeper.race`` (one run each
        for another sweeper, and for a config without a ``seed``: Hydra's own apps)."""
        node = OmegaConf.select(config, "hydra.sweeper.repeats")
        if node is None or "seed" not in config:
            return cls()
        given_min, given_max = node.get("min"), node.get("max")
        precision = node.get("precision")
        racing = bool(OmegaConf.select(config, "hydra.sweeper.race", default=False))
        # The default design over a repeated upstream: its runs are the repeats.
        default = given_min is None and given_max is None and precision is None and not racing
        upstream = _upstream_runs(config) if default else 0
        upstream = upstream if upstream >= 2 else 0  # one run each upstream: no repeats
        low = (1 if upstream else 2) if given_min is None else int(given_min)
        high = low if given_max is None else int(given_max)
        prior = node.get("prior")
        if prior is None:
            sources: tuple[str, ...] = ()
        elif isinstance(prior, str):
            sources = tuple(p for p in prior.split(",") if p)
        else:
            sources = tuple(str(p) for p in OmegaConf.to_container(prior))  # type: ignore[union-attr]
        design = cls(low, high, None if precision is None else float(precision), racing, sources,
                     upstream)  # fmt: skip
        design.check()
        return design

    def check(self) -> None:
        """Refuse a design that cannot run as asked (before anything runs)."""
        where = "hydra.sweeper.repeats"
        if self.min < 1:
            raise SweepError(f"{where}.min={self.min} must be >= 1 (1: one run each)")
        if self.max < self.min:
            raise SweepError(f"{where}.max={self.max} must be >= {where}.min={self.min}")
        if self.precision is not None and not 0 < self.precision < 1:
            raise SweepError(
                f"{where}.precision={self.precision} must be in (0, 1): 0.05 stops at ±5 %"
            )
        adaptive = [
            f"{where}.precision={self.precision}" if self.precision is not None else "",
            "hydra.sweeper.race=true" if self.race else "",
        ]
        asked = " and ".join(a for a in adaptive if a)
        if asked and self.max == self.min:
            raise SweepError(
                f"{asked} decide(s) between {where}.min and {where}.max runs, but both are "
                f"{self.min}: set {where}.max (e.g. {where}.max={self.min + 3})"
            )
        if asked and self.max < 2:
            raise SweepError(f"{asked} need(s) {where}.max >= 2 (a run-to-run interval)")
        if self.prior and not asked:
            raise SweepError(
                f"{where}.prior={','.join(self.prior)}: a history prior serves "
                f"{where}.precision or hydra.sweeper.race; set one of them"
            )
        for source in self.prior:
            if not is_uri(source) and not Path(source).expanduser().exists():
                raise SweepError(
                    f"{where}.prior={source}: no such folder (a sweep folder, a folder of "
                    "them, or a storage URI such as s3://bucket/prefix)"
                )

    @property
    def adaptive(self) -> bool:
        """Whether the runs' number is decided by looking at them."""
        return self.precision is not None or self.race

    @property
    def one_run(self) -> bool:
        return self.max == 1

    @property
    def looks(self) -> tuple[int, ...]:
        """The run counts at which a configuration's interval may be looked at."""
        return design_looks(self.min, self.max)

    def describe(self) -> str:
        """``2 to 5 runs per configuration until ±5 %, racing``."""
        if self.upstream_runs:
            return (
                f"1 run per cell: the upstream sweep's {self.upstream_runs} runs of each "
                "configuration are this sweep's repeats (hydra.sweeper.repeats.min=2 runs "
                "each cell twice)"
            )
        runs = f"{self.min}" if self.min == self.max else f"{self.min} to {self.max}"
        text = f"{runs} run(s) per configuration in interleaved rounds"
        if self.precision is not None:
            text += f", until its {CONFIDENCE:.0%} interval is within ±{self.precision:.0%}"
        if self.race:
            text += ", racing within each comparison set"
        if self.prior:
            text += f", with the run-to-run prior of {len(self.prior)} earlier sweep source(s)"
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"min": self.min, "max": self.max, "precision": self.precision,
                               "race": self.race}  # fmt: skip
        if self.prior:
            out["prior"] = list(self.prior)
        if self.upstream_runs:
            out["upstream_runs"] = self.upstream_runs
        return out


def _upstream_runs(config: DictConfig) -> int:
    """How many runs of one configuration the upstream sweep folder ``run`` of a downstream
    config holds (:func:`rlperf.runs.jobs.runs_per_configuration`); 0 for a training config,
    a job folder or no ``run``."""
    run = OmegaConf.select(config, "run", default=None)
    if run is None or trains(OmegaConf.select(config, "stage", default=DEFAULT_STAGE)):
        return 0
    folder = Path(str(run)).expanduser()
    if not folder.is_dir() or is_job_folder(folder):
        return 0
    return runs_per_configuration(sweep_jobs(folder))
