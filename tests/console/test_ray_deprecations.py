"""Deprecated Ray / RLlib APIs: those rlperf calls are found (and fail the tests), RLlib's are not.

The call chains are built from real frames: small modules whose ``__name__``
says whose code they are (``rlperf.*`` or ``ray.*``), calling Ray's real
``deprecation_warning`` and ``@Deprecated``.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import pytest
from ray._common.deprecation import Deprecated, deprecation_warning

from rlperf.console.deprecations import OWN_DEPRECATION, watching

RAY_LIB = """
def old_api():                       # an API whose body reports its own deprecation
    deprecation_warning(old="old_api", new="new_api")

@Deprecated(old="decorated_api", new="new_api", error=False)
def decorated_api():
    pass

@Deprecated(old="OldConfig", new="new arguments", error=False)
class OldConfig:
    pass

def builds_old_config():             # RLlib's RLModule.__init__ does this for every module
    return OldConfig()

def calls_decorated_api():           # a current API that uses a deprecated one internally
    decorated_api()
"""

RLPERF_CODE = """
def calls(api):
    return api()
"""


def _module(name: str, source: str, **names: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(names)
    exec(compile(source, f"/fake/{name.replace('.', '/')}.py", "exec"), module.__dict__)
    return module


@pytest.fixture
def apis() -> tuple[types.ModuleType, types.ModuleType]:
    import ray.util.debug

    ray.util.debug.reset_log_once()  # @Deprecated reports once per process
    lib = _module(
        "ray.fake_lib", RAY_LIB, deprecation_warning=deprecation_warning, Deprecated=Deprecated
    )
    return lib, _module("rlperf.fake_caller", RLPERF_CODE)


@pytest.mark.own_deprecations
@pytest.mark.parametrize(
    ("api", "own"),
    [
        ("old_api", True),  # rlperf calls a deprecated API
        ("decorated_api", True),  # rlperf calls a @Deprecated function
        ("OldConfig", True),  # rlperf builds a @Deprecated class
        ("builds_old_config", False),  # RLlib builds it (RLModuleConfig's case)
        ("calls_decorated_api", False),  # RLlib calls it from a current API
    ],
)
def test_deprecations_reached_from_rlperfs_calls_are_found(
    apis: tuple[types.ModuleType, types.ModuleType],
    api: str,
    own: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lib, rlperf_code = apis
    with caplog.at_level(logging.WARNING), watching() as handler:
        rlperf_code.calls(getattr(lib, api))
    reported = [r for r in caplog.records if r.name == "ray._common.deprecation"]
    assert len(reported) == 1  # Ray did report it: the check could have found it
    assert bool(handler.found) is own
    ours = [r.getMessage() for r in caplog.records if OWN_DEPRECATION in r.getMessage()]
    if own:
        (site,) = {s for _, s in handler.found}
        assert site.startswith("fake_caller.py:")  # rlperf's line that called the API
        assert len(ours) == 1 and "fake_caller.py" in ours[0]
    else:
        assert ours == []
