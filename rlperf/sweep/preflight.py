"""A sweep's pre-flight: every cell validated and its Ray request compared with what Ray
will have, before anything runs.

Infeasible cells are skipped with the reason (``hydra.launcher.strict=true``: the
sweep fails instead); the rest are grouped by how Ray must be started (visible
GPUs, CPU count, affinity). On an existing cluster the settings it cannot honour
are an error before anything runs, and cells beyond its resources are skipped.
Cells that will not run still get their folder (``.hydra/``, ``summary.json``,
``cell.json``).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rlperf.algos import plan_resources
from rlperf.errors import SweepError
from rlperf.job_wrapper import write_refused_summary
from rlperf.resources.plan import ResourcePlan, detect_machine
from rlperf.results.storage import is_uri
from rlperf.sweep.index import now_iso
from rlperf.sweep.resources import (
    RayStart,
    cell_request,
    cluster_axis_error,
    cluster_capacity,
    local_capacity,
    local_infeasibility,
    ray_start_of,
    shortfall,
)
from rlperf.sweep.state import Cell, Group, Sweep
from rlperf.validation.validate import validate_config
from rlperf.vocabulary import REFUSED_STATUSES, RunStatus


def preflight(sweep: Sweep, existing: bool, cells: list[Cell] | None = None) -> list[Group]:
    """Validate, take each cell's request, skip what can never run locally, group the rest.

    ``existing``: the cells run on a Ray that is already there; the settings it
    cannot honour (affinity, CPU count, named GPUs) are an error before anything
    runs, and every cell goes into one group. ``cells``: these (a round's repeats)
    instead of the sweep's.
    """
    overcommit = bool(sweep.ray_cfg.overcommit_cpus)
    machine = detect_machine()
    by_start: dict[RayStart, list[Cell]] = {}
    axis_errors: list[str] = []
    for cell in sweep.cells if cells is None else cells:
        if cell.kept:
            continue
        rec = cell.record
        plan = _plan_of(cell)  # once per cell: the axis check and the request share it
        # Checked before validation, which would call the same cell merely invalid.
        reason = cluster_axis_error(ray_start_of(plan)) if existing and plan else None
        if reason is not None:
            axis_errors.append(f"  #{rec.job_num} {' '.join(rec.overrides)}: {reason}")
            continue
        try:
            if cell.rlperf:
                validate_config(cell.task_cfg)
            cell.request = cell_request(cell.task_cfg, plan)
        except Exception as exc:
            cell.error = exc
            rec.status, rec.reason = RunStatus.invalid, f"{type(exc).__name__}: {exc}"
            continue
        rec.request = cell.request.bundles
        if existing:
            by_start.setdefault(RayStart(), []).append(cell)
            continue
        reason = local_infeasibility(cell.request, machine, overcommit)
        if reason is not None:
            rec.status, rec.reason = RunStatus.skipped, reason
            continue
        by_start.setdefault(cell.request.ray_start, []).append(cell)
    if axis_errors:
        raise SweepError(
            "these cells need Ray started in a way an existing cluster cannot honour "
            "(nothing was run):\n" + "\n".join(axis_errors)
        )
    groups = []
    for start, cells in by_start.items():
        capacity = None
        if not existing:
            requests = [c.request for c in cells if c.request is not None]
            capacity = local_capacity(start, requests, machine, overcommit)
        groups.append(Group(-1, start, cells, capacity))
    return groups


def _plan_of(cell: Cell) -> ResourcePlan | None:
    """The resource plan of an rlperf cell; None for another task's cell, or a config the
    plan cannot be made of (validation reports it)."""
    if not cell.rlperf:
        return None
    try:
        return plan_resources(cell.task_cfg)
    except Exception:  # an invalid config: validation reports it
        return None


def cluster_preflight(sweep: Sweep, groups: list[Group]) -> None:
    """On an existing cluster: skip cells whose request exceeds the cluster's resources."""
    total, nodes = cluster_capacity()
    for group in groups:
        group.capacity = {k: v for k, v in total.items() if k in ("CPU", "GPU")}
        keep = []
        for cell in group.cells:
            assert cell.request is not None
            reason = shortfall(cell.request.bundles, total, nodes)
            if reason is None:
                keep.append(cell)
            else:
                cell.record.status, cell.record.reason = (
                    RunStatus.skipped,
                    f"{reason} (Ray cluster)",
                )
        group.cells = keep


#: Seconds a node has to answer the shared-folder check (a zero-CPU task).
SHARED_CHECK_S = 60.0


def check_shared_folder(folder: Path, what: str = "the sweep folder") -> None:
    """On a cluster, the folder the trials write into (the sweep folder, or a storage given
    as a path: ``what``) must be the one every node sees: a token file written there is
    looked for by a zero-CPU task pinned to each live node. A node that does not see it
    (or does not answer within :data:`SHARED_CHECK_S`) stops the sweep before anything
    runs, in one line naming the node and the remedy (``hydra.launcher.storage=s3://...``)."""
    import secrets

    # Ray: only to ask a running cluster's nodes; deferred as in cluster_capacity.
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    folder.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(8)
    token = folder / f".rlperf-shared-check-{secret}"
    token.write_text(secret)

    @ray.remote(num_cpus=0, max_retries=0)
    def sees(path: str, text: str) -> bool:
        try:
            return Path(path).read_text() == text
        except OSError:
            return False

    try:
        nodes = [n for n in ray.nodes() if n.get("Alive", False)]
        refs = [
            sees.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(str(token), secret)
            for n in nodes
        ]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=SHARED_CHECK_S)
        blind = []
        for node, ref in zip(nodes, refs, strict=True):
            seen = ref in ready and ray.get(ref)
            if not seen:
                how = (
                    "does not see it"
                    if ref in ready
                    else f"did not answer in {SHARED_CHECK_S:.0f} s"
                )
                blind.append(f"{node['NodeManagerAddress']} ({node['NodeID'][:12]}) {how}")
    finally:
        token.unlink(missing_ok=True)
    if blind:
        raise SweepError(
            f"{what} {folder} is not shared by every node of the Ray cluster: node "
            f"{'; node '.join(blind)}, so the cells it ran would keep their files there; give "
            f"the sweep a storage every node reaches: hydra.launcher.storage=s3://<bucket>/"
            f"<prefix> (docs/sweeps.md#storage)"
        )


def check_sweep_shared(sweep: Sweep) -> None:
    """:func:`check_shared_folder` for where the sweep's trials write: the sweep folder, or
    a storage given as a path (a URI needs no check: every node reaches it by network)."""
    if sweep.storage is None:
        check_shared_folder(sweep.sweep_dir)
    elif not is_uri(sweep.storage.uri):
        check_shared_folder(Path(sweep.storage.tune_path()), "hydra.launcher.storage")


def register_groups(sweep: Sweep, groups: list[Group]) -> None:
    """Give each group an id in sweep.json ("groups" grows over resumed runs)."""
    for group in groups:
        if not group.cells:
            continue
        group.gid = len(sweep.index.groups)
        sweep.index.groups.append(
            {
                "started_at": None,
                "ray_start": group.start.to_json(),
                "describe": group.start.describe(),
                "address": sweep.ray_cfg.address,
                "capacity": group.capacity,
                "cells": [c.record.hash for c in group.cells],
                "ray_start_s": None,
            }
        )
        for cell in group.cells:
            cell.record.group = group.gid


def strict_check(sweep: Sweep) -> None:
    if not sweep.options.strict:
        return
    skipped = [c for c in sweep.cells if c.record.status == RunStatus.skipped and not c.kept]
    if skipped:
        lines = [
            f"  #{c.record.job_num} {' '.join(c.record.overrides)}: {c.record.reason}"
            for c in skipped
        ]
        raise SweepError(
            "hydra.launcher.strict=true and these cells cannot run here (nothing was run):\n"
            + "\n".join(lines)
        )


def record_not_run(sweep: Sweep, cells: list[Cell] | None = None) -> None:
    """Write every cell's record (``cells``: these only); give the cells that will not run
    their folder.

    A skipped or invalid cell still gets what a run would leave for it to be
    found by: the ``.hydra/`` snapshot, ``summary.json`` (status and reason) and
    ``cell.json``. Cells to run are recorded ``pending`` until their trial starts.
    """
    for cell in sweep.cells if cells is None else cells:
        if cell.kept:
            continue
        rec = cell.record
        if rec.status in REFUSED_STATUSES:
            cell.out_dir.mkdir(parents=True, exist_ok=True)
            write_hydra_snapshot(cell.sweep_config, cell.task_cfg, cell.out_dir)
            rec.finished_at = now_iso()
            if cell.rlperf:
                # A fresh summary: an earlier run's files in this folder are not this outcome.
                write_refused_summary(cell.out_dir, cell.task_cfg, rec.status, str(rec.reason))
        else:
            rec.status, rec.reason = RunStatus.pending, None
        sweep.save(cell)


def write_hydra_snapshot(sweep_config: DictConfig, task_cfg: DictConfig, out_dir: Path) -> None:
    """What Hydra's run_job writes before a job starts (for cells that never start)."""
    if sweep_config.hydra.output_subdir is None:
        return
    out = out_dir / str(sweep_config.hydra.output_subdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(task_cfg))
    hydra_node = OmegaConf.masked_copy(sweep_config, "hydra")
    (out / "hydra.yaml").write_text(OmegaConf.to_yaml(hydra_node))
    (out / "overrides.yaml").write_text(OmegaConf.to_yaml(sweep_config.hydra.overrides.task))


def announce(sweep: Sweep, groups: list[Group], existing: bool) -> None:
    recs = sweep.records
    kept = sum(1 for c in sweep.cells if c.kept)
    skipped = sum(1 for r in recs if r.status == RunStatus.skipped)
    invalid = sum(1 for r in recs if r.status == RunStatus.invalid)
    to_run = sum(len(g.cells) for g in groups)
    where = (
        f"on the Ray cluster at {sweep.ray_cfg.address or '(already connected)'}"
        if existing
        else f"in {sum(1 for g in groups if g.cells)} local Ray instance(s)"
    )
    concurrency = int(sweep.options.max_concurrent_trials)
    sweep.progress.say(
        f"{len(recs)} cells in {sweep.sweep_dir}: {to_run} to run {where}, "
        f"{kept} completed earlier (kept), {skipped} skipped, {invalid} invalid; "
        f"max_concurrent_trials={concurrency}"
        + ("" if concurrency == 1 else " (cells share the machine: measurements not isolated)")
    )
    for c in sweep.cells:
        if c.record.status in REFUSED_STATUSES and not c.kept:
            sweep.progress.emit(c.record.status, c.record, recs)
