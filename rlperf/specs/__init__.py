"""The specs of what a user picks by name, and every table derived from them.

One spec per stage (:mod:`rlperf.specs.stages`), per backend
(:mod:`rlperf.specs.backends`), per env engine (:mod:`rlperf.specs.engines`) and per
algorithm (:mod:`rlperf.specs.algos`: the class; each algorithm's module defines its spec
beside the builder and validator the spec holds). Each
module keys its specs by the enum that composition checks (``stage``, ``backend.name``,
``env.engine``; the schema imports the enums from here), so a name is written once and
every other table (which stage reads which key, which backends compress, which engines
have threads, ...) is derived. Code asks a spec (``spec.executor``, ``spec.trains``,
``spec.threaded``), never compares a name (tests/project/test_specs.py holds it).

Standard library, :mod:`rlperf.layout` and :mod:`rlperf.vocabulary` only: the schema,
the console, tracking and the report all read these tables, and sit on floors above.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any


def load(path: str) -> Any:
    """The object a spec names by ``module:attribute``, its module imported now (a stage's
    entry point pulls Ray or TensorFlow: only the stage that runs imports it)."""
    module, _, attribute = path.partition(":")
    return getattr(import_module(module), attribute)
