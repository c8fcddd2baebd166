"""Test kits shared by the tests and the benchmarks (not part of the ``rlperf`` package).

Importable as ``support`` because ``tests/`` is on the path: pytest adds it
(``pythonpath`` in pyproject.toml); the benchmarks need ``PYTHONPATH=tests``
(``nox -s bench`` sets it; see docs/development.md).

- :mod:`support.synthetic`: cell folders in rlperf's result format, for the report.
- :mod:`support.edge_kit`: trained policies, the study's reference files, a stub
  Edge TPU runtime and a fake ``edgetpu_compiler``, for the edge stage.
"""
