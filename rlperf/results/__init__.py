"""Result files: CSV logs flushed per row, summaries, the job wrapper."""
