"""Compare the machine / software fingerprints of cells.

``fingerprint.json`` (docs/results.md) records hardware, software, the
affinity mask, host name, start time and the resolved config. Only the
hardware and software part decides whether two cells are comparable: the
affinity mask and the config are what a sweep varies on purpose, and host name
and times differ between identical machines and runs. The comparison is
schema-agnostic: every flattened leaf counts unless its key names one of the
:data:`IGNORED_WORDS`, so new fingerprint fields are compared without a code
change here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rlperf.report.read.cells import Cell
from rlperf.results.flat import flatten

#: A leaf is not compared when a word of its key (split at "." and "_") is one of these.
IGNORED_WORDS = frozenset(
    {
        "host",
        "hostname",
        "node",
        "nodename",
        "time",
        "timestamp",
        "date",
        "start",
        "started",
        "end",
        "pid",
        "affinity",
        "mask",
        "config",
        "cwd",
        "dir",
        "path",
        "output",
        "uuid",
        "serial",
        "bus",
        "id",
        "free",
        "available",
        "used",
        "util",
        "utilization",
        "temperature",
        "temp",
        "power",
        "clock",
        "load",
        "percent",
        # set per cell by the GPU layout (CUDA_VISIBLE_DEVICES), like the affinity mask
        "visible",
    }
)


def flatten_all(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Like :func:`~rlperf.results.flat.flatten`, but lists are expanded too (``gpus.0.name``),
    so that per-item fields such as a GPU's UUID can be left out of the comparison."""
    out: dict[str, Any] = {}
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            out.update(flatten_all(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, list | tuple) and tree and any(isinstance(v, dict) for v in tree):
        for i, value in enumerate(tree):
            out.update(flatten_all(value, f"{prefix}.{i}" if prefix else str(i)))
    elif prefix:
        out[prefix] = flatten({"_": tree})["_"]
    return out


def comparable(raw: dict[str, Any]) -> dict[str, Any]:
    """The hardware/software leaves of a raw (nested) fingerprint."""
    flat = flatten_all(raw)
    out: dict[str, Any] = {}
    for key, value in flat.items():
        words = re.split(r"[._\-]", key.lower())
        if IGNORED_WORDS.intersection(words):
            continue
        out[key] = value
    return out


#: The leaves of a comparable fingerprint that describe the machine, not its software.
HARDWARE_PREFIXES = ("cpu", "ram", "gpus", "gpu_driver", "cgroup", "edgetpu", "platform")


def key_of(fingerprint: dict[str, Any], hardware: bool = False) -> str:
    """A short stable digest of a cell's comparable fingerprint (``hardware``: of its
    machine's leaves only, what a history prior is matched on)."""
    leaves = sorted((k, repr(v)) for k, v in fingerprint.items()
                    if not hardware or k.lower().startswith(HARDWARE_PREFIXES))  # fmt: skip
    return hashlib.sha256(json.dumps(leaves).encode()).hexdigest()[:12]


def _find(flat: dict[str, Any], *patterns: str) -> list[Any]:
    hits = []
    for key, value in flat.items():
        k = key.lower()
        if all(re.search(p, k) for p in patterns) and value not in (None, "", "[]"):
            hits.append(value)
    return hits


def describe(raw: dict[str, Any]) -> str:
    """One readable line: CPU model and count, GPU names, Edge TPU (best effort)."""
    flat = flatten_all(raw)
    parts: list[str] = []
    cpu = _find(flat, r"cpu", r"(model|name|brand)")
    if cpu:
        count = _find(flat, r"cpu", r"(count|logical|num)")
        parts.append(f"{cpu[0]}" + (f" ×{count[0]}" if count else ""))
    gpus = [g for g in _find(flat, r"gpu", r"name") if isinstance(g, str)]
    if gpus:
        names: list[str] = []
        for g in gpus:
            names.extend(_as_list(g))
        parts.append(" + ".join(names))
    tpu = _find(flat, r"edge_?tpu(\.present)?$")
    if tpu and tpu[0] not in (False, "false", 0, "[]") and not isinstance(tpu[0], dict):
        parts.append("Edge TPU")
    return ", ".join(parts)


def _as_list(value: str) -> list[str]:
    if value.startswith("["):
        try:
            return [str(v) for v in json.loads(value)]
        except ValueError:
            return [value]
    return [value]


def host_of(raw: dict[str, Any]) -> str:
    """The host name recorded in a fingerprint, or ''."""
    hits = _find(flatten(raw), r"(^|\.)host(name)?$")
    return str(hits[0]) if hits else ""


def start_time_of(raw: dict[str, Any]) -> float | None:
    """The job's start time as a POSIX timestamp (ISO strings or numbers), or None."""
    for key, value in flatten(raw).items():
        if not re.search(r"start", key.lower()):
            continue
        if isinstance(value, int | float) and value > 1e8:
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


@dataclass
class FingerprintGroup:
    """Cells that share one comparable fingerprint."""

    name: str
    machine: str
    fingerprint: dict[str, Any]
    cells: list[str]


def group_cells(cells: Sequence[Cell]) -> dict[str, FingerprintGroup]:
    """Assign every cell a fingerprint group name (fp1, fp2, ... in order of first appearance)."""
    groups: dict[str, FingerprintGroup] = {}
    by_key: dict[tuple[tuple[str, str], ...], str] = {}
    for cell in cells:
        key = tuple(sorted((k, repr(v)) for k, v in cell.fingerprint.items()))
        name = by_key.get(key)
        if name is None:
            name = f"fp{len(by_key) + 1}"
            by_key[key] = name
            groups[name] = FingerprintGroup(
                name, cell.machine or "unknown machine", dict(cell.fingerprint), []
            )
        groups[name].cells.append(cell.id)
    return groups


def differing_keys(fingerprints: Iterable[dict[str, Any]], limit: int = 8) -> list[str]:
    """Keys whose values differ (or are missing) between the given fingerprints."""
    fps = list(fingerprints)
    keys = sorted(set().union(*[fp.keys() for fp in fps])) if fps else []
    out = [k for k in keys if len({repr(fp.get(k)) for fp in fps}) > 1]
    if len(out) > limit:
        return [*out[:limit], f"... {len(out) - limit} more"]
    return out
