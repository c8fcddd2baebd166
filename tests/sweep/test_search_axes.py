"""A search's axes and options value by value (rlperf.sweep.space): how each axis reads,
the distributions Tune samples, every option's refusal and its boundary (found by
mutation testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from rlperf.sweep.space import (
    Axis,
    SearchSpaceError,
    check_search_options,
    parse_space,
    tune_space,
    with_params,
)


def test_axes_describe_themselves() -> None:
    space = parse_space(
        [
            "model=choice(mlp64,mlp256)",
            "algo.lr=tag(log, interval(1e-5, 1e-3))",
            "algo.gamma=interval(0.9, 0.99)",
            "algo.num_epochs=range(4, 13, 4)",
        ],
        "random",
    )
    assert [a.describe() for a in space.axes] == [
        "choice mlp64, mlp256",
        "log float [1e-05, 0.001]",
        "float [0.9, 0.99]",
        "int [4, 12] step 4",
    ]
    assert parse_space(["workers=0,1,2"], "grid").axes[0].describe() == "grid 0, 1, 2"


def _options(**over: Any) -> Any:
    from hydra_plugins.rlperf_sweeper.config import SearchConf

    opts = OmegaConf.structured(SearchConf(algorithm="random"))
    for key, value in over.items():
        OmegaConf.update(opts, key.replace("__", "."), value)
    return opts


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("algorithm", "bohb", "algorithm=bohb is not valid: expected random, optuna, grid"),
        ("mode", "best", "mode=best is not valid: expected max, min"),
        ("num_samples", 0, "num_samples=0 is not valid: expected an integer >= 1"),
        ("max_concurrent", 0, "max_concurrent=0 is not valid: expected an integer >= 1"),
        ("scheduler__name", "pbt", "scheduler.name=pbt is not valid: expected none, asha, median"),
        (
            "scheduler__time_attr",
            "time_total_s",
            "scheduler.time_attr=time_total_s is not valid: expected training_iteration, "
            "env_steps_total",
        ),
        ("scheduler__mode", "up", "scheduler.mode=up is not valid: expected null, max, min"),
        (
            "scheduler__metric",
            "time_to_target_s",
            "scheduler.metric=time_to_target_s is not valid: expected a metrics.csv column (a "
            "scheduler acts on every iteration) or null",
        ),
    ],
)
def test_each_option_is_refused_with_its_full_key(key: str, value: object, message: str) -> None:
    with pytest.raises(SearchSpaceError) as err:
        check_search_options(_options(**{key: value}))
    assert str(err.value) == f"hydra.sweeper.search.{message}"


def test_the_options_at_their_boundaries_are_taken() -> None:
    check_search_options(_options(num_samples=1, max_concurrent=1, mode="min"))
    check_search_options(_options(scheduler__mode="min", scheduler__name="asha"))
    check_search_options(_options(scheduler__mode="max", scheduler__time_attr="env_steps_total"))
    # A scheduler metric other than the search's needs its own mode.
    check_search_options(_options(scheduler__metric="iter_s", scheduler__mode="min"))
    check_search_options(_options(metric="iter_s", scheduler__metric="iter_s"))
    with pytest.raises(SearchSpaceError) as err:
        check_search_options(_options(scheduler__metric="iter_s"))
    assert str(err.value) == (
        "hydra.sweeper.search.scheduler.mode=None is not valid: expected max or min with "
        "scheduler.metric=iter_s"
    )


def test_a_command_line_key_wins_over_the_presets_param() -> None:
    args = with_params({"algo.lr": "interval(1e-4,1e-3)", "seed": "choice(1,2)"}, ["seed=3"])
    assert args == ["algo.lr=interval(1e-4,1e-3)", "seed=3"]
    assert with_params(None, ["seed=3"]) == ["seed=3"]


def test_uniform_and_log_uniform_intervals_sample_their_own_distribution() -> None:
    space = parse_space(
        ["algo.gamma=interval(0.0, 1.0)", "algo.lr=tag(log, interval(1e-6, 1e-2))"], "random"
    )
    objects = tune_space(space)
    rng = np.random.default_rng(0)
    gamma = np.asarray(objects["algo.gamma"].sample(size=4000, random_state=rng))
    lr = np.asarray(objects["algo.lr"].sample(size=4000, random_state=rng))
    assert gamma.min() >= 0.0 and gamma.max() <= 1.0
    assert lr.min() >= 1e-6 and lr.max() <= 1e-2
    # Uniform: a quarter below 0.25. Log-uniform: half below the geometric middle 1e-4,
    # where a uniform draw over [1e-6, 1e-2] would put 1 % of them.
    assert np.mean(gamma < 0.25) == pytest.approx(0.25, abs=0.03)
    assert np.mean(lr < 1e-4) == pytest.approx(0.5, abs=0.03)


def test_an_int_axis_contains_only_its_steps() -> None:
    axis = Axis("k", "int", low=4, high=12, step=4)
    assert axis.contains(4) and axis.contains(12) and not axis.contains(16)
    assert not axis.contains(6) and not axis.contains(True) and not axis.contains(8.0)
    unstepped = Axis("k", "int", low=1, high=3)
    assert unstepped.contains(2) and not unstepped.contains(0)
    floats = Axis("x", "float", low=0.5, high=1.5)
    assert floats.contains(0.5) and floats.contains(1.5) and not floats.contains(1.6)


@pytest.mark.parametrize(
    ("override", "algorithm", "message"),
    [
        ("a=shuffle(1,2,3)", "random", "a: shuffle(...) has no meaning in a search"),
        ("a=tag(log, range(1,10))", "random", "a: tag(log, ...) applies to interval(a,b) only"),
        ("a=range(5,1)", "random", "a: range(5,1,1) is empty"),
        ("a=range(1,5,0)", "grid", "a: range(1,5,0) needs a step other than 0"),
        ("a=range(1,5,0)", "random", "a: range(1,5,0) needs a step other than 0"),
        ("a=interval(1,1)", "random", "a: interval(1.0,1.0) needs its start below its end"),
        (
            "workers=0,1",
            "optuna",
            "workers=0,1 is a grid axis (a comma list), which Optuna cannot search: write "
            "workers=choice(0,1) to search it, or use hydra.sweeper.search.algorithm=random|grid",
        ),
        (
            "seed=1",
            "bohb",
            "hydra.sweeper.search.algorithm=bohb is not one of random, optuna, grid",
        ),
        ("seed=1", "grid", "hydra.sweeper.search.algorithm=grid needs at least one axis"),
    ],
)
def test_refusals_say_what_to_change(override: str, algorithm: str, message: str) -> None:
    with pytest.raises(SearchSpaceError) as err:
        parse_space([override], algorithm)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "key", ["hydra/launcher", "gpu_layout@x", "+cpu_affinity.num_cpus", "~ray.address"]
)
def test_process_level_keys_are_refused_in_every_spelling(key: str) -> None:
    with pytest.raises(SearchSpaceError, match="cannot vary inside a search"):
        parse_space([f"{key}=choice(a,b)"], "random")


def test_ranges_as_axes() -> None:
    assert parse_space(["k=range(1,4)"], "random").axes == [Axis("k", "int", low=1, high=3, step=1)]
    assert parse_space(["k=range(1,4)"], "grid").axes == [Axis("k", "choice", (1, 2, 3), grid=True)]
    assert parse_space(["k=range(5,1,-1)"], "grid").axes[0].values == (5, 4, 3, 2)
    assert parse_space(["k=range(5,1,-2)"], "random").axes == [Axis("k", "choice", (5, 3))]
    assert parse_space(["seed=1"], "random").axes == []


def test_a_later_override_of_a_key_wins() -> None:
    space = parse_space(["seed=1", "model=choice(a,b)", "seed=2", "env=x"], "random")
    assert space.fixed == ["seed=2", "env=x"] and [a.key for a in space.axes] == ["model"]
