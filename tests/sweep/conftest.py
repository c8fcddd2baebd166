"""The sweep engine in this process with its Tune part faked: :func:`multirun` runs
``rlperf -m`` through Hydra and rlperf's launcher, and :class:`FakeGroups` stands in for
:func:`rlperf.sweep.groups.run_group` (no Ray). With ``s_per_1k`` a fake cell is a training
job's folder in rlperf's result format (tests/support/synthetic.py) whose time per 1 000 env
steps is given, so the rounds of repeats judge it with the report's own reading."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hydra._internal.hydra import Hydra
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf
from support.one_run import one_run
from support.synthetic import CellSpec, fingerprint, write_cell

from rlperf.config.schema import register_configs
from rlperf.config.search_path import SHIPPED_CONF
from rlperf.layout import SUMMARY_FILE
from rlperf.sweep.resources import RayStart

#: Counted iterations of a synthetic training cell (after one warm-up iteration).
ITERATIONS = 6


class FakeGroups:
    """Stands in for :func:`rlperf.sweep.groups.run_group`: records each group and
    completes its cells (``fail``: cells with one of these overrides fail).

    ``s_per_1k(overrides, repeat)``: each cell's true time per 1 000 env steps; the cell is
    then written as a training job whose iterations scatter 0.5 % around it, and its
    ``fingerprint.json`` starts a minute after the last one (distinct runs)."""

    def __init__(
        self,
        fail: tuple[str, ...] = (),
        s_per_1k: Callable[[list[str], int], float] | None = None,
        stop_after: int | None = None,
    ) -> None:
        self.groups: list[tuple[RayStart, list[list[str]]]] = []
        self.fail = fail
        self.s_per_1k = s_per_1k
        self.stop_after = stop_after  # Ctrl-C once this many cells ran
        self.ran = 0

    def __call__(self, sweep: Any, group: Any, local: Any, label: str = "") -> None:
        self.groups.append((group.start, [c.record.overrides for c in group.cells]))
        for cell in group.cells:
            if self.stop_after is not None and self.ran >= self.stop_after:
                raise KeyboardInterrupt
            self.ran += 1
            failed = any(f in cell.record.overrides for f in self.fail)
            status = "failed" if failed else "completed"
            cell.out_dir.mkdir(parents=True, exist_ok=True)
            if self.s_per_1k is not None and not failed:
                self._write_training(cell)
            else:
                (cell.out_dir / SUMMARY_FILE).write_text(json.dumps({"status": status}))
            cell.record.status, cell.record.runs = status, cell.record.runs + 1
            cell.record.reason = "RuntimeError: on purpose" if failed else None
            cell.record.return_value = None if failed else float(cell.record.job_num)
            sweep.save(cell)

    def _write_training(self, cell: Any) -> None:
        assert self.s_per_1k is not None
        repeat = int(cell.record.repeat)
        mean = self.s_per_1k(list(cell.record.overrides), repeat)
        rng = np.random.default_rng(repeat)
        n = ITERATIONS + 1
        iter_s = mean * (1 + rng.normal(0.0, 0.005, n))
        metrics = pd.DataFrame({
            "iteration": np.arange(1, n + 1), "iter_s": iter_s, "env_steps": 1000,
            "excluded": ["warmup"] + [""] * ITERATIONS, "time_s": np.cumsum(iter_s),
            "episode_return_mean": 1.0,
        })  # fmt: skip
        config = yaml.safe_load(OmegaConf.to_yaml(cell.task_cfg))
        start = f"2026-12-01T{10 + self.ran // 60:02d}:{self.ran % 60:02d}:00+00:00"
        summary = {"status": "completed", "stage": "train", "warmup": {"rule": "first 1"},
                   "iterations": n, "wall_s": float(iter_s.sum()) + 5.0,
                   "total_env_steps": 1000 * n}  # fmt: skip
        spec = CellSpec(config, list(cell.record.overrides), fingerprint(start_time=start),
                        summary, metrics)  # fmt: skip
        write_cell(cell.out_dir, spec)


def multirun(sweep_dir: Path, *overrides: str) -> list[Any]:
    """``rlperf -m <overrides>`` in this process; the JobReturns of its one batch (one run
    of each configuration unless ``overrides`` set repeats)."""
    overrides = tuple(one_run(["-m", *overrides])[1:])
    register_configs()
    GlobalHydra.instance().clear()
    try:
        hydra_ = Hydra.create_main_hydra_file_or_module(
            calling_file=None, calling_module="rlperf.cli", config_path=SHIPPED_CONF, job_name="cli"
        )
        batches = hydra_.multirun(
            config_name="config",
            task_function=lambda cfg: 0.0,
            overrides=[*overrides, f"hydra.sweep.dir={sweep_dir}"],
            with_log_configuration=False,
        )
    finally:
        GlobalHydra.instance().clear()
    return list(batches[0])


@pytest.fixture
def fake_groups(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeGroups]:
    from rlperf.sweep import launch

    def _install(**kwargs: Any) -> FakeGroups:
        fake = FakeGroups(**kwargs)
        monkeypatch.setattr(launch, "run_group", fake)
        return fake

    return _install
