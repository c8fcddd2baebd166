"""Does a variant still act like the trained policy? Agreement, logit error, return parity.

Measured on the fidelity set (real observations, never used for calibration)
against the source torch policy: the share of observations where the greedy
action is the same, the max and mean absolute error of the (dequantized)
logits, and the difference of episode returns over the same seeded episodes.
A variant below ``edge.fidelity_threshold`` agreement is ``flagged``.

Thresholds the tests hold the variants to (trained tiny policy, real Pong
frames; see ``tests/test_edge_export.py``): fp32 agreement 1.0 and logit error
below ``edge.export_tolerance``; fp16 agreement >= 0.99; dynamic-range and int8
agreement >= 0.9 (the default ``edge.fidelity_threshold``). Quantized logits
can flip only near-ties, so agreement well below 0.9 means a broken variant
(the study's files, fed raw bytes at the wrong scale, are the example).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def logit_fidelity(
    variant_logits: np.ndarray, reference_logits: np.ndarray, threshold: float
) -> dict[str, Any]:
    """Agreement and logit errors of ``variant_logits`` against ``reference_logits`` ``(N, A)``."""
    v = np.asarray(variant_logits, dtype=np.float64).reshape(reference_logits.shape)
    r = np.asarray(reference_logits, dtype=np.float64)
    err = np.abs(v - r)
    agreement = float((v.argmax(axis=1) == r.argmax(axis=1)).mean()) if len(r) else float("nan")
    flagged = not agreement >= threshold
    return {
        "observations": int(len(r)),
        "agreement": agreement,
        "max_abs_logit_err": float(err.max(initial=0.0)),
        "mean_abs_logit_err": float(err.mean()) if err.size else float("nan"),
        "reference_logit_range": float(np.abs(r).max(initial=0.0)),
        "action_histogram": np.bincount(v.argmax(axis=1), minlength=r.shape[1]).tolist(),
        "reference_action_histogram": np.bincount(r.argmax(axis=1), minlength=r.shape[1]).tolist(),
        "threshold": float(threshold),
        "flagged": flagged,
        "flag_reason": (
            f"greedy-action agreement {agreement:.3f} is below edge.fidelity_threshold={threshold}"
            if flagged
            else None
        ),
    }


def return_parity(
    variant_returns: Sequence[float], reference_returns: Sequence[float]
) -> dict[str, Any]:
    """Return difference over the episodes both played (same seeds, in order)."""
    n = min(len(variant_returns), len(reference_returns))
    if n == 0:
        return {"return_diff": float("nan"), "episodes_compared": 0, "same_return_episodes": 0}
    v = np.asarray(variant_returns[:n], dtype=float)
    r = np.asarray(reference_returns[:n], dtype=float)
    return {
        "return_diff": float(v.mean() - r.mean()),
        "episodes_compared": int(n),
        "same_return_episodes": int((v == r).sum()),
        "returns": v.tolist(),
        "reference_returns": r.tolist(),
    }
