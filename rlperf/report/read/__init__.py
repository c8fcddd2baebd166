"""Reading: find cells under the input folders and load them (rlperf jobs, Tune runs, the
2021 study's rollout CSVs, search folders) into :class:`~rlperf.report.read.cells.Cell`."""
