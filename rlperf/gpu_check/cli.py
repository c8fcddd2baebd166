"""``python -m rlperf.gpu_check`` (``benchmarks/gpu_check.py``): prove the GPU paths here.

With NVIDIA GPUs: checks that torch sees them, runs the fixed sequence
(:mod:`rlperf.gpu_check.sequence`) under ``--out``, then checks the result
files (:mod:`rlperf.gpu_check.checks`), prints one table and exits 1 if any
check failed. Without a GPU: says so, checks only its own plumbing (every job
config of the sequence composes and validates, the entry point answers) and
exits 0. Installs nothing; docs/development.md#gpu-check says how to carry
rlperf to a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlperf.config.schema import register_configs
from rlperf.gpu_check.checks import Check, check_results, failed, format_table
from rlperf.gpu_check.sequence import command, run_sequence, sequence
from rlperf.resources.plan import count_nvidia_gpus

#: The table of the last check, written into the output folder.
TABLE_FILE = "gpu_check_table.txt"
#: Time a one-GPU sequence should take (the issue's target, reported, not checked).
TARGET_ONE_GPU_S = 300.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gpu_check", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--out", type=Path, help="output folder (default outputs/gpu_check/<time>)")
    p.add_argument("--gpus", type=int, help="GPUs to use (default: all found; 0: plumbing only)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--check-only", action="store_true", help="only check the results in --out")
    p.add_argument("--step-timeout", type=float, default=600.0, help="seconds per job (600)")
    return p.parse_args(argv)


def _say(message: str) -> None:
    print(f"[gpu_check] {message}", file=sys.stderr, flush=True)


def plumbing_checks(found: int, source: str) -> list[Check]:
    """What can be checked without a GPU: the sequence's configs and the entry point."""
    checks = [Check("NVIDIA GPUs", ">= 1", f"{found} ({source})", None)]
    for gpus in (1, 2):
        checks.append(_compose_check(gpus))
    checks.append(_entry_point_check())
    return checks


def _compose_check(gpus: int) -> Check:
    """Every job config of the ``gpus``-GPU sequence composes and passes validation."""
    # Hydra's compose API, and rlperf.validation.validate with rlperf.algos, gymnasium and
    # ale_py: deferred, only this plumbing check needs them (importing the CLI stays light).
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from rlperf.validation.validate import validate_config

    steps = sequence(gpus)
    cells = [cell for step in steps for cell in step.cells()]
    out = Path("/gpu_check_out")  # never written: only the rollout's run= needs a path
    errors = []
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
            for step in steps:
                run = [f"run={out / step.upstream}"] if step.upstream else []
                for cell in step.cells():
                    try:
                        validate_config(compose(config_name="config", overrides=[*cell, *run]))
                    except Exception as exc:
                        errors.append(f"{step.name} {' '.join(cell[-2:])}: {exc}")
    finally:
        GlobalHydra.instance().clear()
    name = f"sequence for {gpus} GPU{'s' if gpus > 1 else ''}"
    expected = f"{len(cells)} job configs valid ({len(steps)} steps)"
    seen = "; ".join(errors)[:200] if errors else f"{len(cells)} valid"
    return Check(name, expected, seen, not errors)


def _entry_point_check() -> Check:
    """``python -m rlperf --cfg job`` with a GPU step's overrides composes in a subprocess."""
    step = sequence(1)[1]
    with tempfile.TemporaryDirectory() as tmp:
        argv = [*command(step, Path(tmp)), "--cfg", "job"]
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=120)
    ok = proc.returncode == 0 and "name: gpu0" in proc.stdout
    seen = f"exit {proc.returncode}" + ("" if ok else f": {proc.stderr.strip()[-150:]}")
    return Check("entry point: python -m rlperf --cfg job", "exit 0, gpu_layout gpu0", seen, ok)


def torch_check(gpus: int) -> tuple[Check, dict[str, Any]]:
    """Whether this Python's torch is a CUDA build that sees ``gpus`` devices (a subprocess)."""
    code = (
        "import json, torch; print(json.dumps({'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'devices': torch.cuda.device_count()}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    expected = f"CUDA build, >= {gpus} device(s)"
    if proc.returncode != 0:
        return Check("torch sees the GPUs", expected, proc.stderr.strip()[-150:], False), {}
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    seen = f"torch {info['torch']}, CUDA {info['cuda']}, {info['devices']} device(s)"
    return Check("torch sees the GPUs", expected, seen, int(info["devices"]) >= gpus), info


def _print_table(checks: list[Check], out: Path | None) -> int:
    table = format_table(checks)
    print(table, flush=True)
    bad = failed(checks)
    verdict = f"{len(bad)} of {len(checks)} checks failed" if bad else "all checks passed"
    print(verdict, flush=True)
    if out is not None and out.is_dir():
        (out / TABLE_FILE).write_text(table + "\n" + verdict + "\n")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:

    args = parse_args(argv)
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    out = (args.out or Path("outputs", "gpu_check", stamp)).resolve()
    if args.check_only:
        return _print_table(check_results(out), out)
    found, source = count_nvidia_gpus()
    gpus = found if args.gpus is None else args.gpus
    if args.dry_run:
        for step in sequence(max(gpus, 1)):
            print(" ".join(command(step, out)))
        return 0
    if gpus <= 0:
        _say(
            f"no NVIDIA GPU here ({found} found: {source}); nothing runs on a GPU, only the "
            "script's own plumbing is checked"
        )
        checks = plumbing_checks(found, source)
        _print_table(checks, None)
        return 1 if failed(checks) else 0
    if gpus > found:
        _say(f"--gpus {gpus} but this machine has {found} NVIDIA GPU(s) ({source})")
        return 2
    preflight, torch_info = torch_check(gpus)
    out.mkdir(parents=True, exist_ok=True)
    if not preflight.passed:
        _say("torch cannot use the GPUs: nothing was run")
        return _print_table([preflight], out)
    manifest: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "gpus": gpus,
        "gpus_found": found,
        "gpu_source": source,
        "python": platform.python_version(),
        "torch": torch_info,
        "host": platform.node(),
    }
    _say(f"{gpus} GPU(s), torch {torch_info['torch']}; results in {out}")
    manifest = run_sequence(sequence(gpus), out, manifest, args.step_timeout, _say)
    code = _print_table([preflight, *check_results(out)], out)
    total = float(manifest.get("total_s") or 0.0)
    target = f" (target for one GPU: < {TARGET_ONE_GPU_S:.0f} s)" if gpus == 1 else ""
    print(f"sequence took {total:.0f} s{target}; results in {out}", flush=True)
    return code
