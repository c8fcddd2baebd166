"""Section *Serving*: the max rate each configuration sustains within its SLO (ranked by
rate, not by time), and the serve findings the summary lists."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rlperf.report.export import render
from rlperf.report.sections.base import Section
from rlperf.report.tables.serve import ServeTables


def serve_section(res: Any) -> list[render.Block]:
    """The report's "Serving" section: the max-rate table (empty without serve cells)."""
    data: ServeTables | None = getattr(res, "serve", None)
    if data is None or data.max_rate.empty:
        return []
    df = data.max_rate.copy()
    rates = [_rate(r, b) for r, b in zip(df["max_rate_rps"], df["bounded"], strict=True)]
    show = pd.DataFrame({
        "configuration": df["config"],
        "model": df["model"],
        "max rate under p99 bound (req/s)": rates,
        "p99 bound (ms)": df["slo_ms"].map(_num),
        "model busy share at that rate": df["model_busy_share_at_max"].map(_num),
        "in-process p50 (ms)": df["inprocess_p50_ms"].map(_num),
        "HTTP p50 (ms)": df["http_p50_ms"].map(_num),
        "echo HTTP p50 (ms)": df["echo_http_p50_ms"].map(_num),
        "Serve adds (ms)": df["serve_added_http_ms"].map(_num),
        "echo HTTP capacity (req/s)": df["echo_http_capacity_rps"].map(_num),
    })  # fmt: skip
    return [
        render.Heading("Serving", 2),
        render.Para(
            "The highest offered Poisson rate whose p99 latency's upper 95% bound meets the "
            "bound, searched over the open-loop levels the generator kept on schedule "
            "(MLPerf's Server scenario); latency counts from the scheduled send time. "
            "Baseline columns: one request at a time; echo HTTP capacity: what the "
            "generator and the proxy sustain without a model, so a max rate near it "
            "measures the client as much as the policy (docs/serve.md)."
        ),
        render.Table(show.sort_values("configuration")),
    ]


def serve_findings(data: ServeTables | None) -> list[str]:
    """One sentence per serve cell: its max rate under the bound and what Serve adds."""
    if data is None or data.max_rate.empty:
        return []
    out = []
    for r in data.max_rate.sort_values("config").to_dict("records"):
        rate = _rate(r["max_rate_rps"], r["bounded"])
        where = f"serve `{r['config']}` ({r['model']}, {r['backend']})"
        met = (
            f"no Poisson rate tried met the p99 bound of {_num(r['slo_ms'])} ms"
            if rate == "none met it"
            else f"the highest Poisson rate meeting the p99 bound of {_num(r['slo_ms'])} ms "
            f"is {rate} req/s"
        )
        added = f"; Serve over HTTP adds {_num(r['serve_added_http_ms'])} ms at p50 over in-process"
        out.append(f"{where}: {met}{added}.")
    return out


def _num(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if not math.isfinite(x) else (f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}")


def _rate(rate: Any, bounded: Any) -> str:
    if rate is None or (isinstance(rate, float) and not math.isfinite(rate)):
        return "none met it"
    return f"{float(rate):g}" + ("" if bool(bounded) else " (or more: no level above failed)")


SECTION = Section(
    name="serve",
    title="Serving",
    order=100,
    needs=("serve",),
    render=lambda inputs: serve_section(inputs.result),
)
