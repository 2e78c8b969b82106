"""What ``python -m bench.results`` runs: the candidate families of ours and the PLAN of datasets.

Moved out of :mod:`bench.results` unchanged (that module re-exports every name), so that the
runner and the page stay under the 800-line limit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """One configuration family of ours: a spec plus fixed options (e.g. word bigrams)."""

    spec: str
    options: tuple[str, ...] = ()
    #: a smaller search than the entry's (slower models)
    search: tuple[int, int] | None = None
    #: an ensemble (issue 19): the stems of the entry's candidates it pools, fitted by ``sgm ensemble``
    bases: tuple[str, ...] = ()
    #: tuned on top of an earlier candidate of the entry (its stem): the search starts from that candidate's tuned
    #: configuration and searches only ``params`` (``sgm tune --config --params``)
    start_from: str | None = None
    params: tuple[str, ...] = ()

    def tune_from(self, config_of) -> list[str]:
        """The ``sgm tune`` arguments of :attr:`start_from` (``config_of(stem)``: that candidate's tuned file)."""
        if self.start_from is None:
            return []
        return ["--config", str(config_of(self.start_from)), "--params", ",".join(self.params)]

    @property
    def label(self) -> str:
        if self.bases:
            return f"{self.spec} ({len(self.bases)} bases)"
        return (self.spec + (" +bigrams" if "--ngrams" in self.options else "")
                + (" +binary" if "--binary" in self.options else "")
                + (" +chars" if "--char-ngrams" in self.options else ""))

    @property
    def stem(self) -> str:
        if self.bases:
            return self.spec
        return (self.spec + ("-bigrams" if "--ngrams" in self.options else "")
                + ("-binary" if "--binary" in self.options else "")
                + ("-chars" if "--char-ngrams" in self.options else ""))


#: The thesis's extended MNB, the same smoothing on raw counts, Pitman-Yor alone and plain Jelinek-Mercer
#: (the two simplest, most robust families), each with prior scaling; ours = the best on dev.
SPLIT_CANDIDATES = (Candidate("uc_pd_dp_tXiX_ps"), Candidate("uc_pd_jm_dp_ps"), Candidate("uc_pd_dp_ps"),
                    Candidate("u_jm_ps"))
#: Issue 19: supervised term weights (fw) on words, and on words + bigrams. Chosen for the topic sets by the dev searches of the issue's
#: research (FINDINGS.md there); on the spam streams fw did not help on dev, so they keep STREAM_CANDIDATES.
FW_CANDIDATES = (Candidate("uc_pd_jm_dp_fw_ps"), Candidate("uc_pd_jm_dp_fw_ps", ("--ngrams", "2")))
#: Issue 19, the ensemble's own bases: presence (binary) features of words + bigrams with fw, MNB and TDM (r52's TDM
#: added 2026-11-27: 6x12 ~4 min there). Candidates in their own right too.
BINARY_CANDIDATES = (Candidate("uc_pd_jm_dp_fw_ps", ("--ngrams", "2", "--binary")),)
TDM_BINARY_CANDIDATES = (Candidate("tdm_uc_jm_dp_kpd_kdp_fw", ("--ngrams", "2", "--binary")),)
#: Issue 19: character n-grams (3-5) of the words instead of words, a feature set of its own for the pool (alone it is
#: below the word models; beside them, bench/topic_levers.py's char-mix gained +0.17-0.20 points of r52's CV and +0.29 of r8's).
CHAR_CANDIDATES = (Candidate("uc_pd_jm_dp_fw_ps", ("--char-ngrams", "3-5")),)
#: Issue 19, the tied term weights (the tw affix, model/tied_weights.py: one factor per term, learned online by AdaGrad
#: before each document is counted) on top of the tuned fw +bigrams candidate: only tw_eta is searched (3x8, log scale
#: 0.25..8), from that candidate's tuned configuration (bench/topic_levers_online.py measured the lever: eta 2 chosen).
TW_CANDIDATES = (Candidate("uc_pd_jm_dp_fw_tw_ps", ("--ngrams", "2"), search=(3, 8),
                           start_from="uc_pd_jm_dp_fw_ps-bigrams", params=("tw_eta",)),)
#: Issue 19: a log-linear pool of tuned candidates with different smoothing, weighting and features (the research's
#: ensembles), fitted on dev data by ``sgm ensemble``; the tw candidate joined the topic sets' pools on 2026-11-28.
ENSEMBLE_BASES = ("uc_pd_jm_dp_fw_ps-bigrams", "uc_pd_jm_dp_fw_ps-bigrams-binary", "tdm_uc_jm_dp_kpd_kdp")
ENSEMBLE = Candidate("ensemble", bases=ENSEMBLE_BASES + ("tdm_uc_jm_dp_kpd_kdp_fw-bigrams-binary", "uc_pd_dp_tXiX_ps",
                                                         "uc_pd_jm_dp_fw_ps-chars", TW_CANDIDATES[0].stem))
ENSEMBLE_R52 = Candidate("ensemble", bases=ENSEMBLE_BASES + ("tdm_uc_jm_dp_kpd_kdp_fw-bigrams-binary", "uc_pd_jm_dp_fw_ps",
                                                             "uc_pd_jm_dp_fw_ps-chars", TW_CANDIDATES[0].stem))
#: Issue 19, the thesis's LSHTC4 model-based feedback (the fb affix, :mod:`model.feedback`) on top of the tuned fw
#: +bigrams candidate: a second pass with the top labels' words mixed in; only its three numbers are searched
#: (3x8), from that candidate's tuned configuration.
FB_CANDIDATES = (Candidate("uc_pd_jm_dp_fw_fb_ps", ("--ngrams", "2"), search=(3, 8),
                           start_from="uc_pd_jm_dp_fw_ps-bigrams", params=("fb_lambda", "fb_labels", "fb_terms")),)
#: Issue 19: reuters21578's pool of every tuned candidate of its entry (label-powerset bases; the pool outputs the
#: pooled arg-max label set), fitted on the entry's dev data by ``sgm ensemble``, which keeps the bases that help there
#: (with the tw candidate among them, 2026-11-28: that base alone).
ENSEMBLE_REUTERS = Candidate("ensemble", bases=tuple(c.stem for c in SPLIT_CANDIDATES + FW_CANDIDATES + TW_CANDIDATES
                                                    + CHAR_CANDIDATES))
#: Spam streams: raw counts, and word bigrams with linear (fast to update) or Pitman-Yor smoothing; each tuned
#: for dev ROC AUC (the entries' ``objective``), the measure the page reports.
STREAM_CANDIDATES = (Candidate("uc_pd_jm_dp_ps"), Candidate("uc_jm_dp_ps", ("--ngrams", "2")),
                     Candidate("uc_pd_jm_dp_ps", ("--ngrams", "2")))
#: Supervised term weights on words + bigrams, on the two smaller streams (enron-spam: time).
STREAM_FW_CANDIDATES = (Candidate("uc_pd_jm_dp_fw_ps", ("--ngrams", "2")),)
#: TDM on words + bigrams, on spamassassin and sms-spam (enron-spam: its prequential updates cost ~5x MNB's).
STREAM_TDM_CANDIDATES = (Candidate("tdm_uc_jm_dp_kpd_kdp", ("--ngrams", "2")),)
#: Issue 19: the spam streams' pool of every tuned candidate of the entry, fitted on the dev prefix of the stream
#: (``sgm ensemble --mode prequential``: blocked cross-validation over the bases' prequential posteriors there).
STREAM_ENSEMBLE = Candidate("ensemble", bases=tuple(c.stem for c in STREAM_CANDIDATES + STREAM_FW_CANDIDATES
                                                    + STREAM_TDM_CANDIDATES))
STREAM_ENSEMBLE_ENRON = Candidate("ensemble", bases=tuple(c.stem for c in STREAM_CANDIDATES))
#: Added when the TDM module exists (same search size as the MNB candidates).
TDM_CANDIDATES = (Candidate("tdm_uc_jm_dp_kpd_kdp"),)


@dataclass(frozen=True)
class Entry:
    """One dataset under one protocol."""

    data: str
    mode: str
    search: tuple[int, int]
    shuffle: int | None = None
    note: str = ""
    candidates: tuple[Candidate, ...] = SPLIT_CANDIDATES
    #: extra ``sgm tune`` / ``bench.peers`` arguments (the development data)
    dev_args: tuple[str, ...] = ()
    #: evaluate the best tuned configuration of another entry instead of tuning
    config_from: str | None = None
    #: the dev measure that tunes every candidate, chooses ours and chooses each peer's setting (``sgm tune
    #: --objective``; None: accuracy, Micro-F1 on multi-label data). Its outputs get their own file names.
    objective: str | None = None
    #: multi-label split data: each tuned candidate's powerset decision rule (arg-max label set, or labels whose
    #: marginal reaches a threshold) is chosen on its dev data (``sgm tune --choose-label-threshold``, issue 19)
    label_rule: bool = False
    #: K > 1: ours is the single candidate whose tuned configuration scores best in K-fold cross-validation over
    #: the training side (:mod:`bench.results_choice`), not the one whose own search found the best dev score
    choose_folds: int = 1

    @property
    def suffix(self) -> str:
        return f"-{self.objective}" if self.objective else ""

    @property
    def key(self) -> str:
        return f"{self.data}-{self.mode}"

    def data_args(self) -> list[str]:
        args = ["--data", self.data, "--mode", self.mode]
        if self.shuffle is not None:
            args += ["--shuffle", str(self.shuffle)]
        return args


#: Split datasets: one 6x12 search (73 points) for every candidate, the same for all so that dev compares like
#: with like. The thesis's 40x40 (1,600 points) for the 8-10 candidates per dataset would take ~5 h on two cores
#: (measured 2026-11-26: 5-10 min per candidate on r8 alone under load); the 6x12 page of that day showed the smaller search
#: with fw ahead of the older 40x40 page on every topic set. The topic sets choose ours by 5-fold cross-validation of
#: each tuned configuration (``choose_folds``; :mod:`bench.results_choice`).
PLAN: tuple[Entry, ...] = (
    Entry("r8", "split", (6, 12), choose_folds=5, note="standard split (Cardoso-Cachopo)",
          candidates=SPLIT_CANDIDATES + FW_CANDIDATES + FB_CANDIDATES + TW_CANDIDATES + BINARY_CANDIDATES
          + TDM_BINARY_CANDIDATES + CHAR_CANDIDATES + (ENSEMBLE,)),
    Entry("r52", "split", (6, 12), choose_folds=5, note="standard split",
          candidates=SPLIT_CANDIDATES + FW_CANDIDATES + FB_CANDIDATES + TW_CANDIDATES + BINARY_CANDIDATES
          + TDM_BINARY_CANDIDATES + CHAR_CANDIDATES + (ENSEMBLE_R52,)),
    Entry("webkb", "split", (6, 12), choose_folds=5, note="standard split",
          candidates=SPLIT_CANDIDATES + FW_CANDIDATES + FB_CANDIDATES + TW_CANDIDATES + BINARY_CANDIDATES
          + TDM_BINARY_CANDIDATES + CHAR_CANDIDATES + (ENSEMBLE,)),
    Entry("reuters21578", "split", (6, 12),
          candidates=SPLIT_CANDIDATES + FW_CANDIDATES + TW_CANDIDATES + CHAR_CANDIDATES + (ENSEMBLE_REUTERS,),
          label_rule=True,
          note="ModApte split, stories with at least one topic (7,775 train / 3,019 test); multi-label as label "
               "powerset, each candidate's output rule (arg-max label set or a threshold on label marginals) chosen "
               "on its dev data; the headline measure is Micro-F1"),
    Entry("reuters21578", "prequential", (0, 0), config_from="reuters21578-split",
          note="all 11,367 stories with a topic in ts order, test-then-train; label powerset. Not tuned again: "
               "the configuration tuned on the ModApte training side (row above, its output rule included) is "
               "replayed as a stream"),
    Entry("spamassassin", "prequential", (8, 12),
          candidates=STREAM_CANDIDATES + STREAM_FW_CANDIDATES + STREAM_TDM_CANDIDATES + (STREAM_ENSEMBLE,),
          objective="roc_auc",
          note="ts order (the time-ordered spam stream); dev = the first 25% of the stream"),
    Entry("sms-spam", "prequential", (10, 16), shuffle=0,
          candidates=STREAM_CANDIDATES + STREAM_FW_CANDIDATES + STREAM_TDM_CANDIDATES + (STREAM_ENSEMBLE,),
          objective="roc_auc",
          note="no usable order: seeded shuffle (seed 0), then test-then-train; dev = the first 25%"),
    Entry("enron-spam", "prequential", (6, 12), shuffle=0, candidates=STREAM_CANDIDATES + (STREAM_ENSEMBLE_ENRON,),
          objective="roc_auc",
          dev_args=("--dev-fraction", "0.1"),
          note="ham and spam come from different years, so ts order is not usable: seeded shuffle (seed 0); "
               "dev = the first 10% of the shuffled stream (33,715 long emails: kept small for time)"),
)
