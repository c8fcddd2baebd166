"""Shared fixtures: Hydra composition of rlperf's configs with outputs in tmp_path; every
test fails on a deprecated Ray / RLlib API reached from rlperf's own calls."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig
from support.one_run import one_run
from support.private_ray import private_ray_tmp
from support.shared import build_once, machine_share, worker_id

from rlperf.config.schema import register_configs
from rlperf.console.deprecations import OWN_DEPRECATION, watching

#: Each test's time, fixtures and markers kept in pytest's cache (scripts/durations.py);
#: what pytest-xdist's --dist loadgroup keeps in one worker (support/xdist_groups.py).
pytest_plugins = ("support.durations", "support.xdist_groups")

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
#: The tests' folder (on a subprocess's PYTHONPATH, its support/ kits import), its data.
TESTS = REPO / "tests"
DATA = TESTS / "data"
THESIS = DATA / "thesis"  # the 2021 study's recorded folders
#: A drawn figure's PNG (a 256-colour palette, rlperf/report/figures/plot.py) is larger than
#: this: empty axes with their ticks and labels make about 5.9 kB.
NOT_BLANK_PNG_BYTES = 7_500

# As the rlperf command does (rlperf/cli.py): RLlib imported in this process must not
# import TensorFlow, whose first import by RLlib calls tf1.disable_v2_behavior() and
# turns eager execution off for every later test (the edge export needs it on).
os.environ.setdefault("RLLIB_TEST_NO_TF_IMPORT", "1")
# A Ray job or cluster node sets RAY_ADDRESS; the suite's runs start their own Ray, and
# its own in-process Rays (a plain ray.init) must not join another one.
os.environ.pop("RAY_ADDRESS", None)
# Under pytest-xdist each worker's Rays keep their files (sessions, sockets and the address
# file a `ray start` leaves, which a run on another worker would otherwise see and name)
# under a temp folder of its own.
if worker_id() is not None and "RAY_TMPDIR" not in os.environ:
    os.environ["RAY_TMPDIR"] = f"/tmp/rlperf-{worker_id()}-{os.getppid()}"
    os.makedirs(os.environ["RAY_TMPDIR"], exist_ok=True)

#: Tests that start a Ray head with `ray start` (the client server's fixed port 10001, a
#: cluster's address file): never two at once under pytest-xdist.
RAY_START = pytest.mark.xdist_group("ray_start")


@pytest.fixture(autouse=True)
def machine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Under pytest-xdist, a ``@pytest.mark.alone`` test runs with no other test beside it
    (``support.shared.machine_share``); the others share the machine."""
    alone = request.node.get_closest_marker("alone") is not None
    with machine_share(tmp_path_factory, alone):
        yield


@pytest.fixture(autouse=True)
def no_deprecated_api_from_rlperf(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test in which rlperf's code called a deprecated Ray / RLlib API.

    RLlib reports deprecations through its logger, not ``warnings``, so
    pyproject's ``filterwarnings`` cannot see them (rlperf.console.deprecations).
    Ray reports each one once per process: its memory of that is reset first.
    Subprocess runs are checked by :func:`run_rlperf` (rlperf logs a warning).
    Tests of the check itself carry ``@pytest.mark.own_deprecations``.
    """
    if request.node.get_closest_marker("own_deprecations") is not None:
        yield
        return
    if "ray.util.debug" in sys.modules:
        sys.modules["ray.util.debug"].reset_log_once()
    with watching() as handler:
        yield
    if handler.found:
        pytest.fail(
            "deprecated API reached from rlperf's own code: "
            + "; ".join(f"{msg} (at {site})" for msg, site in handler.found)
        )


@pytest.fixture
def ray_tmp() -> Iterator[str]:
    """A private Ray temp dir for a test's own Ray (``support.private_ray``)."""
    with private_ray_tmp() as path:
        yield path


def group_options(group: str) -> list[str]:
    """Every YAML option of a config group."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture
def compose_cfg() -> Iterator[Callable[..., DictConfig]]:
    """``compose_cfg(*overrides)`` -> the composed primary config (GlobalHydra cleared after)."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):

        def _compose(*overrides: str) -> DictConfig:
            return compose(config_name="config", overrides=list(overrides))

        yield _compose
    GlobalHydra.instance().clear()


# Tiny, fast training settings for integration tests (2 cores, no GPU).
TINY_TRAIN = (
    "model=tiny",
    "workers=1",
    "algo.train_batch_size=256",
    "algo.minibatch_size=128",
    "algo.num_epochs=1",
    "train.iterations=2",
    "telemetry.interval_s=0.2",
)


def run_rlperf(
    args: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``rlperf`` entry point in a subprocess (its own Ray, its own process).

    ``env``: variables set on top of this process's environment. Fails when the
    run reports a deprecated API reached from rlperf's own calls. A sweep runs each
    configuration once unless ``args`` set ``hydra.sweeper.repeats`` (:func:`one_run`).
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1", RAY_DEDUP_LOGS="0", **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", *one_run(args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert OWN_DEPRECATION not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return proc


def succeeded(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``proc``, or an AssertionError with all it printed when it failed (a shared run that
    fails fails every test that reads it, each with the run's own output)."""
    if proc.returncode != 0:
        raise AssertionError(f"rlperf failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


#: What the tiny run printed (stdout, then stderr), next to its run folder.
TERMINAL_FILE = "terminal.txt"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real tiny training run through the entry point, shared by the tests that read it.

    What it printed is kept in ``<run>/../terminal.txt`` (a test reads the terminal).
    """

    def build(root: Path) -> Path:
        out = root / "run"
        args = [*TINY_TRAIN, "train.warmup_iterations=1",
                "train.warmup_until_first_episode=false", f"hydra.run.dir={out}"]  # fmt: skip
        proc = run_rlperf(args, cwd=root)
        succeeded(proc)
        (root / TERMINAL_FILE).write_text(proc.stdout + proc.stderr)
        return out

    return build_once(tmp_path_factory, "tiny_run", build)


#: Continuous-action envs of the tests: a 1-D torque (Pendulum) and a 2-D velocity with
#: unequal ranges (support/point_mass.py), whose observations are float64 (as MuJoCo's):
#: its SAC run trains, checkpoints and rolls out through rlperf's cast to float32.
BOX_ENVS = {
    "pendulum": ("env=pendulum",),
    "point_mass": (
        "env=custom",
        "env.entry_point=support.point_mass:PointMass",
        "env.max_episode_steps=30",
        "env.config={dtype: float64}",
    ),
}


@pytest.fixture(scope="session", params=sorted(BOX_ENVS))
def sac_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-iteration SAC training run on each of :data:`BOX_ENVS` (its actor is
    barely trained: for the stages' plumbing, not for returns)."""

    def build(root: Path) -> Path:
        out = root / "run"
        proc = run_rlperf(
            [
                "algo=sac",
                *BOX_ENVS[request.param],
                "model=mlp64",
                "workers=0",
                "algo.rollout_fragment_length=50",
                "algo.train_batch_size=64",
                "algo.min_sample_timesteps_per_iteration=100",
                "algo.min_time_s_per_iteration=null",
                "algo.num_steps_sampled_before_learning_starts=100",
                "train.iterations=2",
                "train.env_ceiling.duration_s=0.3",
                f"hydra.run.dir={out}",
            ],  # fmt: skip
            cwd=root,
            env={"PYTHONPATH": str(Path(__file__).parent)},
        )
        succeeded(proc)
        return out

    return build_once(tmp_path_factory, f"sac_{request.param}", build)


#: The tests' training sweep: two models x two worker counts, one short iteration each.
TINY_SWEEP = (
    "-m",
    "model=tiny,tiny2",
    "workers=0,1",
    "algo.train_batch_size=128",
    "algo.minibatch_size=64",
    "algo.num_epochs=1",
    "train.iterations=1",
    "telemetry.interval_s=0.2",
)


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real training sweep (:data:`TINY_SWEEP`), shared by the downstream-sweep and docs
    tests: jobs 0 (tiny, workers=0), 1 (tiny, 1), 2 (tiny2, 0), 3 (tiny2, 1)."""

    def build(root: Path) -> Path:
        out = root / "sweep"
        proc = run_rlperf([*TINY_SWEEP, f"hydra.sweep.dir={out}"], cwd=root)
        succeeded(proc)
        return out

    return build_once(tmp_path_factory, "tiny_sweep", build)


@pytest.fixture(scope="session")
def small_policy_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A run folder with a small image policy trained (supervised, on real Pong frames) to use
    several actions with clear margins; shared by the edge and serve tests
    (``support.edge_kit.make_run_folder``)."""
    from support.edge_kit import SMALL_MODEL, make_run_folder

    run = build_once(
        tmp_path_factory,
        "small_policy_run",
        lambda root: make_run_folder(
            root / "small", SMALL_MODEL, {"max_episode_steps": 60}, train_steps=200, frames=400
        ),
    )
    assert run["accuracy"] > 0.4  # it learned something beyond the majority class (<= 0.3)
    return run


@pytest.fixture(scope="session")
def cartpole_policy_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A run folder with an ``mlp64`` CartPole policy that plays every episode to the cap
    (500), trained by imitation in seconds (``support.edge_kit.make_cartpole_run``); shared
    by the edge tests that need a policy that behaves."""
    from support.edge_kit import make_cartpole_run

    run = build_once(
        tmp_path_factory, "cartpole_policy_run", lambda root: make_cartpole_run(root / "cartpole")
    )
    assert run["accuracy"] > 0.95
    return run


@pytest.fixture(scope="session")
def point_mass_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A run folder of a 2-D point-mass actor (SAC's tanh head, no value network) fitted to
    steer to the origin (``support.point_mass.make_run_folder``); shared by the edge and
    serve tests."""
    from support.point_mass import make_run_folder

    run = build_once(
        tmp_path_factory, "point_mass_run", lambda root: make_run_folder(root / "point_mass")
    )
    assert run["fit_error"] < 0.05  # within 5 % of each dimension's range on average
    return run
