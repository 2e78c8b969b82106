"""CPU cost of the whole-message mail extractor, and a digest of everything it returns.

    python -m bench.mail_extract [--data PATH] [--every 6] [--rounds 5] [--ref REV] [--digest-only]
                                 [--write-digests FILE]

The extractor (:class:`sgm.model.mail.MailFeatures`, default :class:`MailOptions`: trigrams, every
group) is timed over the SpamAssassin whole messages (``raw_b64``; every ``--every``-th message, decoded
before timing): process CPU time of one pass over them, per message. With ``--ref REV`` the same
pass runs with the ``model/`` package of that git revision too (``git archive REV model``, imported
as a package of its own beside the installed one), the two alternating round by round so that load
on the shared machine falls on both alike; the figure is each side's median round and the ratio
of the medians.

Identity: every message's extraction (the terms in order with their values, the flags and every
work counter) is hashed under four option sets (the default; unigrams with ``meta_weight`` 1.0; a
subset of the groups with every received hop; tight limits that make the truncation paths run).
With ``--ref`` the per-message hashes of both sides are compared over every message of the file
and the first differences printed; the exit status is 1 when any differs. ``--mutants N`` adds
N mutated messages (corpus messages with bytes deleted, duplicated, swapped or replaced by mail
syntax: ``<``, ``=?``, ``--``, CR, NUL..., seeded) to the identity check, for the malformed paths the
corpus rarely takes. ``--write-digests`` writes ``option set, index, hash`` lines for comparing runs
made apart.
"""
from __future__ import annotations

import argparse
import base64
import gc
import gzip
import hashlib
import importlib
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from dataclasses import asdict
from pathlib import Path

DATA = Path("/work/shared/data/spamassassin-raw.jsonl.gz")
REPO = Path(__file__).resolve().parent.parent


def option_sets(mail) -> dict[str, object]:
    """The option sets whose output is compared (built with the given ``sgm.model.mail`` module)."""
    return {
        "default": mail.MailOptions(),
        "uni-w1": mail.MailOptions(ngrams=1, meta_weight=1.0),
        "groups-hops0": mail.MailOptions(ngrams=2, groups=["subject", "headers", "html", "urls", "body"],
                                         received_hops=0),
        "tight": mail.MailOptions(limits=mail.MailLimits(max_bytes=4000, max_header_bytes=1500, max_headers=20,
                                                         max_header_chars=100, max_parts=3, max_depth=1,
                                                         max_text_chars=1500, max_html_tags=30, max_urls=4,
                                                         max_terms=150)),
    }


def load_messages(path: Path) -> list[bytes]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [base64.b64decode(json.loads(line)["raw_b64"]) for line in handle if line.strip()]


def load_ref(rev: str, workdir: Path):
    """``model.mail`` of git revision ``rev``, imported as ``sgmref.model.mail``."""
    blob = subprocess.run(["git", "-C", str(REPO), "archive", rev, "model"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(workdir, filter="data")
    package = types.ModuleType("sgmref")
    package.__path__ = [str(workdir)]
    sys.modules["sgmref"] = package
    return importlib.import_module("sgmref.model.mail")


_SYNTAX = [b"<", b">", b"=?", b"?=", b"--", b"\r", b"\n", b"\n\n", b"\x00", b"\xff", b"=", b":", b";", b"\"",
           b" ", b"\t", b"&#", b"http://", b"@", b"<!--", b"Content-Type: multipart/mixed; boundary=x\n"]


def mutants(messages: list[bytes], n: int, seed: int = 9) -> list[bytes]:
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        data = bytearray(rng.choice(messages)[:20000])
        for _ in range(rng.randint(1, 12)):
            if not data:
                break
            at = rng.randrange(len(data))
            op = rng.randrange(4)
            if op == 0:
                del data[at:at + rng.randint(1, 64)]
            elif op == 1:
                data[at:at] = data[at:at + rng.randint(1, 64)]
            elif op == 2:
                data[at:at] = rng.choice(_SYNTAX)
            else:
                data[at] = rng.randrange(256)
        out.append(bytes(data))
    return out


def digest(extraction) -> str:
    h = hashlib.blake2b(digest_size=16)
    for term, value in extraction.terms.items():
        h.update(term.encode("utf-8", "surrogatepass"))
        h.update(b"\x00" + repr(value).encode() + b"\x01")  # repr: 1 and 1.0 differ, and so do their types
    h.update(repr(extraction.flags).encode())
    h.update(repr(sorted(asdict(extraction.stats).items())).encode())
    return h.hexdigest()


def digests(mail, messages: list[bytes]) -> dict[str, list[str]]:
    out = {}
    for name, options in option_sets(mail).items():
        extract = mail.MailFeatures(options).extract
        out[name] = [digest(extract(raw)) for raw in messages]
    return out


def time_pass(extract, messages: list[bytes]) -> float:
    gc.collect()
    start = time.process_time()
    for raw in messages:
        extract(raw)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--every", type=int, default=6, help="time every n-th message (6: 1,008 of 6,045)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ref", help="git revision to compare with (e.g. main)")
    parser.add_argument("--digest-only", action="store_true", help="check identity, time nothing")
    parser.add_argument("--time-only", action="store_true", help="time, check nothing")
    parser.add_argument("--mutants", type=int, default=0, help="mutated messages added to the identity check")
    parser.add_argument("--write-digests", type=Path)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data}", file=sys.stderr)
        return 2

    from sgm.model import mail as ours
    messages = load_messages(args.data)
    sides = {"branch": ours}
    with tempfile.TemporaryDirectory() as tmp:
        if args.ref:
            sides = {"ref": load_ref(args.ref, Path(tmp)), "branch": ours}
        status = 0
        if not args.time_only:
            checked = messages + mutants(messages, args.mutants)
            seen = {name: digests(mail, checked) for name, mail in sides.items()}
            for name, per_set in seen.items():
                total = hashlib.blake2b("".join(h for hs in per_set.values() for h in hs).encode(), digest_size=16)
                print(f"{name}: digest of {len(checked)} messages x {len(per_set)} option sets {total.hexdigest()}")
            if args.ref:
                differ = [(s, i) for s in seen["ref"] for i, (a, b) in enumerate(zip(seen["ref"][s], seen["branch"][s]))
                          if a != b]
                print(f"identity: {'SAME' if not differ else f'{len(differ)} DIFFER, first {differ[:10]}'}")
                status = 1 if differ else 0
            if args.write_digests:
                with args.write_digests.open("w") as handle:
                    for s, hs in seen["branch"].items():
                        handle.writelines(f"{s} {i} {h}\n" for i, h in enumerate(hs))
        if not args.digest_only:
            sample = messages[:: args.every]
            size = sum(map(len, sample)) / len(sample)
            extractors = {name: mail.MailFeatures().extract for name, mail in sides.items()}
            for extract in extractors.values():  # warm: imports, regex caches
                time_pass(extract, sample[:50])
            times: dict[str, list[float]] = {name: [] for name in extractors}
            for r in range(args.rounds):
                order = list(extractors) if r % 2 == 0 else list(reversed(extractors))
                for name in order:
                    times[name].append(time_pass(extractors[name], sample) / len(sample) * 1e6)
            print(f"{len(sample)} messages ({size / 1000:.1f} KB mean), {args.rounds} alternating rounds, "
                  f"CPU us per message:")
            for name, values in times.items():
                print(f"  {name:6s} median {statistics.median(values):7.1f}  rounds "
                      + " ".join(f"{v:.0f}" for v in values))
            if args.ref:
                ratio = statistics.median(times["branch"]) / statistics.median(times["ref"])
                print(f"  branch / ref = {ratio:.3f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
