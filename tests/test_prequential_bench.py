"""bench/prequential.py reads the configurations it measures from docs/RESULTS.md."""
import pytest

from bench.prequential import RESULTS, page_choices

PAGE = """
### spamassassin — prequential

| system | setting (chosen on dev) | dev 1-ROCA% | accuracy |
|---|---|---|---|
| **sgm tdm_uc_jm_dp_kpd_kdp +bigrams** ✓ | beta=0.675 | 0.534 | 0.98 |
| **sgm uc_jm_dp_ps +bigrams** | beta=0.955 | 0.723 | 0.98 |
| **sgm uc_pd_jm_dp_ps +bigrams** | beta=0.91 | 0.617 | 0.98 |
| **sgm uc_pd_jm_dp_ps** | beta=0.01 | 0.500 | 0.97 |
| river_mnb | alpha=0.01 | 0.100 | 0.97 |

```bash
sgm eval --data spamassassin --mode prequential --model uc_pd_jm_dp_ps --param beta=0.01 --param mu=0.1
sgm eval --data spamassassin --mode prequential --model uc_jm_dp_ps --ngrams 2 --param beta=0.955291 --param mu=10000
sgm eval --data spamassassin --mode prequential --model uc_pd_jm_dp_ps --ngrams 2 --param beta=0.9099 --param mu=10000
sgm eval --data spamassassin --mode prequential --model tdm_uc_jm_dp_kpd_kdp --ngrams 2 --param beta=0.674669 --param kmu=1000
```

### enron-spam — prequential

| system | setting (chosen on dev) | dev 1-ROCA% | accuracy |
|---|---|---|---|
| **sgm uc_jm_dp_ps +bigrams** ✓ | beta=0.01 | 0.658 | 0.99 |

```bash
sgm eval --data enron-spam --mode prequential --shuffle 0 --model uc_jm_dp_ps --param beta=0.01
```
"""


def test_a_chosen_tdm_comes_with_the_best_dev_mnb_of_its_n_grams_at_full_precision():
    chosen, mnb = page_choices("spamassassin", PAGE)
    assert (chosen.role, chosen.label, chosen.shuffle) == ("chosen", "tdm_uc_jm_dp_kpd_kdp +bigrams", None)
    assert chosen.params == {"beta": 0.674669, "kmu": 1000.0}
    # the lowest dev 1-ROCA% among MNB rows: the words-only row (0.500) is the best of all MNB rows here
    assert (mnb.role, mnb.label, mnb.params) == ("best MNB", "uc_pd_jm_dp_ps", {"beta": 0.01, "mu": 0.1})


def test_the_eval_line_must_match_the_chosen_n_grams_and_the_order_comes_from_it():
    (chosen,) = page_choices("enron-spam", PAGE.replace("--shuffle 0 --model uc_jm_dp_ps", "--shuffle 0 --model uc_jm_dp_ps --ngrams 2"))
    assert (chosen.label, chosen.shuffle) == ("uc_jm_dp_ps +bigrams", 0)
    with pytest.raises(ValueError, match="no sgm eval line"):
        page_choices("enron-spam", PAGE)  # the only eval line is for words, the row says +bigrams
    with pytest.raises(ValueError, match="no prequential section"):
        page_choices("sms-spam", PAGE)


def test_the_real_page_names_a_chosen_configuration_for_each_measured_stream():
    page = RESULTS.read_text(encoding="utf-8")
    for name in ("spamassassin", "enron-spam"):
        chosen = page_choices(name, page)[0]
        assert f"**sgm {chosen.label}** ✓" in page
        assert chosen.params and chosen.build() is not None
