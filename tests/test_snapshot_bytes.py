"""A snapshot's bytes are a function of the model alone: the same state written at two times gives the same file.

Before, every archive entry carried the wall-clock time it was written (ZIP's modification date), so two
replicas holding one state, or one state written twice, gave different files.
"""
from __future__ import annotations

import io
import time
import zipfile

import pytest

from sgm.model import build_model

CONFIGS = {
    "mnb": {"model": "uc_pd_jm_dp", "params": {"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2}},
    "tdm": {"model": "tdm_uc_jm_dp_kpd_kdp", "params": {}},
    "ensemble": {"model": "ensemble", "bases": [{"model": "u_jm"}, {"model": "uc_pd_jm_dp"}]},
}


def _learned(config):
    model = build_model(config)
    model.learn_one("cheap pills buy now", ["spam"], ts=1.0e9, id="a")
    model.learn_one("meeting on monday", ["ham"], ts=1.0e9 + 5, id="b")
    return model


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_one_state_written_at_two_times_gives_the_same_bytes(kind):
    first = _learned(CONFIGS[kind]).to_bytes()
    time.sleep(2.1)  # ZIP dates have a resolution of 2 s
    again = _learned(CONFIGS[kind]).to_bytes()
    assert first == again
    dates = {member.date_time for member in zipfile.ZipFile(io.BytesIO(again)).infolist()}
    assert dates == {(1980, 1, 1, 0, 0, 0)}
