"""One token pass per tokenizer in a pool (model.ensemble.Ensemble._share_token_pass): a base hands the pass of a
text it just scored to a later base with the same tokenizer when their vocabularies are in lockstep
(model.interner.Interner.lineage), and that base scores and learns from it as from its own.

Checked here, over random streams of texts with ids (learn, re-learn, forget, decay, documents one base
learns alone, which make the vocabularies part, snapshots): every posterior and every base's state (its
checksum) are bit for bit those of the same pool with every base tokenizing for itself; the pass is shared
in lockstep and refused out of it (a base that learned a document the other did not: its ids differ, so the
other's pass would be wrong; the tests fail if the lineage check is left out).
"""
from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import MNB, TDM, Ensemble
from sgm.model.interner import Interner
from sgm.model.lexicon import TermLexicon
from sgm.model.text import Tokenizer

WORDS = ["cheap", "pills", "Now", "monday", "lunch", "team", "offer", "notes", "don't", "café"]
texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
labels = st.sampled_from([["spam"], ["ham"]])
IDS = ["d1", "d2", "d3", "d4", "d5"]
ops = st.one_of(
    st.tuples(st.just("learn"), texts, labels, st.floats(0.0, 60.0), st.sampled_from(IDS)),
    st.tuples(st.just("forget"), st.sampled_from(IDS)),
    st.tuples(st.just("score"), texts),
    st.tuples(st.just("restore")),
    # a document one base learns alone (ids the pool never learns or forgets): the vocabularies part
    st.tuples(st.just("one base"), st.sampled_from([0, 1]), texts, labels, st.sampled_from(["solo1", "solo2"])),
)


@contextlib.contextmanager
def counting_shares():
    """``[refused, given]`` counts of :meth:`TermLexicon.share_pass` inside."""
    original = TermLexicon.share_pass
    counts = [0, 0]

    def counted(self, *args):
        given = original(self, *args)
        counts[given] += 1
        return given

    TermLexicon.share_pass = counted
    try:
        yield counts
    finally:
        TermLexicon.share_pass = original


def alone(ensemble: Ensemble) -> Ensemble:
    """``ensemble`` with every base tokenizing for itself (the reference)."""
    ensemble._share_token_pass = lambda text, j: None
    return ensemble


@st.composite
def pools(draw):
    """An MNB and a TDM base with one tokenizer (words or bigrams, counts or presence), decay or none. (Bases
    pruned apart can lose a class one keeps, which a pool does not map: their vocabularies part here by
    documents one base learns alone.)"""
    tokenizer = Tokenizer(ngrams=draw(st.sampled_from([1, 2])), binary=draw(st.booleans()))
    half_life = draw(st.one_of(st.none(), st.floats(3.01, 50.0)))
    config = (tokenizer, half_life, draw(st.booleans()))

    def build() -> Ensemble:
        bases = [MNB("uc_pd_jm_dp_ps", beta=0.5, delta=0.3, mu=5.0, theta=1.0, ups=0.5, tokenizer=tokenizer,
                     half_life=half_life),
                 TDM("tdm_uc_jm_dp_kpd_kdp", beta=0.6, kdelta=1.0 if config[2] else 0.5, kmu=10.0, mu=3.0, ups=0.5,
                     tokenizer=tokenizer, half_life=half_life)]
        return Ensemble(bases, [[0.6, 0.1, 0.2, 0.1, 0.3, 0.0, 0.2], [0.5, 0.0, 0.1, 0.2, 0.1, 0.3, 0.1]],
                        {"spam": 0.2}, meta=True)
    return build


def run(ensemble: Ensemble, op_list, queries, shared: bool) -> tuple[list, list]:
    # both classes in both bases throughout (ids no op forgets): the bases keep one class list, as a pool's do
    ensemble.learn_one("cheap pills now", ["spam"], ts=0.0, id="s0")
    ensemble.learn_one("monday team lunch", ["ham"], ts=0.0, id="h0")
    rows = []
    for op in op_list:
        kind = op[0]
        if kind == "learn":
            ensemble.learn_one(op[1], op[2], ts=op[3], id=op[4])
        elif kind == "forget":
            ensemble.forget(op[1])
        elif kind == "one base":
            ensemble.bases[op[1]].learn_one(op[2], op[3], ts=30.0, id=op[4])
        elif kind == "restore":
            ensemble = Ensemble.from_bytes(ensemble.to_bytes())
            if not shared:
                alone(ensemble)
        elif len(ensemble):
            classes, log_post = ensemble.predict_log_proba_many([op[1]])
            rows.append((classes, log_post.view(np.int64).tolist()))
    for query in queries:
        if len(ensemble):
            classes, log_post = ensemble.predict_log_proba_many([query])
            rows.append((classes, log_post.view(np.int64).tolist()))
            ensemble.learn_one(query, ["spam"], ts=60.0, id="q")  # learned after its pass was shared
    return rows, [base.checksum() for base in ensemble.bases]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.lists(ops, min_size=1, max_size=30), st.lists(texts, min_size=1, max_size=4))
def test_shared_pass_scores_and_learns_as_each_base_alone(build, op_list, queries):
    shared = run(build(), op_list, queries, shared=True)
    reference = run(alone(build()), op_list, queries, shared=False)
    assert shared == reference


def test_the_pass_is_shared_in_lockstep_and_refused_out_of_it():
    stream = [("cheap pills now", ["spam"]), ("monday lunch with the team", ["ham"]), ("cheap offer now", ["spam"]),
              ("team notes for monday", ["ham"])]
    results = []
    for share in (True, False):
        with counting_shares() as counts:
            ensemble = Ensemble([MNB("uc_pd_jm_dp_ps", tokenizer=Tokenizer(ngrams=2)),
                                 TDM("tdm_uc_jm_dp_kpd_kdp", kdelta=1.0, tokenizer=Tokenizer(ngrams=2))], [0.5, 0.5])
            if not share:
                alone(ensemble)
            rows = []
            for k, (text, label) in enumerate(stream):
                if len(ensemble):
                    rows.append(ensemble.predict_log_proba_many([text])[1].view(np.int64).tolist())
                ensemble.learn_one(text, label, id=f"m{k}")
            assert ensemble.bases[0].state.terms.lineage == ensemble.bases[1].state.terms.lineage
            # the second base learns a document the first did not: its ids part from the first's
            ensemble.bases[1].learn_one("unseen words only here", ["ham"], id="extra")
            assert ensemble.bases[0].state.terms.lineage != ensemble.bases[1].state.terms.lineage
            for text in ("cheap pills monday", "only here now", "unseen team words"):
                rows.append(ensemble.predict_log_proba_many([text])[1].view(np.int64).tolist())
                ensemble.learn_one(text, ["spam"], id=text)
            results.append((rows, [base.checksum() for base in ensemble.bases]))
            if share:  # shared for the 3 texts scored after the first learn (the TDM's lexicon built), not after
                assert counts == [3, 3]
            else:
                assert counts == [0, 0]
    assert results[0] == results[1]


def test_lineage_follows_the_changes_not_the_way_they_came():
    """Equal histories (the same additions and removals, call by call) give equal lineages, whether the names
    came as strings or bytes; a different name, order or removal gives another (and so may the same names added
    in other calls: that only refuses a share); an interner not followed has none, one followed after it held
    names (a restored pool's) starts from a digest of what it holds."""
    a, b, c, single, d, e = (Interner() for _ in range(6))
    for interner in (a, b, c, single, d, e):
        interner.follow_lineage()
    a.add_new(["spam", "eggs"])
    blob = np.frombuffer(b"spameggs", dtype=np.uint8)
    b.add_new_encoded(blob, np.array([[0, 4], [4, 4]]))
    assert a.lineage == b.lineage
    c.add("spam"), c.add("eggs")
    single.add_new(["spam"]), single.add_new_encoded(blob[4:], np.array([[0, 4]]))
    assert c.lineage == single.lineage
    d.add_new(["eggs", "spam"])
    assert d.lineage != a.lineage
    e.add_new_encoded(blob, np.array([[0, 3], [3, 5]]))  # "spa", "meggs": the same bytes, other names
    assert e.lineage != a.lineage
    a.remove(0), a.remove(1)
    b.remove(1), b.remove(0)  # the same names left, but ids freed in another order: the next ids differ
    assert a.lineage != b.lineage and a.add("ham") != b.add("ham")
    alone = Interner()
    alone.add("spam")  # a model alone: not followed
    assert alone.lineage is None
    # followed from what it holds (a restored pool): equal contents, equal lineages; then as any other
    restored, again, other = Interner(["spam", None, "eggs"], [1]), Interner(["spam", None, "eggs"], [1]), \
        Interner(["spam", "eggs"])
    for interner in (restored, again, other, alone):
        interner.follow_lineage()
    assert restored.lineage == again.lineage != other.lineage
    assert alone.lineage not in (None, restored.lineage, a.lineage)
    restored.add("ham"), again.add_new(["ham"])
    assert restored.lineage == again.lineage and restored.ids["ham"] == again.ids["ham"] == 1


def test_a_restored_pool_shares_again_and_a_model_alone_traces_nothing():
    ensemble = Ensemble([MNB("uc_pd_jm_dp_ps", tokenizer=Tokenizer(ngrams=2)),
                         TDM("tdm_uc_jm_dp_kpd_kdp", kdelta=1.0, tokenizer=Tokenizer(ngrams=2))], [0.5, 0.5])
    ensemble.learn_one("cheap pills now", ["spam"], id="a")
    ensemble.learn_one("monday team lunch", ["ham"], id="b")
    restored = Ensemble.from_bytes(ensemble.to_bytes())
    assert restored.bases[0].state.terms.lineage == restored.bases[1].state.terms.lineage is not None
    with counting_shares() as counts:
        restored.learn_one("cheap lunch", ["spam"], id="c")  # (the lexicons are built by the first learn)
        restored.predict_log_proba_many(["cheap team now"])
    assert counts == [0, 1]
    alone = MNB("uc_pd_jm_dp_ps")
    alone.learn_one("cheap pills now", ["spam"], id="a")
    assert alone.state.terms.lineage is None
