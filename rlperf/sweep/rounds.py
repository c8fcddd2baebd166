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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlperf.errors import NoRunsFoundError, SweepError
from rlperf.results.storage import is_uri, mirror
from rlperf.stats.intervals import across_runs
from rlperf.stats.race import (
    MODERATED,
    WELCH,
    History,
    Rule,
    RunValue,
    by_configuration,
    race,
    rule_for,
)
from rlperf.stats.stopping import design_confidence, precise, relative_half_width
from rlperf.sweep.design import Design
from rlperf.sweep.preflight import cluster_preflight, preflight, record_not_run, register_groups
from rlperf.sweep.prepare import prepare_cell
from rlperf.sweep.progress import cell_label
from rlperf.sweep.state import Cell, Group, Sweep
from rlperf.vocabulary import EARLY_CLOSINGS, ClosedBy, RunStatus

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
    why: ClosedBy
    runs: int  # completed runs it has
    text: str  # the sentence the progress line and the report give

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "why": self.why, "runs": self.runs, "text": self.text}


@dataclass
class Decision:
    """What one round's decision closed, and the rule each comparison set was decided by
    (``sweep.json`` ``rounds.rules``)."""

    closing: dict[str, Closed] = field(default_factory=dict)
    rules: dict[str, Rule] = field(default_factory=dict)


def decide(
    design: Design,
    round_index: int,
    values: Sequence[RunValue],
    configuration_of: dict[str, str],
    open_bases: set[str],
    labels: dict[str, str],
    history: History | None = None,
    rules: Mapping[str, Rule] | None = None,
) -> Decision:
    """Which open base cells close after round ``round_index``.

    ``values``: the objective of every completed run so far; ``configuration_of``: each base
    cell's configuration (the report's key: seeds pooled), filled from ``values``; a base
    cell whose runs have no value (failed, not measured) closes at ``max`` only.
    ``labels``: a configuration's name in sentences. ``history``: the priors fitted on
    earlier sweeps (``hydra.sweeper.repeats.prior``); ``rules``: the rules of the rounds
    before, kept where a set's spreads already disagreed with the prior.
    """
    done = round_index + 1  # runs each open configuration has had
    by_conf = by_configuration(values)
    bound = {v.configuration for v in values if v.bound}
    sets: dict[str, list[RunValue]] = {}
    for v in values:
        sets.setdefault(v.comparison, []).append(v)
    bases_of: dict[str, list[str]] = {}
    for base in open_bases:
        bases_of.setdefault(configuration_of.get(base, base), []).append(base)
    out = Decision()

    def close(conf: str, why: ClosedBy, text: str) -> None:
        for base in bases_of.get(conf, []):
            out.closing[base] = Closed(round_index, why, len(by_conf.get(conf, [])), text)

    if done >= design.max:
        for conf in bases_of:
            close(conf, ClosedBy.max, f"{design.max} run(s): repeats.max")
        return out
    if not design.adaptive:
        return out
    for name, members in sets.items():
        kept = (rules or {}).get(name)
        disagreed = kept is not None and kept.name == WELCH and kept.agreement_p is not None
        out.rules[name] = kept if disagreed and kept else rule_for(history, members)
    if done < design.min:
        return out
    if design.precision is not None:
        level = design_confidence(design.to_json())
        set_of = {v.configuration: v.comparison for v in values}
        for conf in bases_of:
            rule = out.rules.get(set_of.get(conf, ""))
            est = across_runs(by_conf.get(conf, []), level, conf in bound,
                              rule.prior if rule and rule.name == MODERATED else None)  # fmt: skip
            if precise(est, design.precision):
                said = f"±{relative_half_width(est):.1%} after {est.runs} runs"
                close(conf, ClosedBy.precision, f"precision reached: {said}")
    if design.race:
        for name, members in sets.items():
            _race(design, round_index, name, members, out, bases_of, labels, close)
    return out


def _race(
    design: Design,
    round_index: int,
    name: str,
    members: Sequence[RunValue],
    out: Decision,
    bases_of: dict[str, list[str]],
    labels: dict[str, str],
    close: Callable[[str, ClosedBy, str], None],
) -> None:
    """Close the open configurations of one comparison set that its race shows slower."""
    measured = by_configuration(members)
    racing = [c for c in measured if c in bases_of]
    if len(measured) < 2 or not racing:
        return
    rule = out.rules[name]
    # Configurations closed earlier stay in (their runs count, one may be the best).
    # A race looks after the rounds that another round follows: max - max(min, 2).
    result = race(
        measured,
        looks=max(1, design.max - max(design.min, 2)),
        bounds={v.configuration for v in members if v.bound},
        prior=rule.prior if rule.name == MODERATED else None,
    )
    for conf, lost in result.closed.items():
        if conf not in racing or all(b in out.closing for b in bases_of[conf]):
            continue
        to = labels.get(lost.to, lost.to)
        close(
            conf,
            ClosedBy.eliminated,
            f"eliminated in round {round_index + 1}: {lost.ratio.value:.2f}x slower than "
            f"{to} [{lost.ratio.low:.2f}, {lost.ratio.high:.2f}]",
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
        if self.design.adaptive and judge is None:
            raise SweepError(
                "hydra.sweeper.repeats.precision and hydra.sweeper.race read the runs' results "
                "between rounds: run the sweep with rlperf's launcher (hydra/launcher=rlperf_tune)"
            )
        self.judge = judge
        # Each completed run is judged once: its value is kept for the rounds after.
        self.judged: dict[Path, list[RunValue]] = {}
        self.rules: dict[str, Rule] = {}
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
        if not self.design.one_run or self.design.upstream_runs:
            sweep.progress.say(f"repeats: {self.design.describe()}")
        self.history = self._history()

    def _history(self) -> History | None:
        """The runs of the earlier sweeps ``hydra.sweeper.repeats.prior`` names (a storage
        URI mirrored first), judged as this sweep's are (none of this sweep's own), with the
        prior each machine and objective of them fits."""
        if not self.design.prior or self.judge is None:
            return None
        folders = [mirror(p) if is_uri(p) else Path(p).expanduser() for p in self.design.prior]
        mine = self.sweep.sweep_dir.resolve()
        try:
            judged = self.judge(folders)
        except NoRunsFoundError as exc:
            raise SweepError(f"hydra.sweeper.repeats.prior: {exc}") from exc
        values = [v for v in judged if mine not in v.path.parents and v.path.parent != mine]
        history = History.of(values)
        fitted = [p for p in history.priors.values() if not isinstance(p, str)]
        confs = len({v.configuration for v in values})
        self.sweep.progress.say(
            f"repeats.prior: {len(values):,} run(s) of {confs:,} configuration(s) from "
            f"{len(folders)} source(s); "
            + ("; ".join(p.describe() for p in fitted) if fitted else "no prior fits: Welch")
        )
        return history

    def values(self) -> list[RunValue]:
        """Every completed run's objective value: the runs new since the last round judged,
        the others' kept."""
        new = [d for d in completed_dirs(self.sweep.cells) if d.resolve() not in self.judged]
        if new and self.judge is not None:
            for d in new:
                self.judged[d.resolve()] = []
            for v in self.judge(new):
                self.judged.setdefault(v.path, []).append(v)
            empty = [d for d in new if not self.judged[d.resolve()]]
            if empty:  # a rule, said: such a run is not counted (docs/report.md#statistics)
                self.sweep.progress.say(
                    f"{len(empty)} completed run(s) without a value of their objective (none "
                    "measured, zero, negative or not finite): not counted by the rounds"
                )
        return [v for vs in self.judged.values() for v in vs]

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
                closing[h] = Closed(round_index, ClosedBy.failed, round_index + 1,
                                    f"run {round_index} {what}: no more runs")  # fmt: skip
        self.open -= set(closing)
        values = self.values() if self.design.adaptive else []
        base_of = {c.out_dir.resolve(): c.record.base or c.record.hash for c in self.sweep.cells}
        configuration_of = {base_of[v.path]: v.configuration for v in values if v.path in base_of}
        labels: dict[str, str] = {}
        for v in values:  # the first judgement's: round 0 named every configuration of the set
            labels.setdefault(v.configuration, v.label)
        decision = decide(self.design, round_index, values, configuration_of, self.open, labels,
                          self.history, self.rules)  # fmt: skip
        closing |= decision.closing
        self.rules.update(decision.rules)
        if self.rules:
            self.sweep.index.rounds["rules"] = {k: r.to_json() for k, r in self.rules.items()}
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
        counts: dict[ClosedBy, int] = {}
        for c in closing.values():
            counts[c.why] = counts.get(c.why, 0) + 1
        what = ", ".join(f"{n} {why}" for why, n in counts.items())
        say(
            f"round {round_index + 1}: {len(closing)} configuration(s) closed ({what}); "
            f"{len(self.open)} go on"
        )
        for h, c in closing.items():
            if c.why in EARLY_CLOSINGS:
                say(f"  {cell_label(self.sweep.by_hash[h].record)}: {c.text}")


def _may_repeat(cell: Cell) -> bool:
    """Whether a configuration whose last run is ``cell`` gets another (it completed, or
    is still to run)."""
    return cell.kept or cell.record.status in (RunStatus.completed, RunStatus.pending)
