"""Speed of the Kneser-Ney n-gram: ours on all of Brown, and ours vs nltk.lm on a slice.

    .venv/bin/python benchmarks/bench_ngram.py [--order 5]
        [--nltk-train 20000] [--nltk-test 300] [--repeats 3]

Brown is read where NLTK finds it (``NLTK_DATA``; ``python -m nltk.downloader brown`` fetches it).

1. Ours, Brown: fit interpolated modified Kneser-Ney of order 5 on the 800,000 training tokens and
   score every test token (177,359); best wall-clock of ``--repeats`` runs. Target: < 15 s.
2. nltk's ``nltk.lm.KneserNeyInterpolated`` (pure Python; interpolated KN with one discount, not
   the modified version, so only its speed is compared), fitted on the first ``--nltk-train``
   training tokens and scoring the first ``--nltk-test`` test tokens; ours on the very same slice.
   Reported: seconds per token scored (fit included) for each, and the ratio. Target: >= 100x.
3. KenLM (``--kenlm DIR`` holding ``lmplz`` and ``query``, or both on PATH; skipped if absent): the
   interpolated modified Kneser-Ney of orders 3 and 5 that ``lmplz`` builds from the same training
   stream (``corpus export``, each split joined into one line, ``<unk>`` renamed to an ordinary word
   because lmplz refuses it), and the test perplexity ``query`` gives, beside ours. Not the same
   number by construction: KenLM adds ``<s>`` and ``</s>`` around the line, starts the test without
   the validation words before it, and its vocabulary is the words of the training split.
The machine is shared with other work: timings are noisy, run twice.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from nplm_edu.data.corpus import load_corpus, windows  # noqa: E402
from nplm_edu.errors import UserError  # noqa: E402
from nplm_edu.models.ngram import KneserNey  # noqa: E402


def ours(train, ctx, tgt, order, V):
    t0 = time.perf_counter()
    m = KneserNey(order, V).fit(train)
    t1 = time.perf_counter()
    ppl = m.perplexity(ctx, tgt)
    return t1 - t0, time.perf_counter() - t1, ppl


def nltk_kn(words, train, ctx, tgt, order):
    from nltk.lm import KneserNeyInterpolated
    from nltk.util import everygrams

    toks = [words[i] for i in train]
    t0 = time.perf_counter()
    lm = KneserNeyInterpolated(order)
    lm.fit([everygrams(toks, max_len=order)], vocabulary_text=toks)
    t1 = time.perf_counter()
    logs = [lm.logscore(words[w], [words[i] for i in c]) for c, w in zip(ctx, tgt)]  # log2
    t2 = time.perf_counter()
    finite = np.isfinite(logs)
    ppl = float(2 ** -np.mean(np.asarray(logs)[finite])) if finite.any() else float("inf")
    return t1 - t0, t2 - t1, ppl, int((~finite).sum())


def kenlm(corpus, tools: Path, orders=(3, 5)) -> dict:
    """Test perplexity of KenLM's lmplz + query on our exported streams, and ours, per order."""
    from nplm_edu.data.corpus import export
    from nplm_edu.data.vocab import UNK

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = export(corpus, Path(tmp))
        for s in ("train", "test"):  # one line each: no sentence boundaries inside the stream
            words = paths[s].read_text(encoding="utf-8").split()
            Path(tmp, f"{s}.oneline.txt").write_text(" ".join("UNKWORD" if w == UNK else w for w in words) + "\n",
                                                     encoding="utf-8")
        for n in orders:
            arpa = Path(tmp, f"kn{n}.arpa")
            subprocess.run([str(tools / "lmplz"), "-o", str(n), "--text", str(Path(tmp, "train.oneline.txt")),
                            "--arpa", str(arpa)], check=True, capture_output=True)
            with open(Path(tmp, "test.oneline.txt"), "rb") as f:
                summary = subprocess.run([str(tools / "query"), "-v", "summary", str(arpa)], stdin=f, check=True,
                                         capture_output=True, text=True).stdout
            ppl = float(re.search(r"Perplexity including OOVs:\s*([\d.]+)", summary).group(1))
            ours_ppl = KneserNey(n, corpus.V).fit(corpus.train).perplexity(*corpus.windows("test", n))
            out[str(n)] = {"kenlm_test_perplexity": round(ppl, 3), "ours_test_perplexity": round(ours_ppl, 3)}
            print(f"order {n}: KenLM lmplz + query test perplexity {ppl:.1f}, ours {ours_ppl:.1f}")
    return out


STARTED = time.monotonic()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--nltk-train", type=int, default=20_000, help="training tokens for the nltk comparison")
    ap.add_argument("--nltk-test", type=int, default=300, help="test tokens nltk scores")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kenlm", help="folder with KenLM's lmplz and query (default: both on PATH; skipped if absent)")
    ap.add_argument("--json", help="also write the results here (e.g. data/results/bench_ngram.json)")
    a = ap.parse_args()
    found = shutil.which("lmplz")
    tools = Path(a.kenlm) if a.kenlm else (Path(found).parent if found else None)
    if tools is not None and not ((tools / "lmplz").is_file() and (tools / "query").is_file()):
        if a.kenlm:  # named explicitly: its absence is an error, found before anything runs
            ap.error(f"--kenlm {a.kenlm}: no lmplz and query there (KenLM's build/bin folder)")
        tools = None
    load_before = list(os.getloadavg())
    try:
        c = load_corpus("brown")
    except UserError as e:  # no Brown in NLTK_DATA: the one line that says how to get it
        sys.exit(f"error: {e}")
    n = a.order
    ctx, tgt = c.windows("test", n)
    print(f"Brown: {len(c.train):,} training tokens, {len(tgt):,} test tokens scored, |V| = {c.V:,}, order {n}")
    runs = [ours(c.train, ctx, tgt, n, c.V) for _ in range(a.repeats)]
    fit_s, score_s, ppl = min(runs, key=lambda r: r[0] + r[1])
    total = fit_s + score_s
    print(f"ours, full Brown : fit {fit_s:.2f} s + test scoring {score_s:.2f} s = {total:.2f} s "
          f"(best of {a.repeats}; target < 15 s: {'met' if total < 15 else 'NOT met'}), test perplexity {ppl:.2f}")

    train = c.train[: a.nltk_train]
    sctx, stgt = windows(np.concatenate([train[-(n - 1):], c.test[: a.nltk_test]]), n)
    nf, ns, nppl, ninf = nltk_kn(c.vocab.words, train, sctx, stgt, n)
    of, os_, oppl = min((ours(train, sctx, stgt, n, c.V) for _ in range(a.repeats)), key=lambda r: r[0] + r[1])
    per_nltk = (nf + ns) / len(stgt)
    per_ours_slice = (of + os_) / len(stgt)
    per_ours_full = total / len(tgt)
    print(f"slice: {len(train):,} training tokens, {len(stgt)} test tokens scored")
    print(f"  nltk.lm KneserNeyInterpolated: fit {nf:.2f} s + scoring {ns:.2f} s -> {1e3 * per_nltk:.3f} ms/token "
          f"(perplexity {nppl:.1f} over its {len(stgt) - ninf} finite scores; a different smoothing)")
    print(f"  ours on the same slice       : fit {of:.4f} s + scoring {os_:.4f} s -> {1e3 * per_ours_slice:.4f} ms/token "
          f"(perplexity {oppl:.1f})")
    print(f"  ours on full Brown           : {1e3 * per_ours_full:.5f} ms/token (fit included)")
    print(f"speed-up per token scored: {per_nltk / per_ours_slice:,.0f}x on the same slice, "
          f"{per_nltk / per_ours_full:,.0f}x against our full-Brown rate (target >= 100x)")
    print("(shared 2-core machine: timings are noisy)")
    kenlm_rows = kenlm(c, tools) if tools else None
    if tools is None:
        print("KenLM's lmplz and query not on PATH (--kenlm DIR names their folder): comparison skipped")
    if a.json:
        from nplm_edu.experiments.common import command_line, write_results

        write_results(Path(a.json), {
            "load_average_before": load_before, "load_average_after": list(os.getloadavg()),
            "order": n, "repeats": a.repeats,
            "full_brown": {"train_tokens": int(len(c.train)), "test_tokens_scored": int(len(tgt)),
                           "fit_seconds": round(fit_s, 3), "test_seconds": round(score_s, 3),
                           "total_seconds": round(total, 3), "test_perplexity": round(ppl, 3),
                           "target_seconds": 15, "target_met": total < 15},
            "slice": {"train_tokens": int(len(train)), "test_tokens_scored": int(len(stgt)),
                      "nltk_fit_seconds": round(nf, 3), "nltk_scoring_seconds": round(ns, 3),
                      "nltk_ms_per_token": round(1e3 * per_nltk, 4),
                      "ours_ms_per_token_same_slice": round(1e3 * per_ours_slice, 5),
                      "ours_ms_per_token_full_brown": round(1e3 * per_ours_full, 6),
                      "speedup_same_slice": round(per_nltk / per_ours_slice, 1),
                      "speedup_vs_full_brown_rate": round(per_nltk / per_ours_full, 1),
                      "target_speedup": 100, "target_met": per_nltk / per_ours_slice >= 100},
            **({"kenlm": {"orders": kenlm_rows,
                          "note": "lmplz (interpolated modified Kneser-Ney) and query from PyPI's kenlm 0.3.0 sdist, "
                                  "on our exported streams joined into one line each; KenLM adds <s> and </s>, "
                                  "starts the test without the preceding validation words and knows only the "
                                  "training split's words"}} if kenlm_rows else {}),
            "note": "nltk.lm's KneserNeyInterpolated is a different smoothing (one discount): only speed is compared"},
            STARTED, command_line())
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
