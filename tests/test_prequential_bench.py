"""bench/prequential.py reads the configurations it measures from docs/RESULTS.md."""
import json
import re

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


POOL_PAGE = """
### spamassassin — prequential

| system | setting (chosen on dev) | dev 1-ROCA% | accuracy |
|---|---|---|---|
| **sgm ensemble (2 bases)** ✓ | pool: meta=True | 0.400 | 0.98 |
| **sgm tdm_uc_jm_dp_kpd_kdp +bigrams** | beta=0.675 | 0.534 | 0.98 |
| **sgm uc_pd_jm_dp_ps +bigrams** | beta=0.91 | 0.617 | 0.98 |

```bash
sgm eval --data spamassassin --mode prequential --model uc_pd_jm_dp_ps --ngrams 2 --param beta=0.9099 --param mu=10000
sgm eval --data spamassassin --mode prequential --model tdm_uc_jm_dp_kpd_kdp --ngrams 2 --param beta=0.674669 --param kmu=1000
sgm eval --data spamassassin --mode prequential --config $WORK/spamassassin-prequential-ensemble-roc_auc.config.json
```
"""


def pool_config() -> dict:
    from sgm.model import MNB, Ensemble, Tokenizer

    pool = Ensemble([MNB("u_jm"), MNB("uc_pd_jm_dp", tokenizer=Tokenizer(ngrams=2))], [0.6, 0.4])
    return pool.model_config()


def test_a_chosen_pool_is_read_from_the_work_folder_with_the_best_single_and_its_mnb_beside_it(tmp_path):
    (tmp_path / "spamassassin-prequential-ensemble-roc_auc.config.json").write_text(json.dumps(pool_config()))
    pool, single, mnb = page_choices("spamassassin", POOL_PAGE, work=tmp_path)
    assert (pool.role, pool.label, pool.ngrams, pool.shuffle) == ("chosen", "ensemble (2 bases)", 2, None)
    assert len(pool.build().bases) == 2
    assert (single.role, single.label) == ("best single", "tdm_uc_jm_dp_kpd_kdp +bigrams")
    assert (mnb.role, mnb.label) == ("best MNB", "uc_pd_jm_dp_ps +bigrams")


def test_a_chosen_pool_without_its_work_folder_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="configuration .* is missing: pass --work"):
        page_choices("spamassassin", POOL_PAGE, work=tmp_path)


def test_the_real_page_names_a_chosen_configuration_for_each_measured_stream(tmp_path):
    page = RESULTS.read_text(encoding="utf-8")
    for name in ("spamassassin", "enron-spam"):
        chosen_row = re.search(rf"^### {name} — prequential$.*?^\| \*\*sgm ([^*]+)\*\* ✓", page, re.M | re.S)
        assert chosen_row, name
        if chosen_row.group(1).startswith("ensemble"):  # the pool's file lives in the results work folder
            line = next(l for l in page.splitlines() if l.startswith(f"sgm eval --data {name} ") and "--config" in l)
            (tmp_path / line.split("$WORK/")[1].split()[0]).write_text(json.dumps(pool_config()))
        choices = page_choices(name, page, work=tmp_path)
        assert choices[0].label == chosen_row.group(1).strip()
        assert all(c.build() is not None for c in choices)
        assert all(c.params for c in choices if c.config is None)
