"""What leaves the report: the blocks rendered as report.md and report.html
(:mod:`.render`) and runs sent to tracking tools with ``--to`` (:mod:`.tracking`)."""
