"""Every command and Python snippet of README.md and docs/*.md does what the page says.

Each command is run as written, run in a reduced form declared next to it, or
listed as not runnable here with its reason; Python snippets run. The
annotations and placeholders are described in tests/support/docs.py and
docs/development.md#tested-docs. Run alone: ``pytest tests/project/test_docs.py``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig
from support.docs import DocItem, collect, problems, rlperf_argv
from support.search import search_corners

from rlperf.algos import plan_resources
from rlperf.config.schema import register_configs
from rlperf.errors import ConfigError, InfeasibleError
from rlperf.layout import SUMMARY_FILE
from rlperf.resources.plan import check_feasible, detect_machine
from rlperf.validation.validate import validate_config
from tests.conftest import REPO, run_rlperf

PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]
ITEMS = collect(REPO, PAGES)

#: ``reduce @name``: named override sets (docs/development.md#tested-docs).
REDUCTIONS = {
    "@train": (
        "model=tiny workers=0 algo.train_batch_size=128 algo.minibatch_size=64 "
        "algo.num_epochs=1 train.iterations=1 telemetry.interval_s=0.2"
    ),
    "@rollout": "workers=0 rollout.steps=60 rollout.warmup_steps=10",
    "@edge": (
        "edge.steps=40 edge.warmup_steps=10 edge.calibration_size=20 "
        "edge.fidelity_observations=20 edge.isolate=false edge.cache_dir=edge-cache"
    ),
}
#: Folder placeholders -> the folders the test puts there: a training job folder (a copy
#: of the ``tiny_run`` fixture) and a training sweep folder (a copy of ``tiny_sweep``).
TRAINING_RUN = "outputs/2026-12-01/10-00-00"
TRAINING_SWEEP = "multirun/2026-12-01/10-00-00"
_DATED = r"(<date>/<time>|\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d)"
PLACEHOLDERS = {
    re.compile(rf"\boutputs/{_DATED}"): TRAINING_RUN,
    re.compile(rf"\bmultirun/{_DATED}"): TRAINING_SWEEP,
}


def resolve(text: str) -> str:
    """``text`` with every folder placeholder replaced."""
    for pattern, folder in PLACEHOLDERS.items():
        text = pattern.sub(folder, text)
    return text


def reduced(item: DocItem) -> str:
    """The command the test runs for ``item`` (placeholders resolved, reductions appended)."""
    command = resolve(item.text)
    if item.verb == "reduce":
        extra = " ".join(REDUCTIONS.get(word, word) for word in shlex.split(item.args))
        command = f"{command} {extra}"
    return command


def _items(*verbs: str, kind: str = "shell") -> list[pytest.param]:
    return [pytest.param(i, id=i.id) for i in ITEMS if i.verb in verbs and i.kind == kind]


# ---------------------------------------------------------------- annotations


def test_every_documented_command_is_run_or_listed() -> None:
    found = problems(ITEMS)
    for item in ITEMS:
        if item.verb == "reduce":
            unknown = [
                w for w in shlex.split(item.args) if w.startswith("@") and w not in REDUCTIONS
            ]
            if unknown:
                found.append(f"{item.describe()}\nunknown reduction {unknown}: {list(REDUCTIONS)}")
    assert not found, "\n\n".join(found)
    # The pages hold commands of every stage, and most of them run or are checked here.
    verbs = [i.verb for i in ITEMS if i.kind == "shell"]
    assert verbs.count("run") + verbs.count("reduce") >= 6


def test_the_collector_reads_annotations(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n<!-- test: check long -->\n<!-- test 2: skip GPU: needs one -->\n"
        "```bash\nrlperf model=model3   # a comment\nrlperf gpu_layout=gpu0 \\\n  workers=8\n"
        "PYTHONPATH=tests python x.py\n```\n\n```\n[rlperf 1s] output\n```\n"
        "<!-- test: file conf/x.yaml -->\n```yaml\na: 1\n```\n```python\nprint(1)\n```\n"
    )
    items = collect(tmp_path, ["page.md"])
    assert [(i.kind, i.line, i.verb, i.args, i.text.strip()) for i in items] == [
        ("shell", 6, "check", "long", "rlperf model=model3"),
        ("shell", 7, "skip", "GPU: needs one", "rlperf gpu_layout=gpu0 workers=8"),
        ("shell", 9, "check", "long", "PYTHONPATH=tests python x.py"),
        ("file", 16, "file", "conf/x.yaml", "a: 1"),
        ("python", 19, "run", "", "print(1)"),
    ]
    items[0].verb = None
    (message,) = problems(items[:1])
    assert "page.md:6 (shell 1 of its block): rlperf model=model3" in message
    assert "<!-- test 1: reduce @train -->" in message and "docs/development.md" in message


def test_placeholders_resolve_to_the_tests_folders() -> None:
    assert resolve("rlperf stage=rollout run=outputs/<date>/<time>") == (
        f"rlperf stage=rollout run={TRAINING_RUN}"
    )
    assert resolve("run=multirun/2026-11-02/09-00-00 x") == f"run={TRAINING_SWEEP} x"


# ---------------------------------------------------------------- check / compose (no runs)


@pytest.fixture(scope="module")
def files_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the pages' ``file`` blocks written (what their commands read)."""
    root = tmp_path_factory.mktemp("docs_files")
    for item in ITEMS:
        if item.kind == "file":
            path = root / item.args
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(item.text)
    return root


def cells(argv: list[str]) -> list[list[str]]:
    """The override lists of an ``rlperf`` command: one, or every cell of a ``-m`` sweep."""
    overrides = [a for a in argv if not a.startswith("-")]
    if not {"-m", "--multirun"} & set(argv):
        return [overrides]
    parsed = OverridesParser.create().parse_overrides(overrides)
    base = [o.input_line for o in parsed if not o.is_sweep_override()]
    cfg = compose(config_name="config", overrides=base, return_hydra_config=True)
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
    if cfg.hydra.sweeper.search.algorithm is not None:
        return search_corners(cfg.hydra.sweeper, overrides)
    swept = OverridesParser.create().parse_overrides([*params, *overrides])
    return [cell for batch in BasicSweeper.split_arguments(swept, None) for cell in batch]


#: Sweeps up to this size are composed cell by cell; larger ones (the study's presets,
#: whose every cell tests/sweep/test_launcher_in_process.py validates) by a covering set
#: of cells.
FULL_SWEEP = 8


def covering(cell_lists: list[list[str]]) -> list[list[str]]:
    """Every cell of a small sweep; of a larger one, cells until each override was seen."""
    if len(cell_lists) <= FULL_SWEEP:
        return cell_lists
    seen: set[str] = set()
    out = []
    for overrides in cell_lists:
        if not set(overrides) <= seen:
            out.append(overrides)
            seen.update(overrides)
    return out


_COMPOSED: dict[tuple[str, tuple[str, ...]], DictConfig] = {}


def preflight(command: str, machine_check: bool, folder: Path) -> int:
    """Compose and validate every cell of an ``rlperf`` command in ``folder`` (a covering set
    of a large sweep); with ``machine_check``, a single training run must fit this machine.
    Returns the number of cells composed; raises what the run would refuse with."""
    parsed = rlperf_argv(command)
    assert parsed is not None, f"`check`/`compose` take an rlperf command, not: {command}"
    cd, argv = parsed
    GlobalHydra.instance().clear()
    cwd = Path.cwd()
    os.chdir(folder / cd if cd else folder)  # a user conf/ there joins the search path
    try:
        with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
            return _preflight_cells(argv, machine_check)
    finally:
        os.chdir(cwd)
        GlobalHydra.instance().clear()


def _preflight_cells(argv: list[str], machine_check: bool) -> int:
    sweep = bool({"-m", "--multirun"} & set(argv))
    cell_lists = covering(cells(argv))
    for overrides in cell_lists:
        key = (str(Path.cwd()), tuple(overrides))
        if key not in _COMPOSED:  # pages repeat presets: compose each cell once
            _COMPOSED[key] = compose(config_name="config", overrides=overrides)
        cfg: DictConfig = _COMPOSED[key]
        validate_config(cfg)  # a ConfigError names the key: the page is wrong
        # A single training run is refused when this machine cannot hold it (a sweep
        # records such cells as skipped, which is documented behaviour).
        if machine_check and not sweep and cfg.stage == "train":
            check_feasible(plan_resources(cfg), detect_machine(), bool(cfg.ray.overcommit_cpus))
    return len(cell_lists)


@pytest.mark.parametrize("item", _items("check", "compose"))
def test_documented_config_passes_preflight(item: DocItem, files_folder: Path) -> None:
    register_configs()
    assert preflight(resolve(item.text), item.verb == "check", files_folder) >= 1


def test_preflight_finds_what_the_issue_found(tmp_path: Path) -> None:
    """The two faults of the pages before they were tested: an invalid sweep cell, and a
    README example refused on the 2-core machine it targets."""
    register_configs()
    sweep = "rlperf -m stage=rollout run=x workers=0,8 gpu_layout=none,gpu0"
    with pytest.raises(ConfigError, match=r"gpu_layout=gpu0 \(mode=shared\) with workers=0"):
        preflight(sweep, True, tmp_path)
    assert preflight(sweep.replace("gpu0", "gpu0_driver"), True, tmp_path) == 4
    if len(detect_machine().cpus) < 3:
        with pytest.raises(InfeasibleError, match="workers=2"):
            preflight("rlperf model=model3 workers=2 train.iterations=3", True, tmp_path)
    assert preflight("rlperf model=model3 workers=1 train.iterations=3", True, tmp_path) == 1


# ---------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def workspace(
    tmp_path_factory: pytest.TempPathFactory, files_folder: Path, tiny_run: Path, tiny_sweep: Path
) -> Path:
    """The folder the pages' commands run in: the placeholders' folders, ``tests/``,
    ``benchmarks/``, the ``file`` blocks, and ``rlperf`` / ``python`` on PATH."""
    root = tmp_path_factory.mktemp("docs_run")
    shutil.copytree(files_folder, root, dirs_exist_ok=True)
    shutil.copytree(tiny_run, root / TRAINING_RUN)
    shutil.copytree(tiny_sweep, root / TRAINING_SWEEP)
    for name in ("tests", "benchmarks"):
        (root / name).symlink_to(REPO / name)
    bin_dir = root / ".bin"
    bin_dir.mkdir()
    report = "import sys; from rlperf.report.cli import main; sys.exit(main())"
    shims = {
        "rlperf": f'exec "{sys.executable}" -m rlperf "$@"',
        "rlperf-report": f'exec "{sys.executable}" -c "{report}" "$@"',
        "python": f'exec "{sys.executable}" "$@"',
        "python3": f'exec "{sys.executable}" "$@"',
    }
    for name, line in shims.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{line}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return root


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{cwd / '.bin'}{os.pathsep}{os.environ['PATH']}")
    env.update(PYTHONUNBUFFERED="1", RAY_DEDUP_LOGS="0")
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _new_summaries(root: Path, since: float) -> list[dict[str, object]]:
    found = []
    for path in root.glob("**/summary.json"):
        if path.stat().st_mtime >= since and ".bin" not in path.parts:
            found.append(json.loads(path.read_text()))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("item", _items("run", "reduce"))
def test_documented_command_runs(item: DocItem, workspace: Path) -> None:
    command = reduced(item)
    started = time.time()
    proc = _shell(command, workspace)
    assert proc.returncode == 0, (
        f"{item.describe()}\nran: {command}\nexit {proc.returncode}\n{proc.stderr[-4000:]}"
    )
    words = shlex.split(command)
    if words[0] == "rlperf" and not {"--help", "--cfg"} & set(words):
        statuses = [s["status"] for s in _new_summaries(workspace, started)]
        assert "completed" in statuses and set(statuses) <= {"completed", "skipped"}, statuses
    elif words[0] == "rlperf-report":
        html = workspace / proc.stdout.strip().splitlines()[-1]  # as printed: maybe relative
        assert html.name == "report.html" and (html.parent / "runs.csv").is_file()
        assert len(html.parent.joinpath("runs.csv").read_text().splitlines()) >= 2  # a cell
    elif "--help" in words:
        assert "stage=rollout|edge" in proc.stdout  # rlperf's own help, not Hydra's
    elif "--cfg" in words:
        assert "stage: train" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("item", _items("run", kind="python"))
def test_documented_python_runs(item: DocItem, workspace: Path) -> None:
    snippet = resolve(item.text)
    proc = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(REPO / "tests")),
    )
    assert proc.returncode == 0, f"{item.describe()}\n{proc.stderr[-4000:]}"


# ---------------------------------------------------------------- what the pages state


@pytest.mark.slow
def test_the_summary_example_has_the_keys_of_a_real_run(tiny_run: Path) -> None:
    """docs/results.md's summary.json example: the keys a training run writes."""
    text = (REPO / "docs" / "results.md").read_text()
    section = text[text.index("## `summary.json`") :]
    example = json.loads(section[section.index("```json") + 7 : section.index("```\n", 10)])
    real = json.loads((tiny_run / SUMMARY_FILE).read_text())
    assert set(example) == set(real)
    assert set(example["warmup"]) == set(real["warmup"])
    assert set(example["metrics"]["iter_s"]) == set(real["metrics"]["iter_s"])
    assert (example["status"], example["stage"], example["backend"]) == (
        real["status"],
        real["stage"],
        real["backend"],
    )


@pytest.mark.slow
def test_the_getting_started_file_table_is_what_a_run_writes(tiny_run: Path) -> None:
    """docs/getting-started.md's table of a training run's folder: every entry it lists
    is there, and the run writes nothing it leaves out (it once listed a cli.log)."""
    text = (REPO / "docs" / "getting-started.md").read_text()
    table = text[text.index("| file | what |") :].split("\n\n")[0]
    listed = {m.rstrip("/") for m in re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)}
    written = {p.name for p in tiny_run.iterdir()}
    assert listed == written


# The exit-code contract (docs/exit-codes.md: completed 0, user error 2, failure 1,
# interrupt 130; a sweep exits 0 when its cells were only skipped): where the pages
# state its values, these hold them to it.


def test_report_refusal_exits_2(tmp_path: Path) -> None:
    """docs/report.md: a path without runs is refused with status 2."""
    (tmp_path / "empty").mkdir()
    code = "import sys; from rlperf.report.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "empty")], capture_output=True, text=True
    )
    assert "no runs found" in proc.stderr
    assert proc.returncode == 2


def test_an_invalid_single_run_exits_2(tmp_path: Path) -> None:
    proc = run_rlperf(["model.dim=100", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    assert summary["status"] == "invalid" and "model.dim=100" in summary["error"]
    assert proc.returncode == 2


@pytest.mark.slow
def test_a_sweep_of_skipped_cells_exits_0(tmp_path: Path) -> None:
    """docs/sweeps.md: cells this machine cannot run are skipped, and the sweep exits 0."""
    if detect_machine().gpus:
        pytest.skip("needs a machine without NVIDIA GPUs (its gpu0_driver cells would run)")
    out = tmp_path / "sweep"
    proc = run_rlperf(
        ["-m", "model=tiny", "gpu_layout=gpu0_driver", "workers=0,1", f"hydra.sweep.dir={out}"],
        cwd=tmp_path,
    )
    statuses = [json.loads(p.read_text())["status"] for p in sorted(out.glob("*/summary.json"))]
    assert statuses == ["skipped", "skipped"]
    assert proc.returncode == 0, proc.stderr[-2000:]
