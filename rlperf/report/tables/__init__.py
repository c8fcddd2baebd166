"""The report's tidy tables (docs/report.md): runs, configurations, iterations, latency, env
windows and serve levels, and how they are written (CSV + Parquet)."""
