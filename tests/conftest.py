"""Shared pytest configuration.

Exit code 5 ("no tests collected") is treated as success so that a filtered run
(``-k`` or ``-m`` selecting nothing) does not fail CI.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
pytest_plugins = ["tests.kafka_fixtures"]

# A run started where SIGINT is ignored (a background job of a non-interactive shell: `pytest ... &`, nohup) passes
# that to every process it starts, and a Python program started with SIGINT ignored keeps it ignored: the tests
# that send Ctrl-C (SIGINT) to `sgm demo` or `sgm broker` then saw it finish or hang instead. Handling SIGINT here
# (Python's default handler) gives the processes the tests start SIGINT's default disposition, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: The shared public datasets (JSON Lines). Tests that read them skip cleanly where absent.
DATA_DIR = Path(os.environ.get("SGM_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``long`` tests (minutes each: the 60 s broker outage, 200,000 learn/forget cycles) run only with
    SGM_LONG_TESTS=1; the default run has their reduced forms, and ``-ra`` lists what was left out."""
    if os.environ.get("SGM_LONG_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="long variant: run with SGM_LONG_TESTS=1 (its reduced form runs by default)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


#: pytest options (dest names) of runs that execute no test: they list or plan them (--collect-only, --fixtures,
#: --fixtures-per-test, --setup-plan), so there is nothing to warm.
EXECUTES_NOTHING = ("collectonly", "showfixtures", "show_fixtures_per_test", "setupplan")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the model's kernels into numba's cache once, before pytest-xdist starts its workers.

    On a fresh checkout (CI) every worker otherwise compiled the same kernels at once on 2 cores, inside
    tests' timed waits (a CI run failed "timed out after 30 s waiting for 17 documents scored"). This is
    ``sgm warm``'s list: ~40 s on an empty cache, ~1 s on a warm one. Tests of cold starts use their own
    empty ``NUMBA_CACHE_DIR``.
    """
    option = session.config.option
    if hasattr(session.config, "workerinput") or any(getattr(option, name, False) for name in EXECUTES_NOTHING):
        return  # a worker (the controller warmed) or a run that executes nothing
    from sgm.consumers.commands.warm import default_configurations
    from sgm.consumers.service.kernels import prepare_kernels

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    try:
        ready = [prepare_kernels(model_config) for _, model_config in default_configurations()]
    except Exception as exc:  # noqa: BLE001 - the tests that use the failing kernel report it, test by test
        if reporter is not None:
            reporter.write_line(f"warming the numba kernels failed ({type(exc).__name__}: {exc}); "
                                "the tests compile them on first use")
        return
    compiled = sum(r.compiled for r in ready)
    if compiled and reporter is not None:  # a warm cache says nothing
        reporter.write_line(f"compiled {compiled} numba kernels in {sum(r.seconds for r in ready):.1f} s "
                            f"(once per checkout: numba caches them)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared datasets not found at {DATA_DIR} (set SGM_DATA_DIR)")
    return DATA_DIR
