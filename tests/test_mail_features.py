"""Mail features on hand-written messages: one test per feature group, the options, and the
contract with the models (the mapping they accept, body words as the text tokenizer makes them,
the same terms in any process)."""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.model import MNB
from sgm.model.mail import GROUPS, IGNORED_HEADERS, MailFeatures, MailLimits, MailOptions, mail_features
from sgm.model.mail.content import _URL, _UUENCODE
from sgm.model.mail.decode import sanitize
from sgm.model.mail.features import clean_term, clean_terms
from sgm.model.text import Tokenizer

SPAM = (
    b"From spammer@bulk.example Mon Jun 24 20:45:01 2002\n"
    b"Return-Path: <bounce-77@bulk.example>\n"
    b"Received: from relay.isp.example (relay.isp.example [192.0.2.10]) by mx.home.example (Postfix) with ESMTP\n"
    b"Received: from pc17 (unknown [203.0.113.99]) by relay.isp.example with SMTP; may be forged\n"
    b"Delivered-To: me@home.example\n"
    b"X-Spam-Status: Yes, hits=99\n"
    b"X-Keywords: Junk\n"
    b"From: \"Best Deals\" <deals2002@cheap.example.biz>\n"
    b"Reply-To: <orders@elsewhere.example.net>\n"
    b"To: <me@home.example>, <you@home.example>, <them@home.example>\n"
    b"Subject: =?iso-8859-1?q?FREE_Cr=E9dit?= !!!\n"
    b"Date: Sun, 24 Jun 2001 20:45:01 -0700\n"
    b"Message-Id: <0000104257bd$00001f24$00007177@>\n"
    b"X-Mailer: Mass Mailer Pro 4.1\n"
    b"MIME-Version: 1.0\n"
    b"Content-Type: multipart/mixed; boundary=\"----=_NextPart_000_0012\"\n\n"
    b"This is a multi-part message in MIME format.\n\n"
    b"------=_NextPart_000_0012\n"
    b"Content-Type: text/html; charset=\"us-ascii\"\n"
    b"Content-Transfer-Encoding: quoted-printable\n\n"
    b"<html><body><font color=3D\"#FF0000\" size=3D1>V<!-- x -->iagra</font> at =\n"
    b"<a href=3D\"http://www.paypal.com@198.51.100.7:8080/login.php?id=3D1\">paypal.com</a>"
    b"<img src=3D\"http://track.bulk.example/t.gif\" width=3D1 height=3D1>"
    b"<div style=3D\"display:none\">random words</div></body></html>\n"
    b"------=_NextPart_000_0012\n"
    b"Content-Type: application/octet-stream; name=\"invoice.pdf.exe\"\n"
    b"Content-Transfer-Encoding: base64\n"
    b"Content-Disposition: attachment; filename=\"invoice.pdf.exe\"\n\n"
    + base64.encodebytes(b"MZ" + b"\x00" * 200)
    + b"------=_NextPart_000_0012--\n"
)

HAM = (
    b"Received: from lists.example.org (lists.example.org [198.51.100.20]) by mx.home.example with ESMTP\n"
    b"From: Ann Author <ann@example.org>\n"
    b"To: dev-list@lists.example.org\n"
    b"Subject: Re: the build is broken\n"
    b"Date: Tue, 13 Aug 2002 10:04:11 +0100\n"
    b"Message-ID: <20020813090411.GA12@example.org>\n"
    b"In-Reply-To: <abc@example.org>\n"
    b"List-Id: Developers <dev-list.lists.example.org>\n"
    b"User-Agent: Mutt/1.4i\n"
    b"Content-Type: text/plain; charset=us-ascii\n\n"
    b"I pushed a fix; see http://cvs.example.org/build/log for the log.\n"
)


def features(raw: bytes, **options) -> dict[str, float]:
    return MailFeatures(MailOptions(**options))(raw)


def group_terms(raw: bytes, group: str) -> set[str]:
    """The terms one group adds to the others."""
    with_group = set(features(raw))
    without = set(features(raw, groups=[g for g in GROUPS if g != group]))
    return with_group - without


# ---------------------------------------------------------------- one test per group
def test_body_words_are_the_text_tokenizers_on_subject_and_visible_text():
    terms = features(HAM, groups=["body"], ngrams=2)
    text = "Re: the build is broken\n\nI pushed a fix; see http://cvs.example.org/build/log for the log.\n"
    assert terms == Tokenizer(ngrams=2)(text)
    html_words = features(SPAM, groups=["body"], ngrams=1)
    assert html_words["viagra"] == 1  # a comment inside a word joins it, tags are not words
    assert "font" not in html_words and "href" not in html_words and "random" in html_words
    assert "mz" not in html_words  # attachments are not read as text


def test_subject_group():
    assert group_terms(SPAM, "subject") == {"subj:FREE", "subj:Crédit", "subj.punct:!!!", "subj.cs:iso-8859-1"}
    assert "subj:Re" in group_terms(HAM, "subject")


def test_headers_group():
    terms = group_terms(SPAM, "headers")
    assert {"hdr:Message-Id", "hdr:X-Mailer", "hdr:MIME-Version", "mailer:mass mailer pro 4.1",
            "mailer.name:mass mailer pro N", "msgid.shape:9a$9a9$9", "msgid:invalid",
            "date.tz:-0700", "date.shape:Aa, 9 Aa 9 9:9:9 -9", "h.mime-version:1"} <= terms
    ham = group_terms(HAM, "headers")
    assert {"msgid.dom:example.org", "hdr:List-Id", "mailer:mutt/1.4i", "hdr:In-Reply-To"} <= ham
    assert not any("abc" in t or "developers" in t for t in ham)  # In-Reply-To, List-Id: presence only


def test_ignored_headers_leave_no_trace():
    terms = features(SPAM)
    assert not any(t.startswith(("hdr:X-Spam", "hdr:Delivered-To", "hdr:X-Keywords", "h.x-spam", "h.delivered",
                                 "h.x-keywords")) for t in terms)
    assert not any("junk" in t.lower() or "hits" in t for t in terms)
    assert "x-spam*" in IGNORED_HEADERS and "delivered-to" in IGNORED_HEADERS


def test_addresses_group():
    terms = group_terms(SPAM, "addresses")
    assert {"from.dom:example.biz", "from.dom:cheap.example.biz", "from.user:deals2002", "from.ushape:a9",
            "from.name:best", "from.name:deals", "replyto.dom:example.net", "retpath.dom:bulk.example",
            "retpath.user:bounce-77", "to.dom:home.example", "to.n:3", "rel.replyto:diff",
            "rel.retpath:diff"} <= terms
    assert not any(t.startswith(("to.user:", "cc.user:")) for t in terms)  # recipients' names are not evidence
    assert {"rel.msgid:same", "from.name:ann", "to.dom:lists.example.org", "replyto:none"} <= group_terms(HAM, "addresses")


def test_received_group_reads_the_sender_side_of_the_earliest_hops():
    terms = group_terms(SPAM, "received")
    assert {"rcvd.n:2", "rcvd.helo:pc17", "rcvd.rdns:unknown", "rcvd.ip:203.0.113", "rcvd.ip:203.0.113.99",
            "rcvd.with:smtp", "rcvd:forged", "rcvd.helo:relay.isp.example", "rcvd.ip:192.0.2.10"} <= terms
    assert not any("home.example" in t or "mx." in t for t in terms)  # `by` hosts are the receiving side
    one_hop = features(SPAM, received_hops=1)
    assert "rcvd.helo:pc17" in one_hop and "rcvd.helo:relay.isp.example" not in one_hop


def test_html_group():
    terms = group_terms(SPAM, "html")
    assert {"tag:html", "tag:font", "val:font.color=#ff0000", "val:font.size=1", "html:comment",
            "html:comment-in-word", "val:img.tiny", "html:hidden-style", "attr:a.href"} <= terms
    assert group_terms(HAM, "html") == set()


def test_urls_group():
    terms = group_terms(SPAM, "urls")
    assert {"url.scheme:http", "url:userinfo", "url:ip", "url:port", "url.path:login", "url.host:bulk.example",
            "url.host:track.bulk.example", "url.n:2"} <= terms
    assert {"url.host:example.org", "url.host:cvs.example.org", "url.path:build", "url.tld:org"} <= \
        group_terms(HAM, "urls")


def test_mime_group():
    terms = group_terms(SPAM, "mime")
    assert {"ct:multipart/mixed", "ct:text/html", "ct:application/octet-stream", "charset:us-ascii",
            "cte:quoted-printable", "cte:base64", "cd:attachment", "html:only", "mime.parts:3-4", "mime.depth:1",
            "mime.shape:multipart/mixed(text/html,application/octet-stream)",
            "boundary.shape:-=_AaAa_9_9"} <= terms


def test_attachments_group():
    terms = group_terms(SPAM, "attachments")
    assert {"att.ct:application/octet-stream", "att.name:invoice.pdf.exe", "att.ext:exe", "att:double-ext",
            "att.n:1"} <= terms
    assert group_terms(HAM, "attachments") == {"att.n:0"}


def test_flags_group():
    broken = b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Transfer-Encoding: base64\n\nSGk*\n"
    assert group_terms(broken, "flags") == {"flag:bad_base64", "flag:unterminated_multipart"}
    assert group_terms(HAM, "flags") == set()


# ---------------------------------------------------------------- contract
def test_every_non_body_term_has_a_prefix_no_word_can_have():
    for raw in (SPAM, HAM):
        words = features(raw, groups=["body"], ngrams=3)
        everything = features(raw, ngrams=3)
        assert all(":" not in w for w in words)
        assert {t for t in everything if ":" not in t} == set(words)


def test_meta_weight_scales_exactly_the_non_body_terms():
    one, half = features(SPAM, meta_weight=1.0), features(SPAM, meta_weight=0.5)
    assert one.keys() == half.keys()
    assert features(SPAM)["hdr:X-Mailer"] == MailOptions().meta_weight
    for term in one:
        assert half[term] == (one[term] * 0.5 if ":" in term else one[term])


def test_options_round_trip_and_validation():
    opts = MailOptions(ngrams=3, groups=["urls", "body", "flags"], meta_weight=0.25, received_hops=0,
                       limits=MailLimits(max_parts=9))
    assert opts.groups == ("flags", "urls", "body")
    data = json.loads(json.dumps(opts.to_dict()))
    assert MailOptions.from_dict(data) == opts
    assert MailOptions.from_dict({}) == MailOptions()
    for bad in ({"ngrams": 4}, {"meta_weight": 0}, {"meta_weight": float("nan")}, {"received_hops": -1},
                {"groups": ["nope"]}):
        with pytest.raises(ValueError):
            MailOptions(**bad)
    with pytest.raises(ValueError):
        MailOptions.from_dict({"ngram": 2})
    with pytest.raises(ValueError):
        MailLimits(max_parts=0)


def test_the_default_configuration_builds_and_matches_the_option_defaults():
    from sgm.model import build_model
    from sgm.model.mail import MAIL_CONFIG

    assert MailOptions.from_dict(MAIL_CONFIG["mail"]) == MailOptions()
    model = build_model({k: v for k, v in MAIL_CONFIG.items() if k != "mail"})
    model.learn_one(mail_features(SPAM), ["spam"])
    model.learn_one(mail_features(HAM), ["ham"])
    assert model.predict_one(mail_features(HAM.replace(b"broken", b"fixed"))) == "ham"


def test_models_learn_and_score_the_mapping():
    model = MNB("uc_jm_dp_ps", beta=0.6, mu=100, theta=0.5, ups=0)
    model.learn_one(mail_features(SPAM), ["spam"], id="s")
    model.learn_one(mail_features(HAM), ["ham"], id="h")
    spammy = SPAM.replace(b"Viagra", b"Cialis").replace(b"deals2002", b"deals2003")
    hammy = HAM.replace(b"build is broken", b"tests are green")
    assert model.predict_one(mail_features(spammy)) == "spam"
    assert model.predict_one(mail_features(hammy)) == "ham"
    restored = MNB.from_bytes(model.to_bytes())
    assert restored.predict_proba_one(mail_features(spammy)) == model.predict_proba_one(mail_features(spammy))


def test_same_terms_in_any_process():
    """Term order and values do not depend on hash randomization (sets are never iterated into the output)."""
    script = ("import sys, json, base64; from sgm.model.mail import mail_features; "
              "print(json.dumps(list(mail_features(base64.b64decode(sys.argv[1])).items())))")
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", script, base64.b64encode(SPAM + HAM).decode()], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        outputs.add(run.stdout)
    assert len(outputs) == 1
    assert json.loads(outputs.pop()) == [list(item) for item in mail_features(SPAM + HAM).items()]


term_text = st.lists(st.sampled_from(list("ab:. -") + ["a" * 60, "\t", "\n", "\x00", "\x7f", "\x85", "é", "\ud800"]),
                     max_size=60).map("".join)


@given(term_text)
def test_clean_term_is_the_full_normalization_for_every_term(term):
    """The shortcut for terms already clean returns what the full normalization does."""
    assert clean_term(term) == " ".join(sanitize(term[:256]).split())[:128].rstrip()


def test_clean_term_shortcut_holds_for_every_code_point():
    """The shortcut takes any printable term (not only ASCII): no printable character is one the full
    normalization blanks or splits on, checked for every code point alone and between letters and spaces."""
    for code in range(0x110000):
        ch = chr(code)
        for term in (ch, "a" + ch + "b", "a " + ch, ch + " b"):
            assert clean_term(term) == " ".join(sanitize(term[:256]).split())[:128].rstrip(), hex(code)


@given(st.lists(term_text | st.sampled_from(["|", "| x", "x |", " ", "x ", " x", "a" * 128, "a" * 129]), max_size=12))
def test_clean_terms_is_clean_term_of_each(terms):
    """The one joined test of a message's terms gives what cleaning them one by one gives."""
    assert clean_terms(list(terms)) == [clean_term(t) for t in terms]


@settings(deadline=None, max_examples=60)
@given(st.lists(st.sampled_from(["free", "offer", "now", "buy", "meds", "x"]), max_size=40), st.integers(1, 3),
       st.integers(1, 80))
def test_body_counts_are_the_word_by_word_counts_within_the_term_limit(words, ngrams, max_terms):
    """Body words are counted as a word-by-word loop counts them: first-occurrence order, and once the term
    limit is reached no new word enters while the words already in are still counted."""
    extract = MailFeatures(MailOptions(ngrams=ngrams, groups=["subject", "headers", "body"],
                                       limits=MailLimits(max_terms=max_terms)))
    raw = ("Subject: hello\nX-Mailer: m\n\n" + " ".join(words)).encode()
    got = extract.extract(raw).terms
    expected = dict(MailFeatures(MailOptions(ngrams=ngrams, groups=["subject", "headers"],
                                             limits=MailLimits(max_terms=max_terms))).extract(raw).terms)
    for word in Tokenizer(ngrams=ngrams).tokens("hello\n\n" + " ".join(words)):
        if word in expected:
            expected[word] += 1
        elif len(expected) < max_terms:
            expected[word] = 1
    assert list(got.items()) == list(expected.items())


_URL_AS_WRITTEN = re.compile(r"(?:\b(?:https?|ftp)://|\bwww\d{0,3}\.|\bmailto:)[^\s<>\"'\x7f]{1,500}", re.I)


def test_url_pattern_letters_are_what_ignorecase_matches():
    """Each letter class of the URL pattern holds exactly the characters re.I matches the letter by."""
    classes = {"h": "Hh", "f": "Ff", "w": "Ww", "m": "Mm", "t": "Tt", "p": "Pp", "s": "Ss\u017f", "a": "Aa",
               "i": "Ii\u0130\u0131", "l": "Ll", "o": "Oo"}
    for letter, members in classes.items():
        assert "".join(chr(c) for c in range(0x110000) if re.fullmatch(letter, chr(c), re.I)) == \
               "".join(sorted(members))
        assert f"[{members}]" in _URL.pattern


_url_text = st.lists(st.sampled_from(["http://", "HTTPS://", "hTTp\u017f://", "ftp://", "FTP:/", "www.", "WWW12.",
                                      "www1234.", "mailto:", "MA\u0130LTO:", "ma\u0131lto:", "x", "_", "é", "1", " ",
                                      "\n", "<", ">", "\"", "'", "\x7f", ".", "a.example/p?q=1", "h", "w", "m"]),
                     max_size=30).map("".join)


@settings(max_examples=400)
@given(_url_text)
def test_url_pattern_finds_what_the_pattern_as_written_finds(text):
    """The URL pattern written for speed finds the same spans as the plain one with re.I."""
    assert [m.span() for m in _URL.finditer(text)] == [m.span() for m in _URL_AS_WRITTEN.finditer(text)]


_UUENCODE_AS_WRITTEN = re.compile(r"^begin [0-7]{3,4} ([^\n]{1,200})$", re.M)


@given(st.lists(st.sampled_from(["begin 644 a.exe", "begin 0755 b", "begin 12 c", "bbegin 644 x", "\n", "\r", " ",
                                 "x", "b", "begin", "egin 644 y", "é"]), max_size=20).map("".join))
def test_uuencode_pattern_finds_what_the_pattern_as_written_finds(text):
    assert [m.span(1) for m in _UUENCODE.finditer(text)] == [m.span(1) for m in _UUENCODE_AS_WRITTEN.finditer(text)]


def test_header_name_memo_stays_bounded_and_reads_new_names_alike():
    """Invented field names fill the memo of name decisions only up to its bound; names past it
    give the same terms as when they are remembered."""
    from sgm.model.mail import headers
    raw = b"".join(b"X-Invented-%d: word%d\n" % (i, i) for i in range(200)) + b"\nbody"
    before = MailFeatures().extract(raw).terms
    for start in range(0, headers._NAME_INFO_MAX + 1000, 200):
        MailFeatures().extract(b"".join(b"X-Fill-%d: w\n" % (start + i) for i in range(200)) + b"\nbody")
    assert headers._name_info.cache_info().currsize <= headers._NAME_INFO_MAX
    assert MailFeatures().extract(raw.replace(b"Invented", b"Unseen")).terms == \
           {k.replace("invented", "unseen").replace("Invented", "Unseen"): v for k, v in before.items()}


_RECEIVED_AS_WRITTEN = {
    "_IPV4": re.compile(r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d.])"),
    "_BY": re.compile(r"\bby\s", re.I),
    "_WITH": re.compile(r"\bwith\s+([A-Za-z0-9-]{1,20})", re.I),
}
_received_text = st.lists(st.sampled_from(["by ", "BY\t", "xby ", "_by ", "with ", "WİTH  esmtp", "wıth \u212aS",
                                           "with\u017f", "1.2.3.4", "10.0.0.255", ".1.2.3.4", "1.2.3.4.", "1234.5.6.7",
                                           "\u0661.2.3.4", "9", ".", " ", "\n", "a", "é", "(", "[", "]", "-"]),
                          max_size=20).map("".join)


@settings(max_examples=400)
@given(_received_text)
def test_received_patterns_find_what_the_patterns_as_written_find(text):
    from sgm.model.mail import headers

    for name, written in _RECEIVED_AS_WRITTEN.items():
        fast = getattr(headers, name)
        assert [(m.span(), m.groups()) for m in fast.finditer(text)] == \
               [(m.span(), m.groups()) for m in written.finditer(text)], name
        assert bool(fast.fullmatch(text)) == bool(written.fullmatch(text)), name


def test_received_pattern_classes_are_what_ignorecase_matches():
    from sgm.model.mail import headers

    for letters, written in (("[A-Za-z0-9-]", "[A-Za-z0-9\u0130\u0131\u017f\u212a-]"), ("i", "[Ii\u0130\u0131]")):
        assert [c for c in range(0x110000) if re.fullmatch(letters, chr(c), re.I)] == \
               [c for c in range(0x110000) if re.fullmatch(written, chr(c))]
        assert written in headers._WITH.pattern
