"""The sections of the report, one module each (see :mod:`rlperf.report.sections.base`)."""
