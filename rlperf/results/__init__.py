"""What a job writes and the report reads: the canonical columns, CSV logs flushed per row,
summaries, latency statistics and the env protocol."""
