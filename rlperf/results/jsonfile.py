"""JSON result files written atomically, NaN as null (standard library only: the record,
the sweep's index and the search's results write through it without numpy)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    """Write JSON atomically (NaN as null), so a crash never leaves half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(_nan_to_none(payload), indent=2, sort_keys=False) + "\n")
        tmp.replace(path)
    except BaseException:  # a full disk: the file before stays, no half-written .tmp beside it
        tmp.unlink(missing_ok=True)
        raise


def _nan_to_none(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {str(k): _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_nan_to_none(v) for v in obj]
    return obj
