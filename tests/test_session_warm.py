"""tests/conftest.py's session warm: ``sgm warm``'s kernel list compiled once before the xdist workers start,
and only where tests will run (not in a worker, nor in a run that lists or plans tests without executing them)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from sgm.consumers.commands.warm import default_configurations
from sgm.consumers.service import kernels
from sgm.consumers.service.kernels import KernelsReady
from tests.conftest import pytest_sessionstart

#: pytest's option names (dest) of the runs that list or plan tests: --collect-only, --fixtures,
#: --fixtures-per-test, --setup-plan
LISTING = ["collectonly", "showfixtures", "show_fixtures_per_test", "setupplan"]


def session(worker: bool = False, **options: bool) -> SimpleNamespace:
    option = SimpleNamespace(**{**dict.fromkeys(LISTING, False), **options})
    config = SimpleNamespace(option=option, pluginmanager=SimpleNamespace(get_plugin=lambda name: None))
    if worker:
        config.workerinput = {"workerid": "gw0"}
    return SimpleNamespace(config=config)


@pytest.fixture
def warmed(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(kernels, "prepare_kernels", lambda config: calls.append(config) or KernelsReady(0.0, 0))
    return calls


def test_a_run_that_executes_tests_warms_sgm_warms_list(warmed):
    pytest_sessionstart(session())
    assert warmed == [config for _, config in default_configurations()]


def test_a_worker_does_not_warm(warmed):
    pytest_sessionstart(session(worker=True))
    assert warmed == []


@pytest.mark.parametrize("option", LISTING)
def test_a_run_that_executes_nothing_does_not_warm(warmed, option):
    pytest_sessionstart(session(**{option: True}))
    assert warmed == []


def test_a_failing_warm_is_one_line_and_the_session_goes_on(monkeypatch):
    """A kernel that does not compile is reported by the tests that use it, not as pytest's INTERNALERROR."""
    lines: list = []

    def fail(config):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(kernels, "prepare_kernels", fail)
    started = session()
    started.config.pluginmanager = SimpleNamespace(get_plugin=lambda name: SimpleNamespace(write_line=lines.append))
    pytest_sessionstart(started)
    assert lines == ["warming the numba kernels failed (RuntimeError: no compiler); the tests compile them on first use"]
