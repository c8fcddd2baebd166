"""A search's space from Hydra overrides (hydra-optuna-sweeper's syntax), as Tune objects.

``choice(a,b)``, ``range(start,stop[,step])``, ``interval(a,b)`` and
``tag(log, interval(a,b))`` are parsed by Hydra's override parser into
``ChoiceSweep``, ``RangeSweep`` and ``IntervalSweep``; :func:`parse_space` sorts
the overrides of a search into fixed ones (passed to every trial as they are),
searched axes and grid axes (comma lists ``a,b``), and refuses what one Tune run
cannot vary. :func:`tune_space` then builds Tune's search-space objects; it is
the only function here that imports Ray. See docs/search.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlperf.errors import SearchSpaceError
from rlperf.sweep.search_results import per_iteration

#: Top-level keys (and config groups) that decide how Ray itself is started: one Tune
#: run has one Ray, so a search cannot vary them (run one search per value instead).
PROCESS_LEVEL_KEYS = ("cpu_affinity", "gpu_layout", "ray", "hydra")

ALGORITHMS = ("random", "optuna", "grid")


@dataclass(frozen=True)
class Axis:
    """One searched key: ``kind`` choice | int | float, its values or bounds, ``log``."""

    key: str
    kind: str
    values: tuple[Any, ...] = ()
    low: float | int | None = None
    high: float | int | None = None  # inclusive
    step: int | None = None  # ints on a grid of multiples of ``step``
    log: bool = False
    grid: bool = False  # a comma list: every value, not a sample

    def contains(self, value: Any) -> bool:
        """Whether ``value`` lies in this axis's declared space."""
        if self.kind == "choice":
            return value in self.values
        assert self.low is not None and self.high is not None
        if self.kind == "int" and (not isinstance(value, int) or isinstance(value, bool)):
            return False
        if self.step and (int(value) - int(self.low)) % self.step:
            return False
        return float(self.low) <= float(value) <= float(self.high)

    def describe(self) -> str:
        if self.kind == "choice":
            return ("grid " if self.grid else "choice ") + ", ".join(map(str, self.values))
        scale = "log " if self.log else ""
        step = f" step {self.step}" if self.step else ""
        return f"{scale}{self.kind} [{self.low}, {self.high}]{step}"


@dataclass
class SearchSpace:
    """The overrides of a search, sorted: ``fixed`` as typed, ``axes`` searched (or grid)."""

    fixed: list[str] = field(default_factory=list)
    axes: list[Axis] = field(default_factory=list)

    def overrides(self, params: dict[str, Any]) -> list[str]:
        """The override list of one trial: the fixed overrides, then its parameter values."""
        return [*self.fixed, *(f"{k}={_override_value(v)}" for k, v in params.items())]

    def axis(self, key: str) -> Axis:
        return next(a for a in self.axes if a.key == key)


def _override_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_space(arguments: Sequence[str], algorithm: str) -> SearchSpace:
    """Sort ``arguments`` (command line overrides, then ``hydra.sweeper.params`` entries).

    Comma lists are grid axes: every value runs (``tune.grid_search``) with
    algorithm ``random`` or ``grid``; Optuna proposes each trial from the earlier
    ones and cannot take a grid, so with ``optuna`` they are refused. Process-level
    keys (:data:`PROCESS_LEVEL_KEYS`) are refused as axes.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if algorithm not in ALGORITHMS:
        raise SearchSpaceError(
            f"hydra.sweeper.search.algorithm={algorithm} is not one of {', '.join(ALGORITHMS)}"
        )
    space = SearchSpace()
    parsed = OverridesParser.create().parse_overrides(list(arguments))
    last = {o.get_key_element(): i for i, o in enumerate(parsed)}  # a later one wins
    for i, override in enumerate(parsed):
        if last[override.get_key_element()] != i:
            continue
        if not override.is_sweep_override():
            space.fixed.append(override.input_line or "")
            continue
        key = override.get_key_element()
        top = key.lstrip("+~").split(".")[0].split("/")[0].split("@")[0]
        if top in PROCESS_LEVEL_KEYS:
            raise SearchSpaceError(
                f"{key} cannot vary inside a search: it decides how Ray is started and a "
                f"search is one Tune run in one Ray; run one search per value of {key} instead"
            )
        space.axes.append(_axis(key, override.value(), algorithm))
    if algorithm == "grid" and not space.axes:
        raise SearchSpaceError("hydra.sweeper.search.algorithm=grid needs at least one axis")
    return space


def _axis(key: str, sweep: Any, algorithm: str) -> Axis:
    """The :class:`Axis` of a ``ChoiceSweep``, ``RangeSweep`` or ``IntervalSweep``."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    tags = set(sweep.tags)
    unknown = tags - {"log"}
    if unknown:
        raise SearchSpaceError(f"{key}: unknown tag(s) {sorted(unknown)}; only 'log' is understood")
    if getattr(sweep, "shuffle", False):
        raise SearchSpaceError(f"{key}: shuffle(...) has no meaning in a search")
    log = "log" in tags
    if isinstance(sweep, ChoiceSweep):
        if log:
            raise SearchSpaceError(f"{key}: tag(log, ...) applies to interval(a,b) only")
        grid = bool(sweep.simple_form)
        if grid and algorithm == "optuna":
            raise SearchSpaceError(
                f"{key}={','.join(map(str, sweep.list))} is a grid axis (a comma list), which "
                f"Optuna cannot search: write {key}=choice({','.join(map(str, sweep.list))}) "
                f"to search it, or use hydra.sweeper.search.algorithm=random|grid"
            )
        return Axis(key, "choice", tuple(sweep.list), grid=grid)
    if isinstance(sweep, RangeSweep) and sweep.step == 0:
        # Hydra's parser takes a zero step; counting towards the stop would never end.
        raise SearchSpaceError(
            f"{key}: range({sweep.start},{sweep.stop},0) needs a step other than 0"
        )
    if algorithm == "grid":
        if isinstance(sweep, RangeSweep) and not log:
            return Axis(key, "choice", tuple(_range_values(sweep)), grid=True)
        raise SearchSpaceError(
            f"{key}: algorithm=grid runs lists and ranges; interval(...) needs random or optuna"
        )
    if isinstance(sweep, RangeSweep):
        return _range_axis(key, sweep, log)
    assert isinstance(sweep, IntervalSweep)
    return _interval_axis(key, sweep, log)


def _range_values(sweep: Any) -> list[Any]:
    values, x = [], sweep.start
    while (x < sweep.stop) if sweep.step > 0 else (x > sweep.stop):
        values.append(x)
        x += sweep.step
    return values


def _range_axis(key: str, sweep: Any, log: bool) -> Axis:
    """``range(start, stop, step)``: ints on multiples of ``step`` when ``start`` is one,
    else a choice of its values (as hydra-optuna-sweeper treats every range)."""
    if log:
        raise SearchSpaceError(f"{key}: tag(log, ...) applies to interval(a,b) only")
    values = _range_values(sweep)
    if not values:
        raise SearchSpaceError(f"{key}: range({sweep.start},{sweep.stop},{sweep.step}) is empty")
    ints = all(isinstance(v, int) for v in (sweep.start, sweep.stop, sweep.step))
    if ints and sweep.step > 0 and sweep.start % sweep.step == 0:
        return Axis(key, "int", low=values[0], high=values[-1], step=int(sweep.step))
    return Axis(key, "choice", tuple(values))


def _interval_axis(key: str, sweep: Any, log: bool) -> Axis:
    """``interval(a, b)``: floats in [a, b] (log-uniform with ``tag(log, ...)``)."""
    low, high = float(sweep.start), float(sweep.end)
    if not low < high:
        raise SearchSpaceError(f"{key}: interval({low},{high}) needs its start below its end")
    if log and low <= 0:
        raise SearchSpaceError(f"{key}: tag(log, interval({low},{high})) needs a start above 0")
    return Axis(key, "float", low=low, high=high, log=log)


def tune_space(space: SearchSpace) -> dict[str, Any]:
    """Tune's search-space objects for ``space.axes`` (keys are the config keys)."""
    # Ray Tune: deferred, the space is parsed and checked before Ray loads.
    from ray import tune

    out: dict[str, Any] = {}
    for a in space.axes:
        if a.kind == "choice":
            out[a.key] = tune.grid_search(list(a.values)) if a.grid else tune.choice(list(a.values))
        elif a.kind == "int":
            assert a.low is not None and a.high is not None and a.step is not None
            out[a.key] = tune.qrandint(int(a.low), int(a.high), a.step)
        else:
            assert a.low is not None and a.high is not None
            sample = tune.loguniform if a.log else tune.uniform
            out[a.key] = sample(float(a.low), float(a.high))
    return out


SCHEDULERS = ("none", "asha", "median")
TIME_ATTRS = ("training_iteration", "env_steps_total")


def check_search_options(opts: Any) -> None:
    """``hydra.sweeper.search``: every value one Tune run can take (exit 2 otherwise)."""

    key = "hydra.sweeper.search"
    checks = [
        (str(opts.algorithm) in ALGORITHMS, "algorithm", opts.algorithm, ", ".join(ALGORITHMS)),
        (str(opts.mode) in ("max", "min"), "mode", opts.mode, "max, min"),
        (int(opts.num_samples) >= 1, "num_samples", opts.num_samples, "an integer >= 1"),
        (int(opts.max_concurrent) >= 1, "max_concurrent", opts.max_concurrent, "an integer >= 1"),
        (
            str(opts.scheduler.name) in SCHEDULERS,
            "scheduler.name",
            opts.scheduler.name,
            ", ".join(SCHEDULERS),
        ),  # fmt: skip
        (
            str(opts.scheduler.time_attr) in TIME_ATTRS,
            "scheduler.time_attr",
            opts.scheduler.time_attr,
            ", ".join(TIME_ATTRS),
        ),  # fmt: skip
        (
            opts.scheduler.mode in (None, "max", "min"),
            "scheduler.mode",
            opts.scheduler.mode,
            "null, max, min",
        ),  # fmt: skip
        (
            opts.scheduler.metric is None or per_iteration(str(opts.scheduler.metric)),
            "scheduler.metric",
            opts.scheduler.metric,
            "a metrics.csv column (a scheduler acts on every iteration) or null",
        ),  # fmt: skip
        (
            opts.scheduler.mode is not None or opts.scheduler.metric in (None, opts.metric),
            "scheduler.mode",
            opts.scheduler.mode,
            f"max or min with scheduler.metric={opts.scheduler.metric}",
        ),  # fmt: skip
    ]
    for ok, name, value, valid in checks:
        if not ok:
            raise SearchSpaceError(f"{key}.{name}={value} is not valid: expected {valid}")


def with_params(params: Any, arguments: Sequence[str]) -> list[str]:
    """``hydra.sweeper.params`` as overrides, then the command line's (which win)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    typed = {o.get_key_element() for o in OverridesParser.create().parse_overrides(list(arguments))}
    from_params = [f"{k}={v}" for k, v in dict(params or {}).items() if str(k) not in typed]
    return [*from_params, *arguments]
