"""Shared pytest configuration.

Exit code 5 ("no tests collected") is treated as success so that a filtered run
(``-k`` or ``-m`` selecting nothing) does not fail CI.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
pytest_plugins = ["tests.kafka_fixtures"]

#: The shared public datasets (JSON Lines). Tests that read them skip cleanly where absent.
DATA_DIR = Path(os.environ.get("SGM_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared datasets not found at {DATA_DIR} (set SGM_DATA_DIR)")
    return DATA_DIR
