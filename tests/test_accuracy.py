"""Issue 2's accuracy claim, pinned: a thesis variant beats scikit-learn MultinomialNB on r8 and r52.

The parameters are what ``sgm tune`` chose on development data carved from
each training split (docs/RESULTS.md, ``python -m bench.results``); the test
data never chose them. The reference figures are scikit-learn 1.9.1
MultinomialNB with the best of alpha in {1, 0.1, 0.01} on raw counts, chosen
on the test set itself (optimistic for the peer): r8 0.9603, r52 0.9065.
"""
from __future__ import annotations

import numpy as np
import pytest

from sgm.model import MNB
from sgm.stream.datasets import load_jsonl, split

SKLEARN_MNB_BEST_ALPHA = {"r8": 0.9603, "r52": 0.9065}
TUNED = {  # uc_pd_jm_dp_ps, tuned on dev by `sgm tune --iters 20 --points 20`
    "r8": {"beta": 0.01, "delta": 0.01, "mu": 522.412, "theta": 2.0, "ups": 0.990007},
    "r52": {"beta": 0.01, "delta": 0.211277, "mu": 0.217108, "theta": 2.0, "ups": 0.909619},
}


@pytest.mark.parametrize("dataset", ["r8", "r52"])
def test_tuned_thesis_variant_beats_sklearn_multinomial_nb(data_dir, dataset):
    path = data_dir / f"{dataset}.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} not found")
    parts = split(load_jsonl(path))
    model = MNB("uc_pd_jm_dp_ps", **TUNED[dataset])
    model.learn_many([d.text for d in parts.train], [d.labels for d in parts.train], ids=[d.id for d in parts.train])
    predicted = model.predict_many([d.text for d in parts.test])
    accuracy = float(np.mean([p in d.labels for p, d in zip(predicted, parts.test)]))
    assert accuracy > SKLEARN_MNB_BEST_ALPHA[dataset], accuracy
