"""Whole messages vs their text twin on the SpamAssassin stream, prequential, one run.

    python -m bench.mail_stream                    # --preset spam through sgm eval's harness, VW beside it
    python -m bench.mail_stream --mode decision    # dev: the preset's prior weight, spam threshold, learn guards
    python -m bench.mail_stream --mode compare     # the mail configurations vs the text twins (own loop)
    python -m bench.mail_stream --mode ablation    # dev: the default without each feature group
    python -m bench.mail_stream --mode search --ngrams 3 --iters 8 --points 12   # dev search (--system text: twin)

``--mode eval`` (the default; docs/RESULTS.md "Whole emails" is its table) runs
``sgm eval``'s own prequential harness (``evaluate_prequential``: the model
reads each ``Message`` itself, the preset's decision decides) on the preset,
the text twins through the same harness, and Vowpal Wabbit online logistic
regression fed (a) the preset's extracted features of every message (the same
term -> count mappings, names percent-encoded for VW's format) and (b) word
unigrams + bigrams of the text twin; VW's learning rate is chosen on the dev
stream by 1-ROCA% (the measure the mail default was chosen by), its scores are
its raw margins (log-odds, no saturation). Results of 2026-11-27 (3 min)::

    system                                    slice  1-ROCA%  FP%    FN%    FN%@FP<=.1%  FN%@FP<=1%
    sgm --preset spam (mail)                  whole  0.286    0.60   6.86   52.30         4.33
                                              after  0.316    0.46  12.54   58.57         1.96
                                              dev    0.395    1.65   2.05  100.00         9.55
    VW logistic, the preset's features, l=2   whole  0.467    1.81   2.37   84.01         5.86
                                              after  0.205    0.57   4.83   21.63         2.99
                                              dev    2.589   11.16   0.29   98.64        83.24
    sgm text twin, RESULTS.md                 whole  0.671    0.87   2.69   84.54         2.22
    sgm text twin + trigrams, dev 1-ROCA      whole  0.519    1.35   2.69   54.83         4.75
    VW logistic + bigrams, text twin, l=8     whole  0.821    3.21   1.69   97.57        12.40

(The preset's FP% / FN% are those of its decision since r20, from the ``--mode decision`` run below,
the same harness; with the threshold 0.99683 on the model's own posterior they were whole 0.63 / 8.55,
after 0.41 / 17.26, dev 2.27 / 1.17. The ranking columns do not depend on the decision.)

``--mode decision``: the preset's model over the stream once, then every
(prior weight, threshold, min_spam, min_ham) of a grid scored on the dev part by
``FP_COST x FP + FN`` (``consumers/presets.py``: 9), ties to smaller guards, then
the prior weight nearest the model's theta, then the threshold nearest 0.5. The
prior weight ``w`` (``SpamDecision.prior_weight``; 0..2 in steps of 0.1, theta
= 2 being the model's own posterior) counts the class prior ``w`` times instead
of theta in the posterior the threshold reads; thresholds on that posterior at
log-odds -5..30 in steps of 0.25; guards 0, 1, 2, 5, 10, 20, 50, 100, 200. The
chosen rule and the one before it are then run through ``sgm eval``'s harness
(the service's decision code). Results of 2026-11-26 (r20; ~3 min)::

    rule (best threshold and guards per prior weight on dev)   dev cost (FP, FN)   after dev cost (FP, FN)
    model's posterior (w = theta = 2), p >= 0.99683              111 (11, 12)        285 (15, 150)
    w = 0    (no prior),  p >= 0.777                             209 (15, 74)        322 (31,  43)
    w = 0.5,              p >= 0.9627                            119 ( 6, 65)        280 (22,  82)
    w = 0.8,              p >= 0.982                              97 ( 7, 34)        254 (17, 101)
    w = 1.0 (Bayes),      p >= 0.9859                             94 ( 8, 22)        255 (17, 102)
    w = 1.1,              p >= 0.989     chosen                   93 ( 8, 21)        262 (17, 109)
    w = 1.2,              p >= 0.99142                            98 ( 9, 17)        259 (16, 115)
    w = 1.5,              p >= 0.99593                           101 ( 9, 20)        284 (16, 140)
    w = 1.9,              p >= 0.99883                           108 ( 9, 27)        282 (12, 174)
    arg-max                                                      468 (52,  0)        328 (34,  22)

Chosen: w = 1.1, p >= 0.989, no guards (every guard that would stop the early
false positives also withholds the 640 spams that open the stream). After dev
(never used for a choice) it costs 262 instead of 285: FN 17.26% -> 12.54%,
FP 0.41% -> 0.46%; whole stream FP 0.60%, FN 6.86%. A modest gain: the best
fixed threshold on the model's posterior chosen in hindsight on the after-dev
part costs 240 there. The reason the old rule drifted: theta = 2 makes the
posterior follow the spam/ham balance of the learned messages twice, and the
dev part is 68% spam, the rest 19%. docs/RESULTS.md ("Whole emails") lists the
other scores measured and not chosen (prior-free log-odds, length-normalised
log-odds, log-odds over a function of the document count, a threshold re-chosen
online on a sliding window): only the window came level on dev (92 against 93),
and it is worse after dev (273).

Data: ``spamassassin-raw.jsonl.gz`` (6,045 messages as original bytes, ``raw_b64``)
and its twin ``spamassassin.jsonl.gz`` (the same ids, labels and order; Subject
plus decoded text as ``text``), found through ``$SGM_DATA_DIR`` or
``<repo>/../shared/data``; the script says so and exits 0 when they are absent.

Protocol, as docs/RESULTS.md does it for spamassassin: the stream in ``ts``
order (stable); test-then-train one document at a time (score, then
``learn_one`` with the label at once); the first document is learned unscored.
Development data = the first 25% of the stream (1,511 messages). Every choice
(model, parameters, feature options) is made there only; one run over the
whole stream then reports three slices of the same outcomes: ``dev`` (equal to
a run on the dev stream alone), ``after dev`` (the 4,534 later messages, never
used for a choice: the held-out part) and ``whole stream`` (what docs/RESULTS.md
reports).

Printed per system: accuracy (p(spam) >= 0.5), 1-ROCA% = ``100 (1 - ROC AUC)``
(the TREC spam track's measure, ``sgm.consumers.evaluation.measures``) ranked by
the spam log-odds ``log p(spam) - log p(ham)`` and, as docs/RESULTS.md computed
it, by p(spam) (probabilities saturate at 1.0 and tie), FP rate (ham called
spam) and FN rate (spam missed) at 0.5, and the FN rate at the best threshold
whose FP rate is at most 0.1% and 1%.

Results of ``--mode compare`` (the first step; 2-core VM shared with other jobs, Python 3.11,
2026-11-26; mail extraction 1.6-2.3 ms/message over 3 runs, the same numbers in each; FP%/FN% at
p(spam) >= 0.5)::

    system                                  slice   acc     1-ROCA%  (p)    FP%@.5  FN%@.5  FN%@FP<=.1%  FN%@FP<=1%
    mail, dev 1-ROCA choice (default)       dev     0.9656  0.395   0.390   10.74   0.00    100.00        9.55
                                            after   0.9876  0.316   0.318    0.93   2.53     58.57        1.96
                                            whole   0.9821  0.286   0.288    2.07   1.16     52.30        4.33
    mail, dev accuracy choice               dev     0.9848  0.927   0.734    4.55   0.10    100.00       64.91
                                            after   0.9879  0.605   0.701    0.76   3.11     28.77        2.30
                                            whole   0.9871  0.446   0.500    1.21   1.48     60.79        1.69
    text twin, RESULTS.md (dev accuracy)    dev     0.9848  1.005   0.816    2.69   0.97    100.00       70.76
                                            after   0.9859  0.939   0.958    0.63   4.72     54.89        2.99
                                            whole   0.9856  0.671   0.662    0.87   2.69     84.54        2.22
    text twin, dev 1-ROCA search            dev     0.9735  0.579   0.576    5.37   1.36    100.00        8.09
                                            after   0.9850  0.922   0.923    0.63   5.18     59.26        3.11
                                            whole   0.9821  0.652   0.653    1.18   3.11     66.54        3.85
    text twin + trigrams, dev 1-ROCA search dev     0.9722  0.528   0.525    7.02   0.78    100.00       10.14
                                            after   0.9857  0.775   0.775    0.60   4.95     48.45        3.22
                                            whole   0.9823  0.519   0.518    1.35   2.69     54.83        4.75

The issue's target, 1-ROCA% <= 0.33% over the stream (half the twin's 0.662%),
is reached by the dev-chosen default: 0.286% (0.288% from probabilities); on
the held-out part 0.316% against the twin's 0.939% (a third). Its price is the
cold start: with theta = 2 the prior of a stream that opens with ~640 spams and
8 hams calls early ham spam (dev FP 10.7% at 0.5), which also makes its
whole-stream FN at FP <= 1% (4.33%) worse than the twin's (2.22%); after dev it
is better (1.96% vs 2.99%). The accuracy-chosen configuration has the best
accuracy (0.9871) and whole-stream FN at FP <= 1% (1.69%) but 1-ROCA 0.446%.
A decision threshold (or theta) set for an FP target is work for the service
integration.

How the default was chosen (dev stream only; 1-ROCA% by log-odds as the
objective, ``sgm.consumers.evaluation.search.gaussian_random_search`` over the
model's parameters in the ``model.spec.PARAMS`` tuning ranges and meta_weight
in [0.05, 5], later [0.05, 20]):

1. all groups, bigrams, received_hops 2, from the spec defaults, 8x12 (97
   points): 1.151 -> 0.636 (beta 0.985, mu 8636, theta 2, ups 0, meta_weight 4.49);
2. the ablation at that point showed the words of mailing-list fields costing
   most (0.635 -> 0.427 without them; SpamAssassin's Bayes drops them too):
   they became presence-only (0.434); at that point trigrams 0.395, unigrams
   0.644; received_hops 0 / 1 / 4: 0.485 / 0.444 / 0.439 (2: 0.434);
   meta_weight 1 / 2 / 8: 0.734 / 0.589 / 0.617;
3. trigrams from the spec defaults, 8x12: 1.100 -> 0.475; from point 1 with
   meta_weight up to 20, 12x16 (193 points): nothing better than the start,
   0.395: the default;
4. ablation at the default (``--mode ablation``, dev 1-ROCA%; every group kept,
   none of the removals improved it): all 0.395; without body 1.133, html
   0.455, urls 0.436, received 0.425, headers 0.419, addresses 0.415, subject
   0.400, mime 0.397, flags 0.396, attachments 0.395; body words alone 0.843.
   Paid most: body words, then html markup, URLs, the Received chain, headers
   and addresses; mime, flags and attachments are neutral on this stream
   (few attachments, few malformed messages).

The accuracy choice: the same features, 8x12 from the spec defaults with
accuracy as the objective (0.9748 -> 0.9848). The text twins: 12x16 searches
for 1-ROCA% from the RESULTS.md point (bigrams: 1.005 -> 0.579) and from that
result with trigrams (0.539 -> 0.528): the twin gets the same search for the
same measure, so the gap is not a tuning artefact.
"""
from __future__ import annotations

import argparse
import base64
import gzip
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from sgm.consumers.decision import SpamDecision
from sgm.consumers.evaluation.documents import ReadDocuments
from sgm.consumers.evaluation.harness import (EvalSetup, Outcomes, evaluate_prequential, labelled, load_examples,
                                              measures as harness_measures, stream_order)
from sgm.consumers.evaluation.measures import one_minus_roca_pct, roc_auc, roc_curve
from sgm.consumers.evaluation.search import Dimension, dimensions_for, gaussian_random_search
from sgm.consumers.presets import FP_COST, preset
from sgm.model.factory import build_model
from sgm.model.mail import GROUPS, MAIL_CONFIG, MailFeatures, MailOptions
from sgm.model.text import Tokenizer

RAW_FILE, TEXT_FILE = "spamassassin-raw.jsonl.gz", "spamassassin.jsonl.gz"
DEV_FRACTION = 0.25
POSITIVE = "spam"

#: The text twin's best configuration (docs/RESULTS.md: `sgm tune` on the same dev stream).
TEXT_TWIN = {"model": "uc_jm_dp_ps", "params": {"beta": 0.651882, "mu": 128.702, "theta": 0.494594, "ups": 0.0},
             "tokenizer": {"ngrams": 2}}

#: The mail configuration chosen on the dev stream for the issue's measure, 1-ROCA% (module notes).
MAIL_DEFAULT: dict[str, Any] = {**MAIL_CONFIG, "mail": MailOptions.from_dict(MAIL_CONFIG["mail"]).to_dict()}

#: The same features and search with accuracy as the dev objective (as docs/RESULTS.md chose the twin).
MAIL_BY_ACCURACY: dict[str, Any] = {
    "model": "uc_jm_dp_ps",
    "params": {"beta": 0.753033, "mu": 0.1, "theta": 0.0, "ups": 0.0},
    "mail": MailOptions(ngrams=3, meta_weight=0.378489, received_hops=2).to_dict(),
}

#: The text twin searched on the dev stream for 1-ROCA% like the mail default (same search, same budget).
TEXT_TWIN_BY_ROC = {"model": "uc_jm_dp_ps", "params": {"beta": 0.967038, "mu": 10000.0, "theta": 0.888055, "ups": 0.0},
                    "tokenizer": {"ngrams": 2}}

#: The same search for the text twin with word trigrams, the mail default's n-gram order.
TEXT_TRIGRAMS_BY_ROC = {"model": "uc_jm_dp_ps",
                        "params": {"beta": 0.985019, "mu": 10000.0, "theta": 0.714984, "ups": 0.0},
                        "tokenizer": {"ngrams": 3}}

#: What the default run compares, in this order.
SYSTEMS: list[tuple[str, dict[str, Any]]] = [
    ("mail, dev 1-ROCA choice (default)", MAIL_DEFAULT),
    ("mail, dev accuracy choice", MAIL_BY_ACCURACY),
    ("text twin, RESULTS.md (dev accuracy)", TEXT_TWIN),
    ("text twin, dev 1-ROCA search", TEXT_TWIN_BY_ROC),
    ("text twin + trigrams, dev 1-ROCA search", TEXT_TRIGRAMS_BY_ROC),
]


@dataclass
class Doc:
    id: str
    labels: tuple[str, ...]
    ts: float | None
    payload: str  # raw_b64 or text


# ---------------------------------------------------------------- data
def data_folder() -> Path | None:
    configured = os.environ.get("SGM_DATA_DIR")
    folder = Path(configured) if configured else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return folder if (folder / RAW_FILE).is_file() and (folder / TEXT_FILE).is_file() else None


def _ts(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def load_stream(path: Path, field: str) -> list[Doc]:
    """Labelled records of ``path`` in ``ts`` order (stable, undated last)."""
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record.get("labels"):
                docs.append(Doc(record["id"], tuple(record["labels"]), _ts(record.get("ts")), record[field]))
    return sorted(docs, key=lambda d: (d.ts is None, d.ts or 0.0))


def mail_documents(docs: Sequence[Doc], options: MailOptions) -> list[dict[str, float]]:
    extract = MailFeatures(options)
    return [extract(base64.b64decode(d.payload)) for d in docs]


def text_documents(docs: Sequence[Doc], ngrams: int) -> list[dict[str, int]]:
    tokenizer = Tokenizer(ngrams=ngrams)
    return [tokenizer(d.payload) for d in docs]


def scaled(documents: Sequence[dict[str, float]], meta_weight: float) -> list[dict[str, float]]:
    """Documents extracted with ``meta_weight`` 1 as they would be with another weight
    (every non-body term has a ``:``, no body word has one)."""
    if meta_weight == 1.0:
        return list(documents)
    return [{t: (c * meta_weight if ":" in t else c) for t, c in d.items()} for d in documents]


# ---------------------------------------------------------------- protocol
@dataclass
class Scored:
    """Per scored document: the truth, the spam probability and the spam log-odds."""

    is_spam: list[bool]
    p_spam: list[float]
    log_odds: list[float]
    seconds: float


def prequential(config: dict[str, Any], documents: Sequence[dict], docs: Sequence[Doc]) -> Scored:
    """Test-then-train, one document at a time, every label learned at once."""
    model = build_model({k: v for k, v in config.items() if k != "mail"})
    out = Scored([], [], [], 0.0)
    started = time.perf_counter()
    for document, doc in zip(documents, docs):
        if len(model):
            classes, log_post = model.predict_log_proba_many([document])
            row = dict(zip(classes, log_post[0].tolist()))
            spam, ham = row.get(POSITIVE, -math.inf), max((v for c, v in row.items() if c != POSITIVE), default=-math.inf)
            out.is_spam.append(POSITIVE in doc.labels)
            out.p_spam.append(math.exp(spam))
            out.log_odds.append(spam - ham)
        model.learn_one(document, doc.labels, ts=doc.ts, id=doc.id)
    out.seconds = time.perf_counter() - started
    return out


def measures(scored: Scored) -> dict[str, float]:
    """Accuracy, 1-ROCA%, FP/FN rates at p = 0.5, FN rate at FP rate <= 0.1% and <= 1% (rates in %).

    The ROC measures rank by the spam log-odds ``log p(spam) - log p(ham)``: probabilities
    saturate at 1.0 in floating point, which turns confident documents into ties (``one_minus_roca_p``
    is the same area from the probabilities, as docs/RESULTS.md computed it).
    """
    y = np.asarray(scored.is_spam, dtype=bool)
    p = np.asarray(scored.p_spam, dtype=np.float64)
    odds = np.nan_to_num(np.asarray(scored.log_odds, dtype=np.float64), nan=0.0, posinf=1e300, neginf=-1e300)
    said_spam = p >= 0.5
    hams, spams = max(int((~y).sum()), 1), max(int(y.sum()), 1)
    fpr, tpr = roc_curve(y, odds)
    out = {
        "docs": int(len(y)),
        "accuracy": float((said_spam == y).mean()),
        "one_minus_roca_pct": one_minus_roca_pct(roc_auc(y, odds)),
        "one_minus_roca_p": one_minus_roca_pct(roc_auc(y, p)),
        "fp_rate_pct": 100.0 * float((said_spam & ~y).sum()) / hams,
        "fn_rate_pct": 100.0 * float((~said_spam & y).sum()) / spams,
    }
    for target in (0.001, 0.01):
        best_tpr = float(tpr[fpr <= target + 1e-12].max())
        out[f"fn_at_fp_{target * 100:g}pct"] = 100.0 * (1.0 - best_tpr)
    return out


def run(config: dict[str, Any], documents: Sequence[dict], docs: Sequence[Doc]) -> dict[str, float]:
    scored = prequential(config, documents, docs)
    result = measures(scored)
    result["seconds"] = scored.seconds
    return result


def part(scored: Scored, start: int, stop: int | None = None) -> Scored:
    """The outcomes of scored documents ``start:stop`` (of one run: the model kept learning throughout)."""
    return Scored(scored.is_spam[start:stop], scored.p_spam[start:stop], scored.log_odds[start:stop], scored.seconds)


def dev_size(n: int) -> int:
    return max(2, round(n * DEV_FRACTION))


# ---------------------------------------------------------------- output
COLUMNS = [("docs", "docs", "{:.0f}"), ("accuracy", "accuracy", "{:.4f}"), ("one_minus_roca_pct", "1-ROCA%", "{:.3f}"),
           ("one_minus_roca_p", "1-ROCA% (p)", "{:.3f}"),
           ("fp_rate_pct", "FP%", "{:.2f}"), ("fn_rate_pct", "FN%", "{:.2f}"),
           ("fn_at_fp_0.1pct", "FN% @FP<=0.1%", "{:.2f}"), ("fn_at_fp_1pct", "FN% @FP<=1%", "{:.2f}"),
           ("not_ready", "no verdict", "{:.0f}"), ("seconds", "seconds", "{:.1f}")]


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    header = "| system | " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 1)]
    for name, result in rows:
        cells = [fmt.format(result[key]) if result.get(key) is not None else "-" for key, _, fmt in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe(config: dict[str, Any]) -> str:
    params = ", ".join(f"{k}={v:g}" for k, v in sorted(config["params"].items()))
    mail = config.get("mail")
    if mail:
        opts = MailOptions.from_dict(mail)
        groups = "all groups" if opts.groups == GROUPS else "+".join(opts.groups)
        return (f"{config['model']} ({params}); mail: ngrams={opts.ngrams}, meta_weight={opts.meta_weight:g}, "
                f"received_hops={opts.received_hops}, {groups}")
    return f"{config['model']} ({params}); text, ngrams={config.get('tokenizer', {}).get('ngrams', 1)}"


# ---------------------------------------------------------------- modes
def compare(folder: Path, systems: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, float]]]:
    """Every system on the dev stream and on the whole stream, in one process."""
    raw_docs, text_docs = load_stream(folder / RAW_FILE, "raw_b64"), load_stream(folder / TEXT_FILE, "text")
    if [d.id for d in raw_docs] != [d.id for d in text_docs]:
        raise SystemExit("the raw and text files do not hold the same stream (ids or order differ)")
    dev = dev_size(len(raw_docs))
    print(f"{len(raw_docs)} messages, dev = the first {dev}", flush=True)
    cache: dict[str, list[dict]] = {}
    rows = []
    for name, config in systems:
        if "mail" in config:
            options = MailOptions.from_dict(config["mail"])
            key = json.dumps({**options.to_dict(), "meta_weight": 1.0}, sort_keys=True)
            if key not in cache:
                started = time.perf_counter()
                cache[key] = mail_documents(raw_docs, MailOptions.from_dict({**options.to_dict(), "meta_weight": 1.0}))
                seconds = time.perf_counter() - started
                print(f"  mail extraction: {seconds:.1f} s ({1000 * seconds / len(raw_docs):.2f} ms/message)", flush=True)
            documents, docs = scaled(cache[key], options.meta_weight), raw_docs
        else:
            ngrams = config.get("tokenizer", {}).get("ngrams", 1)
            key = f"text-{ngrams}"
            if key not in cache:
                cache[key] = text_documents(text_docs, ngrams)
            documents, docs = cache[key], text_docs
        scored = prequential(config, documents, docs)
        # the first document is learned unscored: scored document i is stream document i + 1
        for label, piece in (("dev", part(scored, 0, dev - 1)), ("after dev", part(scored, dev - 1)),
                             ("whole stream", scored)):
            result = measures(piece)
            result["seconds"] = scored.seconds if label == "whole stream" else None
            rows.append((f"{name}, {label}", result))
        print(f"  {name}: {describe(config)}", flush=True)
    return rows


def ablation(folder: Path, mail_config: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    """Dev stream: the configuration, without each group, and body words alone (same model numbers)."""
    raw_docs = load_stream(folder / RAW_FILE, "raw_b64")
    docs = raw_docs[: dev_size(len(raw_docs))]
    base = MailOptions.from_dict(mail_config["mail"])
    variants = [("all of " + "+".join(base.groups), base)]
    variants += [(f"without {g}", MailOptions.from_dict({**base.to_dict(), "groups": [x for x in base.groups if x != g]}))
                 for g in base.groups]
    variants.append(("body words only", MailOptions.from_dict({**base.to_dict(), "groups": ["body"]})))
    rows = []
    for name, options in variants:
        rows.append((name, run(mail_config, mail_documents(docs, options), docs)))
        print(f"  {name}: 1-ROCA% {rows[-1][1]['one_minus_roca_pct']:.3f}, accuracy {rows[-1][1]['accuracy']:.4f}",
              flush=True)
    return rows


def search(folder: Path, system: str, spec: str, options: MailOptions, ngrams: int, iterations: int, points: int,
           objective: str, tune_meta_weight: bool, seed: int, start_params: dict[str, float] | None = None) -> dict[str, Any]:
    """Gaussian random search on the dev stream of the model's parameters (and, for mail, ``meta_weight``),
    from ``start_params`` (default: the documented defaults of ``model.spec.PARAMS``)."""
    if system == "mail":
        docs = load_stream(folder / RAW_FILE, "raw_b64")
        docs = docs[: dev_size(len(docs))]
        documents = mail_documents(docs, MailOptions.from_dict({**options.to_dict(), "meta_weight": 1.0}))
    else:
        docs = load_stream(folder / TEXT_FILE, "text")
        docs = docs[: dev_size(len(docs))]
        documents = text_documents(docs, ngrams)
    probe = build_model({"model": spec})
    names = sorted(probe.config()["params"])
    dims: list[Dimension] = dimensions_for(names)
    start = {n: float((start_params or probe.config()["params"])[n]) for n in names}
    tune_meta_weight = tune_meta_weight and system == "mail"
    if tune_meta_weight:
        dims.append(Dimension("meta_weight", 0.05, 20.0, log_scale=True))
        start["meta_weight"] = float(options.meta_weight)

    def evaluate(point: dict[str, float]) -> float:
        params = {k: v for k, v in point.items() if k != "meta_weight"}
        weight = point.get("meta_weight", options.meta_weight)
        chosen = scaled(documents, weight) if system == "mail" else documents
        result = measures(prequential({"model": spec, "params": params}, chosen, docs))
        return -result["one_minus_roca_pct"] if objective == "roc" else result["accuracy"]

    def progress(iteration: int, result) -> None:
        print(f"  iteration {iteration}: best {result.best_score:.4f} at {result.best_point}", flush=True)

    result = gaussian_random_search(evaluate, dims, start=start, iterations=iterations, points=points, seed=seed,
                                    on_iteration=progress)
    params = {k: v for k, v in result.best_point.items() if k != "meta_weight"}
    if system == "mail":
        weight = result.best_point.get("meta_weight", options.meta_weight)
        config = {"model": spec, "params": params,
                  "mail": MailOptions.from_dict({**options.to_dict(), "meta_weight": weight}).to_dict()}
    else:
        config = {"model": spec, "params": params, "tokenizer": {"ngrams": ngrams}}
    return {"config": config, "objective": objective, "dev_start": result.start_score,
            "dev_best": result.best_score, "evaluations": result.evaluations}


# ---------------------------------------------------------------- through sgm eval's harness
OUTCOME_FIELDS = ("true_sets", "predicted_sets", "p_true", "p_positive", "ts", "positive_odds", "verdicts")
SLICES = ("dev", "after dev", "whole stream")
VW_RATES = (0.1, 0.5, 2.0, 8.0)


def harness_streams(folder: Path) -> tuple[list, list]:
    """The raw and the text stream as ``sgm eval`` reads them (LabelledDoc, ts order)."""
    raw = stream_order(labelled(load_examples(folder / RAW_FILE)))
    text = stream_order(labelled(load_examples(folder / TEXT_FILE)))
    if [d.id for d in raw] != [d.id for d in text]:
        raise SystemExit("the raw and text files do not hold the same stream (ids or order differ)")
    return raw, text


def part_of(outcomes: Outcomes, start: int, stop: int | None) -> Outcomes:
    return Outcomes(**{name: getattr(outcomes, name)[start:stop] for name in OUTCOME_FIELDS})


def sliced(outcomes: Outcomes, dev: int, decision: SpamDecision | None) -> dict[str, dict[str, Any]]:
    """Harness measures on the dev part, the later part and the whole stream of one run (the first
    document is learned unscored: scored document ``i`` is stream document ``i + 1``)."""
    out = {}
    for name, (start, stop) in zip(SLICES, ((0, dev - 1), (dev - 1, None), (0, None))):
        part = part_of(outcomes, start, stop)
        result = harness_measures(part, POSITIVE, decision)
        truth = [POSITIVE in t for t in part.true_sets]
        result["one_minus_roca_p"] = one_minus_roca_pct(roc_auc(truth, part.p_positive))
        result["docs"] = len(part)
        for target, value in (result.pop("fn_at_fp_pct") or {}).items():
            result[f"fn_at_fp_{target}pct"] = value
        result["not_ready"] = (result.get("decision") or {}).get("not_ready")
        out[name] = result
    return out


def eval_system(config: dict[str, Any], docs: list, dev: int, decision: SpamDecision | None) -> dict[str, Any]:
    """``sgm eval --mode prequential`` of one configuration (the harness itself), sliced."""
    started = time.perf_counter()
    setup = EvalSetup(mode="prequential", decision=decision)
    report = evaluate_prequential(config, docs, setup, keep_outcomes=True)
    slices = sliced(report.pop("_outcomes"), dev, decision)
    slices["whole stream"]["seconds"] = time.perf_counter() - started
    return slices


def vw_safe(counts: dict[str, float]) -> dict[str, float]:
    """Term names VW's text format can carry: spaces, ':' and '|' percent-encoded (one-to-one)."""
    table = str.maketrans({"%": "%25", " ": "%20", ":": "%3A", "|": "%7C"})
    return {term.translate(table): count for term, count in counts.items()}


def vw_prequential(counts: list[dict[str, float]], docs: list, rate: float) -> Outcomes:
    """VW online logistic regression, test-then-train like the harness. Scores are VW's raw margins (the
    log-odds of its probability), so its ranking has no ties from saturated probabilities."""
    from vowpalwabbit import Workspace

    vw = Workspace(f"--loss_function logistic -l {rate} -b 24 --quiet")
    outcomes = Outcomes()
    for index, (features, doc) in enumerate(zip(counts, docs)):
        line = " ".join(f"{term}:{count:g}" for term, count in features.items())
        if index:
            margin = float(vw.predict(f" | {line}"))
            p = 1.0 / (1.0 + math.exp(-margin))
            truth = POSITIVE in doc.labels
            outcomes.true_sets.append(frozenset(doc.labels))
            outcomes.predicted_sets.append(frozenset([POSITIVE if p >= 0.5 else "ham"]))
            outcomes.p_true.append(p if truth else 1.0 - p)
            outcomes.p_positive.append(p)
            outcomes.positive_odds.append(margin)
            outcomes.ts.append(doc.ts)
        vw.learn(f"{1 if POSITIVE in doc.labels else -1} | {line}")
    vw.finish()
    return outcomes


def vw_system(counts: list[dict[str, float]], docs: list, dev: int) -> tuple[float, dict[str, Any]]:
    """VW's learning rate chosen on the dev stream by 1-ROCA% (the measure the mail default was chosen by)."""
    started = time.perf_counter()
    dev_scores = []
    for rate in VW_RATES:
        part = vw_prequential(counts[:dev], docs[:dev], rate)
        dev_scores.append((harness_measures(part, POSITIVE)["one_minus_roca_pct"], rate))
    rate = min(dev_scores)[1]
    slices = sliced(vw_prequential(counts, docs, rate), dev, None)
    slices["whole stream"]["seconds"] = time.perf_counter() - started
    return rate, slices


def eval_compare(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """The spam preset through ``sgm eval``'s harness, VW on the same extracted features and on the text twin,
    and the text twins through the harness: one process, one run each."""
    from bench.peers import vw_available

    raw_docs, text_docs = harness_streams(folder)
    dev = dev_size(len(raw_docs))
    print(f"{len(raw_docs)} messages, dev = the first {dev}", flush=True)
    spam = preset("spam")
    rows: list[tuple[str, dict[str, Any]]] = []

    def add(name: str, slices: dict[str, dict[str, Any]], note: str) -> None:
        rows.extend((f"{name}, {label}", result) for label, result in slices.items())
        whole = slices["whole stream"]
        print(f"  {name}: 1-ROCA% {whole['one_minus_roca_pct']:.3f} ({note})", flush=True)

    add("sgm --preset spam (mail)", eval_system(spam.model_config(), raw_docs, dev, spam.decision),
        describe(spam.model) + f"; decision {spam.decision.to_dict()}")
    add("sgm text twin, RESULTS.md", eval_system(TEXT_TWIN, text_docs, dev, None), describe(TEXT_TWIN))
    add("sgm text twin + trigrams, dev 1-ROCA", eval_system(TEXT_TRIGRAMS_BY_ROC, text_docs, dev, None),
        describe(TEXT_TRIGRAMS_BY_ROC))
    if not vw_available():
        print("  VW rows skipped: vowpalwabbit does not import", flush=True)
        return rows
    started = time.perf_counter()
    features = [vw_safe(terms) for terms in ReadDocuments(raw_docs, spam.model, mail=True).for_config(spam.model)]
    print(f"  mail features for VW: {time.perf_counter() - started:.1f} s", flush=True)
    rate, slices = vw_system(features, raw_docs, dev)
    add("VW logistic, the preset's mail features", slices, f"l={rate:g} chosen on dev 1-ROCA")
    bigrams = [{t.replace(" ", "_"): c for t, c in Tokenizer(ngrams=2)(d.text).items()} for d in text_docs]
    rate, slices = vw_system(bigrams, text_docs, dev)
    add("VW logistic + bigrams, text twin", slices, f"l={rate:g} chosen on dev 1-ROCA")
    return rows


# ---------------------------------------------------------------- the decision of the preset
def _plain_posterior(log_odds: float) -> float:
    """The posterior of ``log_odds`` with 3 significant digits of its distance to 0 or 1 (reads as a plain number)."""
    p = 1.0 / (1.0 + math.exp(-log_odds))
    near = min(p, 1.0 - p)
    return round(p, 2 - math.floor(math.log10(near)))


#: Thresholds on the spam posterior: log-odds -5 .. 30 in steps of 0.25.
THRESHOLDS = tuple(sorted({_plain_posterior(x / 4) for x in range(-20, 121)}))
GUARDS = (0, 1, 2, 5, 10, 20, 50, 100, 200)
#: Weights of the class prior in the decision's posterior (``SpamDecision.prior_weight``); the model's own
#: theta (2 for the preset) is today's rule, spelled ``None``.
PRIOR_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(21))


def decision_posteriors(log_odds: Sequence[float], prior_log_ratio: Sequence[float], theta: float,
                        weight: float | None) -> np.ndarray:
    """The spam posterior a decision with ``prior_weight=weight`` reads, from the model's spam log-odds and
    ``log p(spam) - log p(ham)`` of its class prior when it scored (NaN while it knew one class only: then
    the posterior is the model's, 0 or 1). Two classes: the log-odds move by ``(weight - theta)`` times the
    prior's log ratio (``SpamDecision.posterior`` does it on every class's posterior, the same number up to
    rounding)."""
    x = np.asarray(log_odds, dtype=np.float64)
    ratio = np.asarray(prior_log_ratio, dtype=np.float64)
    if weight is not None:
        x = np.where(np.isnan(ratio), x, x + (weight - theta) * np.nan_to_num(ratio))
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def choose_decision(is_spam: Sequence[bool], log_odds: Sequence[float], prior_log_ratio: Sequence[float],
                    theta: float, learned: Sequence[tuple[int, int]],
                    fp_cost: float) -> list[tuple[float, SpamDecision, int, int, int]]:
    """Every (prior weight, threshold, min_spam, min_ham) of the grid with its dev cost ``fp_cost * FP + FN``,
    FP, FN and documents without a verdict, best first (ties: smaller guards, then the prior weight nearest
    the model's theta, then the threshold nearest 0.5)."""
    y = np.asarray(is_spam, dtype=bool)
    spams, hams = np.asarray([n for n, _ in learned]), np.asarray([m for _, m in learned])
    thresholds = np.asarray(THRESHOLDS)[:, None]
    out = []
    for weight in (None,) + tuple(w for w in PRIOR_WEIGHTS if w != theta):
        said_at = np.asarray(decision_posteriors(log_odds, prior_log_ratio, theta, weight))[None, :] >= thresholds
        for min_spam in GUARDS:
            for min_ham in GUARDS:
                said = said_at & ((spams >= min_spam) & (hams >= min_ham))[None, :]
                fps, fns = (said & ~y).sum(axis=1), (~said & y).sum(axis=1)
                waiting = int((~((spams >= min_spam) & (hams >= min_ham))).sum())
                for threshold, fp, fn in zip(THRESHOLDS, fps.tolist(), fns.tolist()):
                    out.append((fp_cost * fp + fn, SpamDecision("spam", threshold, min_spam, min_ham, weight), fp, fn,
                                waiting))

    def odds(t: float) -> float:
        return abs(math.log(t / (1 - t))) if t < 1 else 1e300

    out.sort(key=lambda r: (r[0], r[1].min_spam + r[1].min_ham,
                            abs((theta if r[1].prior_weight is None else r[1].prior_weight) - theta),
                            odds(r[1].threshold)))
    return out


def decision_mode(folder: Path) -> dict[str, Any]:
    """Choose the preset's prior weight, threshold and learn guards on the dev stream; report the chosen
    rule, today's (the model's posterior at the old threshold) and the arg-max on all three slices, each
    through ``sgm eval``'s harness (the service's decision code)."""
    raw_docs, _ = harness_streams(folder)
    dev = dev_size(len(raw_docs))
    spam = preset("spam")
    theta = float(spam.model["params"].get("theta", 1.0))
    report = evaluate_prequential(spam.model_config(), raw_docs, EvalSetup(mode="prequential"), keep_outcomes=True)
    outcomes: Outcomes = report.pop("_outcomes")
    # learned before scored document i (= stream document i + 1): the labels of stream documents 0..i
    counts, learned = [0, 0], []
    for doc in raw_docs[:-1]:
        counts[0 if POSITIVE in doc.labels else 1] += 1
        learned.append((counts[0], counts[1]))
    # the class prior's log ratio when each document was scored (no decay in the preset: document counts)
    ratio = [math.log(n / m) if n and m else math.nan for n, m in learned]
    truth = [POSITIVE in t for t in outcomes.true_sets]
    ranked = choose_decision(truth[: dev - 1], outcomes.positive_odds[: dev - 1], ratio[: dev - 1], theta,
                             learned[: dev - 1], FP_COST)
    print(f"dev = the first {dev} messages; cost = {FP_COST} x FP + FN on dev; best 10:")
    for cost, rule, fp, fn, waiting in ranked[:10]:
        print(f"  cost {cost:5.0f}  FP {fp:3d}  FN {fn:3d}  not ready {waiting:4d}  {rule}")
    best_per_weight = {}
    for cost, rule, fp, fn, waiting in ranked:
        best_per_weight.setdefault(rule.prior_weight, (cost, rule, fp, fn, waiting))
    print("best per prior weight (dev), then its FP / FN / cost after dev:")
    per_weight = []
    for weight, (cost, rule, fp, fn, _) in sorted(best_per_weight.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        p = decision_posteriors(outcomes.positive_odds, ratio, theta, rule.prior_weight)[dev - 1:]
        ready = np.asarray([n >= rule.min_spam and m >= rule.min_ham for n, m in learned[dev - 1:]])
        said, y = ready & (p >= rule.threshold), np.asarray(truth[dev - 1:])
        after_fp, after_fn = int((said & ~y).sum()), int((~said & y).sum())
        per_weight.append({"rule": rule.to_dict(), "dev": [cost, fp, fn],
                           "after": [FP_COST * after_fp + after_fn, after_fp, after_fn]})
        print(f"  weight {weight!s:4s}  dev cost {cost:4.0f} (FP {fp:3d}, FN {fn:3d})  after dev cost "
              f"{FP_COST * after_fp + after_fn:4d} (FP {after_fp:3d}, FN {after_fn:3d})  {rule}")
    chosen = ranked[0][1]
    today = SpamDecision("spam", 0.99683, 0, 0)  # the model's posterior at the threshold chosen before (r17)
    rows = []
    for name, rule in ((f"chosen {chosen.threshold:g}/{chosen.min_spam}/{chosen.min_ham}, prior weight "
                        f"{chosen.prior_weight}", chosen), ("before: 0.99683 on the model's posterior", today)):
        run = evaluate_prequential(spam.model_config(), raw_docs, EvalSetup(mode="prequential", decision=rule),
                                   keep_outcomes=True)
        for label, result in sliced(run.pop("_outcomes"), dev, rule).items():
            rows.append((f"{name}, {label}", result))
    for label, result in sliced(outcomes, dev, None).items():
        rows.append((f"arg-max (no guards), {label}", result))
    spamassassin = SpamDecision("spam", 0.5, 200, 200)  # for comparison: SpamAssassin's default guards
    for label, result in sliced(apply_decision(outcomes, learned, spamassassin), dev, spamassassin).items():
        rows.append((f"0.5 with guards 200/200, {label}", result))
    print(table(rows))
    return {"chosen": chosen.to_dict(), "fp_cost": FP_COST, "per_prior_weight": per_weight,
            "top": [(c, r.to_dict(), fp, fn, w) for c, r, fp, fn, w in ranked[:20]], "rows": rows}


def apply_decision(outcomes: Outcomes, learned: Sequence[tuple[int, int]], decision: SpamDecision) -> Outcomes:
    """The outcomes as the decision's verdicts and output labels make them (what ``sgm eval`` reports)."""
    out = part_of(outcomes, 0, None)
    out.verdicts = [decision.verdict(p, {"spam": n, "ham": m}) for p, (n, m) in zip(out.p_positive, learned)]
    out.predicted_sets = [frozenset([POSITIVE if v == "spam" else "ham"]) for v in out.verdicts]
    return out


def load_config(path: str) -> dict[str, Any]:
    """A configuration from a JSON file: a configuration, or a search report holding one under "config"."""
    data = json.loads(Path(path).read_text())
    return data["config"] if "config" in data else data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("eval", "decision", "compare", "ablation", "search"), default="eval")
    parser.add_argument("--config", help="a JSON file with a mail configuration (default: the built-in MAIL_DEFAULT)")
    parser.add_argument("--system", choices=("mail", "text"), default="mail", help="search: whole messages or the text twin")
    parser.add_argument("--model", default="uc_jm_dp_ps", help="search: the model's affix string")
    parser.add_argument("--groups", help="search: comma-separated feature groups (default: the configuration's)")
    parser.add_argument("--ngrams", type=int, help="search: body n-gram order (default: the configuration's)")
    parser.add_argument("--received-hops", type=int, help="search: Received hops read (default: the configuration's)")
    parser.add_argument("--start", help="search: start from this configuration's parameters (default: --config's "
                        "when given, else the documented defaults)")
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--points", type=int, default=12)
    parser.add_argument("--objective", choices=("roc", "accuracy"), default="roc")
    parser.add_argument("--no-meta-weight", action="store_true", help="search: keep meta_weight fixed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    folder = data_folder()
    if folder is None:
        print(f"skipped: {RAW_FILE} and {TEXT_FILE} not found (set SGM_DATA_DIR or put shared/data beside the "
              "repository)")
        return 0
    config = load_config(args.config) if args.config else MAIL_DEFAULT
    if args.mode == "eval":
        rows = eval_compare(folder)
        print(table(rows))
        out = {"mode": "eval", "preset": preset("spam").model, "decision": preset("spam").decision.to_dict(),
               "rows": rows}
    elif args.mode == "decision":
        out = decision_mode(folder)
    elif args.mode == "search":
        opts = MailOptions.from_dict(config["mail"])
        overrides = {"groups": args.groups.split(",") if args.groups else None, "ngrams": args.ngrams,
                     "received_hops": args.received_hops}
        opts = MailOptions.from_dict({**opts.to_dict(), **{k: v for k, v in overrides.items() if v is not None}})
        start = load_config(args.start) if args.start else (config if args.config else None)
        if start is not None and "mail" in start and args.system == "mail":
            opts = MailOptions.from_dict({**opts.to_dict(), "meta_weight": start["mail"]["meta_weight"]})
        out = search(folder, args.system, args.model, opts, args.ngrams or opts.ngrams, args.iters, args.points,
                     args.objective, not args.no_meta_weight, args.seed, start["params"] if start else None)
        print(json.dumps(out, indent=1))
    else:
        systems = [("mail", config)] + [(n, c) for n, c in SYSTEMS if c is not MAIL_DEFAULT] if args.config else SYSTEMS
        rows = compare(folder, systems) if args.mode == "compare" else ablation(folder, config)
        print(table(rows))
        out = {"mode": args.mode, "config": config, "text_twin": TEXT_TWIN, "rows": rows}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=sorted))  # frozensets as lists
    return 0


if __name__ == "__main__":
    sys.exit(main())
