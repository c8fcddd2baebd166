"""Does a variant still act like the trained policy? Agreement, logit error, return parity.

A Box policy has no argmax: its variants are judged on their action error relative to
each dimension's range (:func:`action_fidelity`, against ``edge.action_tolerance``),
and its reference is near-constant when its actions barely vary
(:data:`NEAR_CONSTANT_SPREAD`).

Measured on the fidelity set (real observations, never used for calibration)
against the source torch policy: the share of observations where the greedy
action is the same, the max and mean absolute error of the (dequantized)
logits, and the difference of episode returns over the same seeded episodes.
A variant below ``edge.fidelity_threshold`` agreement, or whose paired return
interval lies below 0 (it plays worse on the same seeds), is ``flagged``.

A check is evidence only if it could have failed: a reference policy that
picks the same action on (nearly) every frame, or plays no better than a
random policy, is matched by a constant-output variant too. So the result also
measures how informative the reference is (:func:`reference_informativeness`)
and its ``verdict`` is ``vacuous`` — not ``passed`` — when the reference's most
frequent greedy action covers at least :data:`NEAR_CONSTANT_SHARE` of the
fidelity set, or when its episode returns are not above a random policy's on
the same seeded episodes (the lower end of the paired interval of
reference - random is not above 0). ``decisive_agreement`` is the agreement on
the frames whose reference top-two logit margin exceeds the variant's max
logit error: the decisions quantization could flip are the others.

Thresholds the tests hold the variants to (trained tiny policy, real Pong
frames; see ``tests/edge/test_edge_pipeline.py``): fp32 agreement 1.0 and logit error
below ``edge.export_tolerance``; fp16 agreement >= 0.99; dynamic-range and int8
agreement >= 0.9 (the default ``edge.fidelity_threshold``). Quantized logits
can flip only near-ties, so agreement well below 0.9 means a broken variant
(the study's files, fed raw bytes at the wrong scale, are the example).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlperf.models.actor import relative_action_error

#: A reference whose most frequent greedy action covers this share of the fidelity set
#: (or more) is near-constant: the fidelity check on it is vacuous.
NEAR_CONSTANT_SHARE = 0.95
#: A Box reference whose every action dimension spreads (p1 to p99 over the fidelity set)
#: over less than this share of its range is near-constant: the check on it is vacuous.
NEAR_CONSTANT_SPREAD = 0.05
#: A Box policy's variant plays worse when its paired return interval lies below this
#: share of the reference's return advantage over a random actor.
RETURN_LOSS_SHARE = 0.01
#: Level of the paired return intervals (the report's level, rlperf.report.stats.estimates).
CONFIDENCE = 0.95


def logit_fidelity(
    variant_logits: np.ndarray, reference_logits: np.ndarray, threshold: float
) -> dict[str, Any]:
    """Agreement and logit errors of ``variant_logits`` against ``reference_logits`` ``(N, A)``."""
    v = np.asarray(variant_logits, dtype=np.float64).reshape(reference_logits.shape)
    r = np.asarray(reference_logits, dtype=np.float64)
    err = np.abs(v - r)
    same = v.argmax(axis=1) == r.argmax(axis=1)
    agreement = float(same.mean()) if len(r) else float("nan")
    flagged = not agreement >= threshold
    max_err = float(err.max(initial=0.0))
    top2 = np.sort(r, axis=1)[:, -2:] if r.shape[1] > 1 else np.zeros((len(r), 2))
    decisive = (top2[:, 1] - top2[:, 0]) > max_err
    return {
        "observations": int(len(r)),
        "agreement": agreement,
        # Frames whose reference top-two margin exceeds the variant's max logit error.
        "decisive_frames": int(decisive.sum()),
        "decisive_agreement": float(same[decisive].mean()) if decisive.any() else float("nan"),
        "max_abs_logit_err": max_err,
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


def action_fidelity(
    variant_actions: np.ndarray,
    reference_actions: np.ndarray,
    span: np.ndarray,
    tolerance: float,
) -> dict[str, Any]:
    """A Box policy's action errors ``|variant - reference| / (high - low)`` over the
    fidelity set ``(N, d)``: mean, p99 and max (over observations and dimensions), the
    max per dimension; ``flagged`` when the p99 exceeds ``tolerance``
    (``edge.action_tolerance``). No agreement: a continuous action has no argmax."""
    r = np.asarray(reference_actions, dtype=np.float64)
    v = np.asarray(variant_actions, dtype=np.float64).reshape(r.shape)
    rel = relative_action_error(v, r, span)
    p99 = float(np.percentile(rel, 99)) if rel.size else float("nan")
    flagged = not p99 <= tolerance
    return {
        "observations": int(len(r)),
        "action_dims": int(r.shape[1]) if r.ndim == 2 else 1,
        "action_range": np.asarray(span, dtype=float).tolist(),
        "action_err_mean": float(rel.mean()) if rel.size else float("nan"),
        "action_err_p99": p99,
        "action_err_max": float(rel.max(initial=0.0)),
        "action_err_max_per_dim": rel.max(axis=0, initial=0.0).tolist() if rel.ndim == 2 else [],
        "tolerance": float(tolerance),
        "flagged": flagged,
        "flag_reason": (
            f"p99 action error {p99:.3g} of the range is above edge.action_tolerance={tolerance}"
            if flagged
            else None
        ),
    }


def paired_interval(diffs: Sequence[float]) -> tuple[float, float]:
    """Student-t :data:`CONFIDENCE` interval of the mean of paired differences (NaN below 2;
    a point where they are all equal)."""
    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        return float("nan"), float("nan")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return mean, mean
    from scipy import stats

    half = float(stats.t.ppf(1 - (1 - CONFIDENCE) / 2, d.size - 1)) * sd / math.sqrt(d.size)
    return mean - half, mean + half


def return_parity(
    variant_returns: Sequence[float],
    reference_returns: Sequence[float],
    truncated: Sequence[bool] | None = None,
) -> dict[str, Any]:
    """Return difference over the episodes both played (same seeds, in order), with its
    paired interval: a ``tie`` when the interval contains 0. ``saturates`` when every
    episode of the variant ended at the env's time limit (``truncated``) and every return of
    both is the same: the cap, where no difference can show."""
    n = min(len(variant_returns), len(reference_returns))
    if n == 0:
        return {"return_diff": float("nan"), "episodes_compared": 0, "same_return_episodes": 0}
    v = np.asarray(variant_returns[:n], dtype=float)
    r = np.asarray(reference_returns[:n], dtype=float)
    low, high = paired_interval(v - r)
    capped = truncated is not None and len(truncated) >= n and all(truncated[:n])
    return {
        "return_diff": float(v.mean() - r.mean()),
        "return_diff_low": low,
        "return_diff_high": high,
        "return_tie": bool(low <= 0 <= high) if math.isfinite(low) else bool(v.mean() == r.mean()),
        "saturates": bool(capped and np.ptp(np.concatenate([v, r])) == 0),
        "episodes_compared": int(n),
        "same_return_episodes": int((v == r).sum()),
        "returns": v.tolist(),
        "reference_returns": r.tolist(),
    }


def reference_informativeness(
    reference_outputs: np.ndarray,
    reference_returns: Sequence[float],
    random_returns: Sequence[float] | None,
    action_span: np.ndarray | None = None,
) -> dict[str, Any]:
    """How much a fidelity check against this reference can show (module docstring).

    Discrete: the action-histogram entropy (bits, and over its maximum ``log2(A)``) and
    the most frequent action's share of the fidelity set. Box (``action_span`` given,
    ``reference_outputs`` its actions): each dimension's p1-p99 spread over its range.
    Both: the reference's return against a random policy's on the same seeded episodes
    (paired interval). ``vacuous`` with its reason.
    """
    reasons: list[str] = []
    if action_span is None:
        out = _action_histogram(np.asarray(reference_outputs, dtype=np.float64), reasons)
    else:
        out = _action_spread(np.asarray(reference_outputs, dtype=np.float64), action_span, reasons)
    out["random_returns"] = list(random_returns) if random_returns is not None else None
    n = min(len(reference_returns), len(random_returns or []))
    if random_returns is not None and n > 0:
        d = np.asarray(reference_returns[:n], float) - np.asarray(random_returns[:n], float)
        low, high = paired_interval(d)
        out.update(vs_random_diff=float(d.mean()), vs_random_low=low, vs_random_high=high)
        better = low > 0 if math.isfinite(low) else d.mean() > 0
        if not better:
            reasons.append(
                f"its return is not above a random policy's on the same {n} episodes "
                f"(reference - random {d.mean():+.3g}, interval [{low:.3g}, {high:.3g}])"
            )
    out["vacuous"] = bool(reasons)
    out["vacuous_reason"] = "; ".join(reasons) or None
    return out


def _action_histogram(r: np.ndarray, reasons: list[str]) -> dict[str, Any]:
    """A Discrete reference's greedy actions on the fidelity set: entropy, top share."""
    counts = np.bincount(r.argmax(axis=1), minlength=r.shape[1]) if len(r) else np.zeros(1)
    p = counts / max(1, counts.sum())
    nz = p[p > 0]
    entropy = float(-(nz * np.log2(nz)).sum())
    share = float(p.max(initial=0.0))
    if share >= NEAR_CONSTANT_SHARE:
        reasons.append(
            f"the reference picks one action on {share:.0%} of the fidelity set "
            f"(>= {NEAR_CONSTANT_SHARE:.0%}: near-constant)"
        )
    return {
        "action_entropy_bits": entropy,
        "action_entropy_ratio": entropy / math.log2(r.shape[1]) if r.shape[1] > 1 else 0.0,
        "top_action_share": share,
        "near_constant_share": NEAR_CONSTANT_SHARE,
    }


def _action_spread(r: np.ndarray, span: np.ndarray, reasons: list[str]) -> dict[str, Any]:
    """A Box reference's actions on the fidelity set: each dimension's p1-p99 spread
    over its range (near-constant when every one is under :data:`NEAR_CONSTANT_SPREAD`)."""
    if len(r):
        spread = (np.percentile(r, 99, axis=0) - np.percentile(r, 1, axis=0)) / np.asarray(span)
    else:
        spread = np.zeros(len(span))
    if float(spread.max(initial=0.0)) < NEAR_CONSTANT_SPREAD:
        reasons.append(
            f"the reference's actions barely vary over the fidelity set (p1-p99 spread "
            f"{float(spread.max(initial=0.0)):.1%} of the range at most, under "
            f"{NEAR_CONSTANT_SPREAD:.0%}: near-constant)"
        )
    return {"action_spread": spread.tolist(), "near_constant_spread": NEAR_CONSTANT_SPREAD}


def return_loss_margin(reference: dict[str, Any], continuous: bool) -> float:
    """How far below 0 a variant's return interval must lie to flag it: 0 for a Discrete
    policy, :data:`RETURN_LOSS_SHARE` of the reference's advantage over random for a Box."""
    gain = reference.get("vs_random_diff")
    if not continuous or gain is None or not math.isfinite(gain):
        return 0.0
    return RETURN_LOSS_SHARE * max(0.0, float(gain))


def verdict(fidelity: dict[str, Any]) -> str:
    """``vacuous`` (reference uninformative), else ``flagged`` (agreement below the
    threshold, or the variant plays worse: see :func:`flag_return_loss`) or ``passed``."""
    if (fidelity.get("reference") or {}).get("vacuous"):
        return "vacuous"
    return "flagged" if fidelity.get("flagged") else "passed"


def flag_return_loss(fidelity: dict[str, Any], margin: float = 0.0) -> None:
    """Flag a variant whose paired return interval lies below ``-margin`` (it plays worse
    than the reference on the same seeds), however well its greedy actions agree: a few
    flipped decisions can cost whole episodes. A Box policy's margin is
    :data:`RETURN_LOSS_SHARE` of the reference's advantage over a random actor
    (:func:`return_loss_margin`): its returns move continuously with its actions, so a
    loss of a thousandth is consistent over paired episodes, and significant, but no loss."""
    high = fidelity.get("return_diff_high")
    fidelity["return_loss_margin"] = float(margin)
    if fidelity.get("flagged") or high is None or not math.isfinite(high) or high >= -margin:
        return
    fidelity["flagged"] = True
    fidelity["flag_reason"] = (
        f"plays worse than the reference: return {fidelity['return_diff']:+.3g} "
        f"[{fidelity['return_diff_low']:.3g}, {high:.3g}] over "
        f"{fidelity['episodes_compared']} paired episodes"
    )
