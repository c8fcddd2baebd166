"""Build a wheelhouse that carries rlperf's GPU paths to a machine without a package index.

    python scripts/wheelhouse.py [--python 3.12] [--platform manylinux_2_28_x86_64]
                                 [--out wheelhouse] [--dry-run] [--sizes] [--strip-ray-jars]
                                 [--only NAME ...] [--no-match-installed]

What goes in: rlperf's own wheel (built here, ``--no-deps --no-build-isolation``)
and the wheels of its dependencies that training, rollout and telemetry need,
with their dependencies as they apply to the target Python and platform — every
dependency of ``pyproject.toml`` except torch (the GPU machine has its own CUDA
build), TensorFlow, tf-keras, tensorflow-model-optimization and ai-edge-litert
(the edge stage), and matplotlib / seaborn (the report, which runs where the
results are brought back). A resolution that pulls any of them, or an
``nvidia-*`` CUDA wheel, is refused.

How: pip resolves the requirements for the target (``pip install --dry-run
--report`` with ``--only-binary=:all: --python-version --abi --platform``,
which reads only the index and the wheels' metadata files), pinned by default to
the versions installed in this environment (the ones the test suite ran
against: ``--no-match-installed`` takes the newest in range instead). Then,
without ``--dry-run``, ``pip download --no-deps`` fetches exactly the resolved
wheels. ``antlr4-python3-runtime`` (Hydra's parser runtime) is published as an
sdist only; it is pure Python and is built here into a ``py3-none-any`` wheel
first, so the resolver can use it.

``--strip-ray-jars`` removes ``ray/jars/`` (``ray_dist.jar``, Ray's Java
runtime: 31 MiB that Python never loads) and its RECORD lines from Ray's wheel:
79 MB becomes about 48 MB, which fits a 64 MiB transfer. The wheel keeps its
name; pip does not check RECORD hashes on install.

On the GPU machine (docs/development.md#gpu-check)::

    pip install --no-deps --no-index wheelhouse/*.whl

The network is used through pip's own configuration only (``--sizes`` also asks
the resolved wheels' URLs for their lengths).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Dependencies the GPU paths do not need (the GPU machine brings its own torch).
EXCLUDED = (
    "torch",
    "tensorflow",
    "tf-keras",
    "tensorflow-model-optimization",
    "ai-edge-litert",
    "matplotlib",
    "seaborn",
)
#: Never in the wheelhouse, whoever asks for them.
FORBIDDEN = re.compile(
    r"^(torch|torchvision|tensorflow.*|tf-keras|keras|triton|nvidia-(?!ml-py$).*)$"
)
#: Published as sdists only, pure Python: built here into wheels before resolving.
SDIST_ONLY = ("antlr4-python3-runtime==4.9.3",)  # hydra-core 1.3 pins antlr4 4.9.*
#: What rlperf's wheel is built from (copied, so that setuptools' build/ stays out
#: of the checkout and a stale build/lib cannot leak deleted files into the wheel).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "rlperf", "conf", "hydra_plugins")
RAY_JARS = "ray/jars/"


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution name of a requirement string (``ray[rllib]>=2`` -> ``ray``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical(match.group(1))


def gpu_requirements(pyproject: Path, only: Sequence[str] = ()) -> list[str]:
    """``pyproject.toml``'s dependencies minus :data:`EXCLUDED` (or only ``only``), as pinned."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    excluded = {canonical(n) for n in EXCLUDED}
    kept = [d for d in deps if requirement_name(d) not in excluded]
    if only:
        wanted = {canonical(n) for n in only}
        unknown = wanted - {requirement_name(d) for d in kept}
        if unknown:
            raise SystemExit(f"--only {sorted(unknown)}: not a GPU-path dependency of rlperf")
        kept = [d for d in kept if requirement_name(d) in wanted]
    return kept


def platform_tags(platform: str) -> list[str]:
    """Every platform tag a ``manylinux_2_X_<arch>`` machine accepts (pip does not expand them).

    ``manylinux_2_28_x86_64`` -> ``manylinux_2_28_x86_64`` ... ``manylinux_2_5_x86_64`` and
    the legacy aliases ``manylinux2014`` (2.17), ``manylinux2010`` (2.12), ``manylinux1`` (2.5).
    Other platforms (``macosx_...``, ``win_amd64``) are passed on as given.
    """
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if match is None:
        return [platform]
    glibc, arch = int(match.group(1)), match.group(2)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{alias}_{arch}" for minor, alias in legacy.items() if minor <= glibc]
    return tags


def target_options(python: str, platform: str) -> list[str]:
    """pip options that select wheels for CPython ``python`` on ``platform``."""
    nodot = python.replace(".", "")
    options = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for abi in (f"cp{nodot}", "abi3", "none"):
        options += ["--abi", abi]
    for tag in platform_tags(platform):
        options += ["--platform", tag]
    return options


def installed_constraints(skip: Iterable[str] = ()) -> list[str]:
    """``name==version`` of every distribution installed here (local versions left out)."""
    skipped = {canonical(n) for n in skip}
    pins = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if name and name not in skipped and "+" not in dist.version:
            pins[name] = f"{name}=={dist.version}"
    return sorted(pins.values())


@dataclass(frozen=True)
class Wheel:
    """One wheel the resolver chose."""

    name: str
    version: str
    url: str
    sha256: str | None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#", 1)[0]

    @property
    def pure(self) -> bool:
        return self.filename.endswith("-none-any.whl")


def parse_report(report: dict) -> list[Wheel]:
    """The wheels of a ``pip install --report`` (installation report, version 1)."""
    wheels = []
    for item in report.get("install", []):
        info = item["download_info"]
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        wheels.append(
            Wheel(
                name=canonical(item["metadata"]["name"]),
                version=str(item["metadata"]["version"]),
                url=str(info["url"]),
                sha256=hashes.get("sha256"),
            )
        )
    return sorted(wheels, key=lambda w: w.name)


def refuse_forbidden(wheels: Iterable[Wheel]) -> None:
    """Fail if the resolution pulled torch, TensorFlow or CUDA wheels."""
    bad = sorted(f"{w.name}=={w.version}" for w in wheels if FORBIDDEN.match(w.name))
    if bad:
        raise SystemExit(
            f"the resolution pulls {bad}, which the GPU machine must not get from the "
            "wheelhouse (it brings its own torch and needs no TensorFlow): find which "
            "requirement asks for them (pip install --dry-run --report) and exclude it"
        )


def _pip(args: list[str], quiet: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", *args, *(["--quiet"] if quiet else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        # pip's own "ignored location" warnings are noise here; keep its errors.
        err = "\n".join(line for line in proc.stderr.splitlines() if "is ignored" not in line)
        raise SystemExit(f"pip {args[0]} failed ({proc.returncode}):\n{err[-4000:]}")
    return proc


def build_sdist_wheels(dest: Path) -> list[Path]:
    """Wheels of :data:`SDIST_ONLY` (pure Python) built into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    _pip(["wheel", "--no-deps", "--no-build-isolation", "-w", str(dest), *SDIST_ONLY])
    return sorted(dest.glob("*.whl"))


def resolve_command(
    requirements: Sequence[str],
    python: str,
    platform: str,
    report: Path,
    find_links: Path,
    constraints: Path | None,
    target: Path,
) -> list[str]:
    """The ``pip install --dry-run --report`` arguments that resolve for the target."""
    args = ["install", "--dry-run", "--ignore-installed", "--report", str(report)]
    args += ["--target", str(target), "--find-links", str(find_links)]
    args += target_options(python, platform)
    if constraints is not None:
        args += ["--constraint", str(constraints)]
    return [*args, *requirements]


def resolve(
    requirements: Sequence[str], python: str, platform: str, work: Path, match_installed: bool
) -> list[Wheel]:
    """The wheels pip would install for the target (reads metadata, downloads no wheel)."""
    local = work / "sdist-wheels"
    build_sdist_wheels(local)
    constraints = None
    if match_installed:
        constraints = work / "installed.txt"
        constraints.write_text("\n".join(installed_constraints(skip=EXCLUDED)) + "\n")
    report = work / "report.json"
    cmd = resolve_command(
        requirements, python, platform, report, local, constraints, work / "target"
    )
    _pip(cmd)
    wheels = parse_report(json.loads(report.read_text()))
    refuse_forbidden(wheels)
    return wheels


def url_size(url: str) -> int | None:
    """Size of the file at ``url``: a local file's, or a HEAD request's Content-Length."""
    if url.startswith("file:"):
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path)).stat().st_size
    request = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(request, timeout=30) as response:
        length = response.headers.get("Content-Length")
    return int(length) if length else None


def strip_ray_jars(wheel: Path) -> tuple[int, int]:
    """Drop ``ray/jars/`` and its RECORD lines from a Ray wheel in place; (before, after) bytes."""
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename.startswith(RAY_JARS):
                continue
            data = src.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(x for x in lines if not x.startswith(RAY_JARS)).encode()
            dst.writestr(item, data)
    tmp.replace(wheel)
    return before, wheel.stat().st_size


def build_rlperf_wheel(dest: Path) -> Path:
    """rlperf's own wheel (pure Python, ``--no-deps --no-build-isolation``) into ``dest``."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "rlperf")
        source.mkdir()
        for name in WHEEL_SOURCES:
            path = REPO / name
            if path.is_dir():
                shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, source / name)
        _pip(
            [
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "-w",
                str(dest),
                str(source),
            ]
        )
    (wheel,) = dest.glob("rlperf-*.whl")
    return wheel


def download(wheels: Sequence[Wheel], python: str, platform: str, dest: Path, local: Path) -> None:
    """Fetch exactly the resolved wheels (``pip download --no-deps``, pinned)."""
    remote = [w for w in wheels if not (local / w.filename).is_file()]
    for wheel in wheels:
        if (local / wheel.filename).is_file():
            shutil.copy2(local / wheel.filename, dest / wheel.filename)
    pins = [f"{w.name}=={w.version}" for w in remote]
    if pins:
        args = ["download", "--no-deps", "--dest", str(dest), *target_options(python, platform)]
        _pip([*args, *pins])


def _mb(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f} MB"


def print_listing(wheels: Sequence[Wheel], sizes: dict[str, int | None]) -> None:
    width = max(len(w.filename) for w in wheels)
    for w in wheels:
        size = _mb(sizes.get(w.filename)) if sizes else ""
        print(f"{w.filename.ljust(width)}  {size}".rstrip())
    known = [s for s in sizes.values() if s is not None]
    pure = sum(w.pure for w in wheels)
    line = f"{len(wheels)} wheels ({pure} pure Python, {len(wheels) - pure} for the platform)"
    if known:
        line += f", {sum(known) / 1e6:.1f} MB" + (
            " (some sizes unknown)" if None in sizes.values() else ""
        )
    print(line)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--python", default="3.12", help="target CPython version (3.12)")
    p.add_argument("--platform", default="manylinux_2_28_x86_64", help="target platform tag")
    p.add_argument("--out", type=Path, default=Path("wheelhouse"), help="where the wheels go")
    p.add_argument("--dry-run", action="store_true", help="resolve and list, download nothing")
    p.add_argument("--sizes", action="store_true", help="ask for each wheel's size (HEAD)")
    p.add_argument("--strip-ray-jars", action="store_true", help="drop ray/jars (31 MiB of Java)")
    p.add_argument("--only", nargs="+", default=(), metavar="NAME", help="a subset of the deps")
    p.add_argument(
        "--skip",
        nargs="+",
        default=(),
        metavar="NAME",
        help="resolved wheels the target already has (e.g. numpy beside its torch)",
    )
    p.add_argument(
        "--no-match-installed",
        dest="match_installed",
        action="store_false",
        help="newest versions in range instead of the ones installed here",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    requirements = gpu_requirements(REPO / "pyproject.toml", args.only)
    print(f"target: CPython {args.python}, {args.platform}; requirements: {' '.join(requirements)}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheels = resolve(requirements, args.python, args.platform, work, args.match_installed)
        skipped = {canonical(n) for n in args.skip}
        if skipped:
            print(f"left out (the target must have them): {', '.join(sorted(skipped))}")
            wheels = [w for w in wheels if w.name not in skipped]
        sizes: dict[str, int | None] = {}
        if args.sizes:
            sizes = {w.filename: url_size(w.url) for w in wheels}
        if args.dry_run:
            print_listing(wheels, sizes)
            print("(+ rlperf's own wheel, built without --dry-run)")
            return 0
        args.out.mkdir(parents=True, exist_ok=True)
        download(wheels, args.python, args.platform, args.out, work / "sdist-wheels")
    rlperf = build_rlperf_wheel(args.out)
    if args.strip_ray_jars:
        for ray in args.out.glob("ray-*.whl"):
            before, after = strip_ray_jars(ray)
            print(f"{ray.name}: ray/jars removed, {_mb(before)} -> {_mb(after)}")
    files = sorted(args.out.glob("*.whl"))
    total = sum(f.stat().st_size for f in files)
    rlperf_version = rlperf.name.split("-")[1]
    pins = [f"{w.name}=={w.version}" for w in wheels] + [f"rlperf=={rlperf_version}"]
    (args.out / "requirements.txt").write_text("\n".join(pins) + "\n")
    print(f"{len(files)} wheels, {total / 1e6:.1f} MB in {args.out}")
    print(f"install there: pip install --no-deps --no-index {args.out}/*.whl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
