"""Every option of every config group composes and validates; bad input fails early."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from rlperf.errors import ConfigError
from rlperf.validation.validate import validate_config
from tests.conftest import CONF, group_options

GROUPS = [
    "model",
    "gpu_layout",
    "cpu_affinity",
    "backend",
    "env",
    "algo",
    "experiment",
    "study/training_row",
    "study/rollout_row",
    "tracking",
]
#: Groups of conf/ that nobody picks on the command line: ``--help`` does not list them.
UNLISTED_GROUPS = {"experiment_algo", "hydra/help"}


def test_every_group_has_options() -> None:
    for group in GROUPS:
        assert group_options(group), group
    assert set(group_options("gpu_layout")) == {
        "none",
        "gpu0",
        "gpu1",
        "both",
        "gpu0_driver",
        "gpu1_driver",
        "both_driver",
    }
    assert {"model1", "model2", "model3", "model4", "model5", "model6", "tiny", "tiny2"} <= set(
        group_options("model")
    )
    assert set(group_options("cpu_affinity")) == {"unrestricted", "ray_cpus", "pinned"}


#: What an option needs besides itself to validate: the model kind its env fits, the key a
#: generic option leaves to the user.
COMPANIONS = {
    ("env", "cartpole"): ["model=mlp64"],
    ("env", "pendulum"): ["model=mlp64"],
    ("env", "frozenlake"): ["model=mlp64"],
    ("env", "mujoco"): ["model=mlp64"],
    ("env", "gym"): ["model=mlp64", "env.id=Acrobot-v1"],
    ("env", "custom"): ["model=mlp64", "env.entry_point=rlperf.envs.frozenlake:FrozenLake"],
    ("model", "mlp64"): ["env=cartpole"],
    ("model", "mlp256"): ["env=pendulum"],
    ("algo", "dqn"): ["env=cartpole", "model=mlp64"],
    ("algo", "sac"): ["env=pendulum", "model=mlp64"],
    ("algo", "tqc"): ["env=pendulum", "model=mlp64"],
}


@pytest.mark.parametrize(("group", "option"), [(g, o) for g in GROUPS for o in group_options(g)])
def test_option_composes_and_validates(compose_cfg, group: str, option: str) -> None:
    overrides = [f"{group}={option}", *COMPANIONS.get((group, option), [])]
    if group == "backend" and option != "rllib":
        overrides += ["stage=edge", "run=/some/run"]
    if group == "gpu_layout" and option.endswith("driver") is False and option != "none":
        overrides.append("workers=2")
    cfg = compose_cfg(*overrides)
    if group == "experiment" and cfg.stage in ("rollout", "edge", "serve") and cfg.run is None:
        cfg.run = "/some/run"
    validate_config(cfg)
    if group in cfg and "name" in cfg[group]:
        assert cfg[group].name == option


def test_defaults_are_quickstart_on_cpu(compose_cfg) -> None:
    cfg = compose_cfg()
    assert cfg.stage == "train"
    assert cfg.model.name == "model1" and cfg.gpu_layout.name == "none"
    assert cfg.workers == 1 and cfg.cpu_affinity.mode == "unrestricted"
    assert cfg.algo.train_batch_size == 1000 and cfg.train.iterations == 3
    assert cfg.env.dim == 84  # follows the model


def test_issue_overrides_work_with_exact_names(compose_cfg) -> None:
    cfg = compose_cfg("model=model3", "workers=2", "train.iterations=3")
    assert (cfg.model.name, cfg.model.dim, cfg.workers, cfg.train.iterations) == (
        "model3",
        252,
        2,
        3,
    )
    assert cfg.env.dim == 252  # frame size follows the model
    assert cfg.algo.train_batch_size == 1000  # quickstart sizes combine with any model
    validate_config(cfg)


def test_study_sizes_preset_restores_study_sizes(compose_cfg) -> None:
    cfg = compose_cfg("experiment=study_sizes")
    a = cfg.algo
    assert (a.train_batch_size, a.minibatch_size, a.num_epochs, a.lr) == (4000, 128, 30, 5e-5)
    assert (a.clip_param, a.vf_clip_param, a.kl_coeff, a.entropy_coeff) == (0.3, 10.0, 0.2, 0.0)
    assert cfg.train.iterations == 20


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["backend.name=tflite_int8"], "backend=tflite_int8 with stage=train"),
        (["gpu_layout=gpu0", "workers=0"], "with workers=0"),
        (
            ["gpu_layout=gpu0", "gpu_layout.driver_gpus=1.5", "workers=2"],
            "gpu_layout.driver_gpus=1.5",
        ),
        (["workers=-1"], "workers=-1 must be an integer >= 0"),
        (
            ["algo.minibatch_size=2000"],
            "algo.minibatch_size=2000 exceeds algo.train_batch_size=1000",
        ),
        (["algo.rollout_fragment_length=0"], "algo.rollout_fragment_length=0"),
        (["algo.gamma=1.5"], "algo.gamma=1.5 must be in [0, 1]"),
        (["env.dim=42"], "env.dim=42 differs from model.dim=84"),
        (["cpu_affinity=pinned", "ray.address=127.0.0.1:6379"], "ray.address='127.0.0.1:6379'"),
        (["stage=rollout"], "stage=rollout needs run="),
        (["stage=edge"], "stage=edge needs run="),
        (["train.iterations=0"], "train.iterations=0 is not valid"),
        (["telemetry.interval_s=0"], "telemetry.interval_s=0"),
    ],
)
def test_bad_values_name_key_and_valid_values(compose_cfg, overrides, fragment) -> None:
    cfg = compose_cfg(*overrides)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert fragment in str(err.value)


def test_conv_stack_not_reaching_1x1_reports_shapes(compose_cfg) -> None:
    cfg = compose_cfg("model.dim=100")
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    msg = str(err.value)
    assert "does not reach 1x1 for model.dim=100" in msg
    # The computed geometry: 100 -> 25 -> 13 -> valid 11x11 -> 3x3.
    assert "conv0: 100x100x4" in msg and "-> 25x25x16" in msg
    assert "conv1: 25x25x16" in msg and "-> 13x13x32" in msg
    assert "-> 3x3x256" in msg and "(13)" in msg


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        (
            "stage=bogus",
            "Invalid value 'bogus', expected one of [train, rollout, edge, serve, env]",
        ),
        ("gpu_layout.mode=half", "expected one of [none, shared, driver]"),
        ("cpu_affinity.mode=everywhere", "expected one of [unrestricted, ray_cpus, pinned]"),
        ("backend.name=tpu", "expected one of [rllib, tflite_fp32"),
        ("algo.name=a3c", "Invalid value 'a3c'"),
        ("rollout.device=tpu", "expected one of [auto, cpu, cuda]"),
        ("edge.int8_io=int4", "expected one of [auto, uint8, int8]"),
        ("edge.heads=value", "expected one of [policy, both]"),
        ("edge.fidelity_policy=expert", "expected one of [random, trained]"),
    ],
)
def test_allowed_values_are_enforced_at_composition(compose_cfg, override, fragment) -> None:
    """Enum fields of the schema: Hydra's message names the key, the value and the choices."""
    with pytest.raises(ConfigCompositionException) as err:
        compose_cfg(override)
    text = f"{err.value} {err.value.__cause__}"
    assert fragment in text and override.split("=")[0] in text


def test_unknown_key_and_wrong_type_fail_at_composition(compose_cfg) -> None:
    with pytest.raises(ConfigCompositionException):
        compose_cfg("model.depth=3")
    with pytest.raises(ConfigCompositionException):
        compose_cfg("train.iterations=many")
    with pytest.raises(ConfigCompositionException):
        compose_cfg("model=model9")


def test_cli_cfg_and_help_are_fast_and_light(tmp_path) -> None:
    """``--cfg job`` and ``--help`` compose without importing Ray, torch or TensorFlow."""
    script = (
        "import sys, json\n"
        "from rlperf.cli import main\n"
        "sys.argv = ['rlperf', 'model=model3', 'workers=2', 'train.iterations=3', '--cfg', 'job']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print(json.dumps([m for m in ('ray', 'torch', 'tensorflow') if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "name: model3" in out.stdout and "workers: 2" in out.stdout
    assert "iterations: 3" in out.stdout
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    helped = subprocess.run(
        [sys.executable, "-m", "rlperf", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert helped.returncode == 0
    assert not (tmp_path / "outputs").exists()  # --help and --cfg run nothing
    listed = helped.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    for group in GROUPS:
        assert f"\n{group} " in listed, group
        for option in group_options(group):
            assert re.search(rf"\b{option}\b", listed), f"{group}={option}"
    assert "experiment_algo" not in listed and "schema/" not in listed
    # The repeats' options: every key of hydra.sweeper.repeats, racing, a run's precision.
    from hydra_plugins.rlperf_sweeper.config import RepeatsConf

    for key in [*RepeatsConf.__dataclass_fields__, "race"]:
        assert f"hydra.sweeper.{'' if key == 'race' else 'repeats.'}{key}=" in helped.stdout
    assert "train.stop.precision=" in helped.stdout


def test_help_lists_every_group_a_user_picks() -> None:
    """A group added to conf/ is either in ``--help`` (GROUPS) or picked for the user."""
    groups = {str(p.parent.relative_to(CONF)) for p in CONF.rglob("*.yaml")} - {"."}
    assert groups == set(GROUPS) | UNLISTED_GROUPS


def test_model_option_without_its_kind_schema_gets_a_hint(tmp_path: Path) -> None:
    """An option written before models had kinds fails at composition with one line
    that says what to add, not only OmegaConf's ``Key 'dim' not in 'ModelConfig'``."""
    from conftest import run_rlperf

    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "old_net.yaml").write_text(
        "name: old_net\ndim: 64\nconv_filters: [[16, [8, 8], 4]]\n"
    )
    proc = run_rlperf(["model=old_net", "--cfg", "job"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Key 'dim' not in 'ModelConfig'" in lines[0]
    assert "/schema/model/vision@_here_, /schema/model/mlp@_here_" in lines[0]
