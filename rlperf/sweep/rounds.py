"""Repeats of a grid: independent runs of every configuration, in interleaved rounds,
stopped when precise enough, raced within each comparison set (docs/sweeps.md#repeats).

``hydra.sweeper.repeats`` (``min``, ``max``, ``precision``) and ``hydra.sweeper.race`` make
the :class:`Design`. Round ``r`` runs repeat ``r`` of every configuration still open, in an
order shuffled per round (deterministically: a resumed sweep runs the same order, which
``sweep.json`` records under ``rounds``). Repeat 0 is the cell as the grid gives it (its
own ``seed``, so sweep folders from before repeats resume); repeat ``r`` is the same
override list with ``seed`` derived from the cell and ``r`` (:func:`derive_seed`), never one
a cell of the grid already uses.

After each round the runs' objective values are read back (``judge``: the report's own
reading, injected by the launcher plugin, since the report sits above the sweep engine) and
a configuration is closed when it has ``max`` runs, when its run-to-run interval is within
``±precision`` (:class:`rlperf.results.precision.PrecisionRule` over the planned looks
``min..max``, on the geometric scale the report pools runs on), or, racing, when it is
slower than the best of its comparison set by more than their interval
(:func:`rlperf.results.precision.race`). Closed configurations get no more runs.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlperf.errors import SweepError
from rlperf.results.precision import (
    PrecisionRule,
    RunValue,
    race,
)
from rlperf.sweep.design import Design
from rlperf.sweep.preflight import cluster_preflight, preflight, record_not_run, register_groups
from rlperf.sweep.prepare import prepare_cell
from rlperf.sweep.progress import cell_label
from rlperf.sweep.state import Cell, Group, Sweep
from rlperf.vocabulary import RunStatus

if TYPE_CHECKING:
    from rlperf.sweep.groups import LocalRay

#: Derived seeds lie in [0, SEED_RANGE): what numpy, torch and gymnasium all take.
SEED_RANGE = 2**31 - 1

#: Reads the objective value of every completed run among the given cell folders.
Judge = Callable[[Sequence[Path]], list[RunValue]]


def derive_seed(base_hash: str, repeat: int, taken: set[int]) -> int:
    """The seed of repeat ``repeat`` of the cell ``base_hash``: a digest of both, moved on
    past every seed in ``taken`` (the grid's own and the repeats' so far), so a repeat
    never reruns another cell."""
    digest = hashlib.sha256(f"{base_hash}:repeat:{repeat}".encode()).hexdigest()
    seed = int(digest, 16) % SEED_RANGE
    while seed in taken:
        seed = (seed + 1) % SEED_RANGE
    return seed


def override_key(override: str) -> str:
    """The key of a Hydra override (``++seed=3`` -> ``seed``)."""
    return override.split("=", 1)[0].lstrip("+~")


def with_seed(overrides: Sequence[str], seed: int) -> list[str]:
    """``overrides`` with ``seed`` set to ``seed`` (an existing seed override replaced)."""
    return [o for o in overrides if override_key(o) != "seed"] + [f"seed={seed}"]


def round_order(hashes: Sequence[str], round_index: int) -> list[str]:
    """The order round ``round_index`` runs ``hashes`` in: shuffled with a seed of the round
    and the cells, so the same sweep runs the same order when resumed. Round 0 of a sweep
    of one run each keeps Hydra's order (the caller does not shuffle it)."""
    order = sorted(hashes)
    key = f"{round_index}:" + ",".join(order)
    rng = random.Random(int(hashlib.sha256(key.encode()).hexdigest(), 16))
    rng.shuffle(order)
    return order


@dataclass
class Closed:
    """Why a configuration gets no more runs."""

    round: int  # the round after which it closed (0-based)
    why: str  # max | precision | eliminated
    runs: int  # completed runs it has
    text: str  # the sentence the progress line and the report give

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "why": self.why, "runs": self.runs, "text": self.text}


def decide(
    design: Design,
    round_index: int,
    values: Sequence[RunValue],
    configuration_of: dict[str, str],
    open_bases: set[str],
    labels: dict[str, str],
) -> dict[str, Closed]:
    """Which open base cells close after round ``round_index``.

    ``values``: the objective of every completed run so far; ``configuration_of``: each base
    cell's configuration (the report's key: seeds pooled), filled from ``values``; a base
    cell whose runs have no value (failed, not measured) closes at ``max`` only.
    ``labels``: a configuration's name in sentences.
    """
    done = round_index + 1  # runs each open configuration has had
    by_conf: dict[str, list[float]] = {}
    comparison: dict[str, str] = {}
    for v in values:
        by_conf.setdefault(v.configuration, []).append(v.value)
        comparison[v.configuration] = v.comparison
    bases_of: dict[str, list[str]] = {}
    for base in open_bases:
        bases_of.setdefault(configuration_of.get(base, base), []).append(base)
    closing: dict[str, Closed] = {}

    def close(conf: str, why: str, text: str) -> None:
        for base in bases_of.get(conf, []):
            closing[base] = Closed(round_index, why, len(by_conf.get(conf, [])), text)

    if done >= design.max:
        for conf in bases_of:
            close(conf, "max", f"{design.max} run(s): repeats.max")
        return closing
    if done < design.min:
        return closing
    if design.precision is not None:
        rule = PrecisionRule(design.precision, design.looks, batched=False, log=True)
        for conf in bases_of:
            runs = [x for x in by_conf.get(conf, []) if x > 0]
            if len(runs) < 2:
                continue
            iv = rule.interval(runs)
            if iv.within(design.precision):
                close(
                    conf,
                    "precision",
                    f"precision reached: ±{iv.relative_half_width:.1%} after {len(runs)} runs",
                )
    if design.race:
        _race(design, round_index, by_conf, comparison, bases_of, closing, labels, close)
    return closing


def _race(
    design: Design,
    round_index: int,
    by_conf: dict[str, list[float]],
    comparison: dict[str, str],
    bases_of: dict[str, list[str]],
    closing: dict[str, Closed],
    labels: dict[str, str],
    close: Callable[[str, str, str], None],
) -> None:
    """Close the open configurations separated from the best of their comparison set."""
    sets: dict[str, list[str]] = {}
    for conf, name in comparison.items():
        sets.setdefault(name, []).append(conf)
    for confs in sets.values():
        measured = {c: [x for x in by_conf[c] if x > 0] for c in confs}
        measured = {c: xs for c, xs in measured.items() if xs}
        racing = [c for c in measured if c in bases_of]
        if len(measured) < 2 or not racing:
            continue
        # Configurations closed earlier stay in (their runs count, one may be the best).
        # A race looks after the rounds that another round follows: max - max(min, 2).
        result = race(measured, looks=max(1, design.max - max(design.min, 2)), log=True)
        for conf, lost in result.closed.items():
            if conf not in racing or all(b in closing for b in bases_of[conf]):
                continue
            best = labels.get(result.best, result.best)
            close(
                conf,
                "eliminated",
                f"eliminated in round {round_index + 1}: {lost.estimate:.2f}x slower than "
                f"{best} [{lost.low:.2f}, {lost.high:.2f}]",
            )


def completed_dirs(cells: Sequence[Cell]) -> list[Path]:
    """Folders of the completed rlperf cells among ``cells``."""
    return [c.out_dir for c in cells if c.rlperf and c.record.status == RunStatus.completed]


class Rounds:
    """A sweep's rounds: the base cells (run 0 of every configuration, the grid's own), the
    repeats made for each round, and what closed after each (``sweep.json`` ``rounds``)."""

    def __init__(self, sweep: Sweep, groups: list[Group], judge: Judge | None) -> None:
        self.sweep = sweep
        self.design = Design.of(sweep.setup.config)
        if (self.design.precision is not None or self.design.race) and judge is None:
            raise SweepError(
                "hydra.sweeper.repeats.precision and hydra.sweeper.race read the runs' results "
                "between rounds: run the sweep with rlperf's launcher (hydra/launcher=rlperf_tune)"
            )
        self.judge = judge
        self.round0 = groups
        self.bases = [c for c in sweep.cells if c.record.repeat == 0]
        self.open = {c.record.hash for c in self.bases if c.rlperf and _may_repeat(c)}
        self.closed: dict[str, Closed] = {}
        self.seeds = {int(c.task_cfg.seed) for c in self.bases if c.rlperf and "seed" in c.task_cfg}
        self.seen: dict[str, int] = {}
        for c in sweep.cells:
            root = c.record.hash.split("~", 1)[0]
            self.seen[root] = self.seen.get(root, 0) + 1
        self.taken = {c.record.subdir for c in sweep.cells}
        # Each round's order: kept from an earlier run of the same design (resume).
        previous = sweep.index.rounds
        same = previous.get("design") == self.design.to_json()
        self.orders: list[list[str]] = list(previous.get("order", [])) if same else []
        if not self.design.one_run:
            sweep.index.rounds = {"design": self.design.to_json(), "order": self.orders,
                                  "closed": {}}  # fmt: skip
            sweep.progress.say(f"repeats: {self.design.describe()}")

    def label(self, round_index: int) -> str:
        return "" if self.design.one_run else f"-round{round_index}"

    def groups_of_round(self, round_index: int, local: LocalRay | None) -> list[Group]:
        """Round ``round_index``'s groups, each with its cells in the round's order; the group
        whose Ray is already up first."""
        groups = self.round0 if round_index == 0 else self._repeat_groups(round_index, local)
        if self.design.one_run:
            return groups
        order = self._order(round_index, [c.record.hash for g in groups for c in g.cells])
        rank = {h: i for i, h in enumerate(order)}
        for g in groups:
            g.cells.sort(key=lambda c: rank[c.record.hash])
        if local is not None:
            groups.sort(key=lambda g: not local.keeps(g))
        if round_index > 0:
            self.sweep.progress.say(
                f"round {round_index + 1} of up to {self.design.max}: "
                f"{sum(len(g.cells) for g in groups)} run(s) of the {len(self.open)} "
                "configuration(s) still open"
            )
        return [g for g in groups if g.cells]

    def _order(self, round_index: int, hashes: list[str]) -> list[str]:
        """The round's order: as recorded (a resumed sweep), cells new to it after; else
        shuffled. Returns the order of ``hashes``; the record keeps every cell of the round."""
        if round_index < len(self.orders):
            recorded = self.orders[round_index]
            self.orders[round_index] = recorded + [h for h in hashes if h not in recorded]
        else:
            self.orders.append(round_order(hashes, round_index))
        self.sweep.index.save()
        wanted = set(hashes)
        return [h for h in self.orders[round_index] if h in wanted]

    def _repeat_groups(self, round_index: int, local: LocalRay | None) -> list[Group]:
        """Repeat ``round_index`` of every open configuration: made, pre-flighted, grouped."""
        sweep = self.sweep
        made: list[Cell] = []
        for base in self.bases:
            if base.record.hash not in self.open:
                continue
            seed = derive_seed(base.record.hash, round_index, self.seeds)
            self.seeds.add(seed)  # nor one another repeat took
            cell = prepare_cell(
                sweep.setup,
                with_seed(base.record.overrides, seed),
                base.record.job_num,
                sweep.sweep_dir,
                sweep.index,
                self.seen,
                self.taken,
                repeat=(base, round_index),
            )
            sweep.cells.append(cell)
            sweep.by_hash[cell.record.hash] = cell
            made.append(cell)
        existing = local is None
        to_run = [c for c in made if not c.kept]
        groups = preflight(sweep, existing, to_run)
        if existing and groups:
            cluster_preflight(sweep, groups)
        record_not_run(sweep, made)
        for group in groups:
            if not group.cells:
                continue
            gid = local.gid if local is not None and local.keeps(group) else None
            if gid is None and existing and sweep.index.groups:
                gid = len(sweep.index.groups) - 1
            if gid is None:
                register_groups(sweep, [group])
            else:
                group.gid = gid
                sweep.index.groups[gid]["cells"] += [c.record.hash for c in group.cells]
                for c in group.cells:
                    c.record.group = gid
        sweep.progress.add_live([c.record for c in to_run])
        return groups

    def decide(self, round_index: int) -> bool:
        """Close what is done after round ``round_index``; whether another round runs."""
        if self.design.one_run:
            return False
        closing: dict[str, Closed] = {}
        for base in self.bases:  # a configuration whose run failed gets no more runs
            h = base.record.hash
            last = self._run_of(base, round_index)
            if h in self.open and (last is None or not _may_repeat(last)):
                what = "not run" if last is None else str(last.record.status)
                closing[h] = Closed(round_index, "failed", round_index + 1,
                                    f"run {round_index} {what}: no more runs")  # fmt: skip
        self.open -= set(closing)
        adaptive = self.design.precision is not None or self.design.race
        values = self.judge(completed_dirs(self.sweep.cells)) if adaptive and self.judge else []
        base_of = {c.out_dir.resolve(): c.record.base or c.record.hash for c in self.sweep.cells}
        configuration_of = {base_of[v.path]: v.configuration for v in values if v.path in base_of}
        labels = {v.configuration: v.label for v in values}
        closing |= decide(self.design, round_index, values, configuration_of, self.open, labels)
        for h, why in closing.items():
            self.closed[h] = why
            self.open.discard(h)
            self.sweep.by_hash[h].record.closed = why.to_json()
        self.sweep.index.rounds["closed"] = {h: c.to_json() for h, c in self.closed.items()}
        for c in self.bases:
            if c.record.hash in closing:
                self.sweep.save(c)
        self._announce(round_index, closing)
        return bool(self.open) and round_index + 1 < self.design.max

    def _run_of(self, base: Cell, round_index: int) -> Cell | None:
        for c in self.sweep.cells:
            if (c.record.base or c.record.hash) == base.record.hash and (
                c.record.repeat == round_index
            ):
                return c
        return None

    def _announce(self, round_index: int, closing: dict[str, Closed]) -> None:
        say = self.sweep.progress.say
        if not closing:
            if self.open:
                say(f"round {round_index + 1}: {len(self.open)} configuration(s) go on")
            return
        counts: dict[str, int] = {}
        for c in closing.values():
            counts[c.why] = counts.get(c.why, 0) + 1
        what = ", ".join(f"{n} {why}" for why, n in counts.items())
        say(
            f"round {round_index + 1}: {len(closing)} configuration(s) closed ({what}); "
            f"{len(self.open)} go on"
        )
        for h, c in closing.items():
            if c.why in ("eliminated", "precision"):
                say(f"  {cell_label(self.sweep.by_hash[h].record)}: {c.text}")


def _may_repeat(cell: Cell) -> bool:
    """Whether a configuration whose last run is ``cell`` gets another (it completed, or
    is still to run)."""
    return cell.kept or cell.record.status in (RunStatus.completed, RunStatus.pending)
