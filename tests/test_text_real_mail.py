"""The compiled text path the prequential stream takes (score then learn, one message at a time:
model/lexicon.py's tokenizer, n-grams and term ids) gives exactly the features of the Python tokenizer,
``Counter(Tokenizer(ngrams=n).tokens(text))``, on real mail from the shared datasets (ASCII and
non-ASCII messages; the hypothesis-generated texts are in tests/test_text.py)."""
from __future__ import annotations

from collections import Counter

import pytest

from sgm.model import MNB
from sgm.model.text import Tokenizer
from sgm.stream.datasets import load_jsonl


@pytest.mark.parametrize("name, ngrams", [("spamassassin", 2), ("enron-spam", 2), ("sms-spam", 1)])
def test_prequential_text_path_sees_the_python_tokenizers_features_on_real_mail(data_dir, name, ngrams):
    docs = [d for d in load_jsonl(data_dir / f"{name}.jsonl.gz", limit=400) if d.labels]
    tokenizer = Tokenizer(ngrams=ngrams)
    model = MNB("uc_jm_dp_ps", tokenizer=tokenizer)
    seen_non_ascii = 0
    for doc in docs:
        expected = Counter(tokenizer.tokens(doc.text))
        if len(model):  # scoring reads the known terms of the same pass learning then reuses
            model.predict_proba_one(doc.text)
        model.learn_one(doc.text, doc.labels, id=doc.id)
        record = model.state.docs[doc.id]
        names = model.state.terms.names  # (new terms' names are built when asked for: read after learning)
        learned = {names[t]: c for t, c in zip(record.terms.tolist(), record.raw.tolist())}
        assert learned == expected, doc.id
        seen_non_ascii += not doc.text.isascii()
    assert len(docs) >= 300
    assert seen_non_ascii > 0 or name != "spamassassin"  # its first messages include non-ASCII text
