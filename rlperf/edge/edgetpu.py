"""Coral Edge TPU: runtime detection, delegate loading, compiler invocation and its log.

Runtime: the Edge TPU runtime is the shared library ``libedgetpu.so.1``
(Debian package ``libedgetpu1-std`` or ``-max`` from Coral's apt repository).
It is loaded as a TFLite external delegate with LiteRT's
``ai_edge_litert.interpreter.load_delegate``. PyPI's ``pycoral`` is an
unrelated package and is never required; Google's ``pycoral`` (from Coral's
repository) is used, when importable, only to list the devices.

Two failure modes, reported differently:

- runtime absent: ``ctypes`` cannot load the library and raises ``OSError``
  (``load_delegate``'s docstring promises ``ValueError``; it is not what happens);
- runtime present, delegate failed: the library loads but
  ``tflite_plugin_create_delegate`` returns NULL (typically no device, or the
  device is held by another process); LiteRT raises ``ValueError`` with the
  library's error text.

Both raise :class:`EdgeTpuUnavailable`, a :class:`~rlperf.errors.SkipCell`:
the cell is skipped with the reason and :data:`INSTALL_HINT`.

Compiler: ``edgetpu_compiler`` (Debian package ``edgetpu-compiler``, x86-64
only) turns a full-integer ``.tflite`` into ``<name>_edgetpu.tflite`` whose
Edge-TPU part is one ``edgetpu-custom-op`` per subgraph; ops it cannot map
stay as ordinary TFLite ops that run on the CPU. :func:`parse_compiler_output`
reads its summary (``-s``) and operation table.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlperf.errors import EdgeTpuUnavailable
from rlperf.tflite.tflite_model import read_tflite, with_input_normalization

EDGETPU_LIBRARY = "libedgetpu.so.1"
COMPILER = "edgetpu_compiler"
MAPPED_STATUS = "Mapped to Edge TPU"

INSTALL_HINT = """\
Install the Coral Edge TPU runtime and compiler from Coral's own apt repository
(Debian/Ubuntu, x86-64; the compiler is not available for ARM):
  echo "deb https://packages.cloud.google.com/apt coral-edgetpu-stable main" \\
    | sudo tee /etc/apt/sources.list.d/coral-edgetpu.list
  curl https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo apt-key add -
  sudo apt-get update
  sudo apt-get install libedgetpu1-std edgetpu-compiler
(libedgetpu1-max runs the TPU at its maximum clock.) For a PCIe/M.2 card also
install gasket-dkms and add your user to the apex group; plug a USB
Accelerator in after installing the runtime. See https://coral.ai/docs/.
Do not `pip install pycoral` from PyPI: that name is an unrelated package."""


@dataclass
class EdgeTpuRuntime:
    """Whether the Edge TPU runtime library can be loaded."""

    library: str
    available: bool
    reason: str | None = None
    devices: list[dict[str, str]] | None = None  # from Google's pycoral, when importable

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_runtime(library: str = EDGETPU_LIBRARY) -> EdgeTpuRuntime:
    """Load ``library`` with a plain ``ctypes`` load; absent: ``available=False`` and why."""
    try:
        ctypes.CDLL(library)
    except OSError as exc:
        return EdgeTpuRuntime(library, False, f"Edge TPU runtime {library} not found: {exc}")
    return EdgeTpuRuntime(library, True, None, list_devices())


def list_devices() -> list[dict[str, str]] | None:
    """Edge TPUs seen by Google's pycoral (``pycoral.utils.edgetpu``), or None without it."""
    try:
        from pycoral.utils.edgetpu import list_edge_tpus  # type: ignore[import-not-found]
    except Exception:  # absent, or PyPI's unrelated 'pycoral'
        return None
    try:
        return [dict(d) for d in list_edge_tpus()]
    except Exception:
        return None


def load_edgetpu_delegate(library: str = EDGETPU_LIBRARY, device: str | None = None) -> Any:
    """The Edge TPU TFLite delegate (``ai_edge_litert`` ``load_delegate``).

    Args:
        library: the runtime library (``edge.edgetpu_library``).
        device: ``"usb"``, ``"usb:0"``, ``"pci:0"``... (``edge.edgetpu_device``); None = the first.

    Raises:
        EdgeTpuUnavailable: library absent (``OSError``) or delegate creation failed
            (``ValueError``, e.g. no device attached).
    """
    from ai_edge_litert.interpreter import load_delegate

    runtime = find_runtime(library)
    if not runtime.available:
        # Checked first: LiteRT's Delegate would raise OSError from a half-built object.
        raise EdgeTpuUnavailable(f"{runtime.reason}.\n{INSTALL_HINT}")
    options = {"device": device} if device else {}
    try:
        return load_delegate(library, options)
    except OSError as exc:
        raise EdgeTpuUnavailable(f"Edge TPU runtime {library}: {exc}.\n{INSTALL_HINT}") from exc
    except ValueError as exc:
        detail = str(exc).strip().replace("\n", " ")
        raise EdgeTpuUnavailable(
            f"Edge TPU runtime {library} loaded but the delegate could not be created "
            f"({detail or 'no message'}): is a Coral device attached and not in use by "
            f"another process{f' (device={device!r})' if device else ''}?"
        ) from exc


def probe_delegate(library: str = EDGETPU_LIBRARY, device: str | None = None) -> None:
    """Create and release the delegate once (fails early, before any artifact is built)."""
    delegate = load_edgetpu_delegate(library, device)
    del delegate


def find_compiler() -> str | None:
    """Path of ``edgetpu_compiler`` on PATH, or None."""
    return shutil.which(COMPILER)


@dataclass
class CompilerReport:
    """What ``edgetpu_compiler`` said about one model."""

    version: str | None = None
    compiled: bool = False
    subgraphs: int | None = None  # "Number of Edge TPU subgraphs"
    ops_total: int | None = None
    ops_on_tpu: int | None = None
    ops_on_cpu: int | None = None
    operators: list[dict[str, Any]] = field(default_factory=list)  # op, count, status, on_tpu
    on_chip_memory: str | None = None
    off_chip_memory: str | None = None
    output_model: str | None = None
    log_file: str | None = None

    @property
    def fully_mapped(self) -> bool:
        """Every op on the Edge TPU, in a single subgraph."""
        return bool(self.compiled and self.ops_on_cpu == 0 and self.subgraphs == 1)

    @property
    def cpu_ops(self) -> dict[str, int]:
        """Ops the compiler left on the CPU, by kind."""
        out: dict[str, int] = {}
        for row in self.operators:
            if not row["on_tpu"]:
                out[row["op"]] = out.get(row["op"], 0) + int(row["count"])
        return out

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fully_mapped"] = self.fully_mapped
        out["cpu_ops"] = self.cpu_ops
        return out


_ROW = re.compile(r"^([A-Z][A-Z0-9_]*)\s+(\d+)\s+(\S.*?)\s*$")
_FIELDS = {
    "subgraphs": re.compile(r"Number of Edge TPU subgraphs:\s*(\d+)"),
    "ops_total": re.compile(r"Total number of operations:\s*(\d+)"),
    "ops_on_tpu": re.compile(r"Number of operations that will run on Edge TPU:\s*(\d+)"),
    "ops_on_cpu": re.compile(r"Number of operations that will run on CPU:\s*(\d+)"),
}


def parse_compiler_output(text: str) -> CompilerReport:
    """Parse the console output of ``edgetpu_compiler -s`` (or its ``.log`` file).

    The op counts come from the summary lines when present (the compiler prints
    "Number of operations that will run on ..." only when some ops stay on the
    CPU) and otherwise from the operator table.
    """
    report = CompilerReport()
    if m := re.search(r"Edge TPU Compiler version\s+(\S+)", text):
        report.version = m.group(1)
    report.compiled = bool(re.search(r"Model (successfully )?compiled successfully", text)) or (
        "Compilation succeeded" in text
    )
    for name, rx in _FIELDS.items():
        if m := rx.search(text):
            setattr(report, name, int(m.group(1)))
    if m := re.search(r"On-chip memory used for caching model parameters:\s*(\S+)", text):
        report.on_chip_memory = m.group(1)
    if m := re.search(
        r"Off-chip memory used for streaming uncached model parameters:\s*(\S+)", text
    ):
        report.off_chip_memory = m.group(1)
    if m := re.search(r"Output model:\s*(\S+)", text):
        report.output_model = m.group(1)
    if m := re.search(r"Operation log:\s*(\S+)", text):
        report.log_file = m.group(1)
    in_table = False
    for line in text.splitlines():
        if re.match(r"^Operator\s+Count\s+Status", line):
            in_table = True
            continue
        if in_table and (m := _ROW.match(line.strip())):
            status = m.group(3)
            report.operators.append(
                {
                    "op": m.group(1),
                    "count": int(m.group(2)),
                    "status": status,
                    "on_tpu": status == MAPPED_STATUS,
                }
            )
    if report.operators:
        on_tpu = sum(r["count"] for r in report.operators if r["on_tpu"])
        on_cpu = sum(r["count"] for r in report.operators if not r["on_tpu"])
        report.ops_on_tpu = report.ops_on_tpu if report.ops_on_tpu is not None else on_tpu
        report.ops_on_cpu = report.ops_on_cpu if report.ops_on_cpu is not None else on_cpu
        if report.ops_total is None:
            report.ops_total = on_tpu + on_cpu
    elif report.compiled and report.ops_total is not None and report.ops_on_cpu is None:
        report.ops_on_cpu = 0
        report.ops_on_tpu = report.ops_total
    return report


def compile_model(
    model_path: Path, out_dir: Path, compiler: str | None = None, timeout_s: float = 600.0
) -> tuple[Path, CompilerReport, str]:
    """Run ``edgetpu_compiler -s -o out_dir model_path``.

    Returns:
        ``(compiled model path, report, console output + operation log)``.

    Raises:
        EdgeTpuUnavailable: no compiler on PATH (with :data:`INSTALL_HINT`).
        RuntimeError: the compiler failed (its output is in the message).
    """
    compiler = compiler or find_compiler()
    if compiler is None:
        raise EdgeTpuUnavailable(f"{COMPILER} is not on PATH.\n{INSTALL_HINT}")
    model_path = Path(model_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [compiler, "-s", "-o", str(out_dir), str(model_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    output = proc.stdout + proc.stderr
    compiled = out_dir / f"{model_path.stem}_edgetpu.tflite"
    log_path = out_dir / f"{model_path.stem}_edgetpu.log"
    if log_path.is_file():
        output += "\n--- operation log ---\n" + log_path.read_text(errors="replace")
    if proc.returncode != 0 or not compiled.is_file():
        raise RuntimeError(
            f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{output.strip()[-4000:]}"
        )
    _keep_input_normalization(model_path, compiled)
    report = parse_compiler_output(output)
    report.compiled = True
    return compiled, report, output


def _keep_input_normalization(source: Path, compiled: Path) -> None:
    """The source's per-feature input normalization in the compiled file too, where the
    compiler did not carry its metadata over: without it the Edge TPU would be fed raw
    observations that the folded first layer takes as normalized ones."""
    try:
        norm = read_tflite(source).input_normalization
    except ValueError:  # not a TFLite flatbuffer: the compiler judged it already
        return
    if norm is not None and read_tflite(compiled).input_normalization is None:
        compiled.write_bytes(with_input_normalization(compiled.read_bytes(), norm))
