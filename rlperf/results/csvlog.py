"""Append-only CSV files whose every row reaches the disk before the next one starts."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class CsvLog:
    """A CSV with a fixed header; ``write(row)`` appends one row and flushes it to disk.

    Columns missing from a row are written empty (read back as NaN), so every
    column is present from the first row; unknown keys are an error.
    """

    def __init__(self, path: Path, columns: Sequence[str], fsync: bool = False) -> None:
        self.path = Path(path)
        self.columns = list(columns)
        self._fsync = fsync
        self._file = self.path.open("w", newline="")
        self._writer = csv.writer(self._file)
        self._writer.writerow(self.columns)
        self._file.flush()

    def write(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise KeyError(f"{self.path.name}: unknown columns {sorted(unknown)}")
        self._writer.writerow([_cell(row.get(c)) for c in self.columns])
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> CsvLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return repr(value)
    return value
