"""A modest accuracy floor for TDM on a real dataset (skipped where the shared data is absent)."""
from __future__ import annotations

import numpy as np

from sgm.model import TDM
from sgm.stream.datasets import load_jsonl, split


def test_tdm_defaults_classify_r8(data_dir):
    """The thesis's best TDM with its defaults, no tuning: r8 test accuracy (bench: 0.9616; MNB u_jm 0.9603)."""
    train, test, _ = split(load_jsonl(data_dir / "r8.jsonl.gz"))
    model = TDM("tdm_uc_jm_dp_kpd_kdp")
    model.learn_many([d.text for d in train], [d.labels for d in train], ids=[d.id for d in train])
    predicted = model.predict_many([d.text for d in test])
    accuracy = float(np.mean([p == d.labels[0] for p, d in zip(predicted, test)]))
    assert accuracy >= 0.955
