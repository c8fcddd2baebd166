"""The committed policies (benchmarks/policies/*): what their provenance says, checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

#: What a downstream stage reads of a committed policy folder.
NEEDED = ("checkpoint/rlperf_policy.pt", "checkpoint/probe.npz", ".hydra/config.yaml")


def checked_provenance(folder: Path) -> dict[str, Any]:
    """``provenance.json`` of ``folder``, after checking that it lists the files a stage
    needs and that every file it lists is, byte for byte (SHA-256), the one it checked."""
    provenance: dict[str, Any] = json.loads((folder / "provenance.json").read_text())
    for rel in NEEDED:
        assert rel in provenance["sha256"], rel
    for rel, digest in provenance["sha256"].items():
        assert hashlib.sha256((folder / rel).read_bytes()).hexdigest() == digest, rel
    return provenance
