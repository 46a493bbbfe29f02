"""Training speed of the Transformer language model: words/s of our training step and (when PyTorch is
installed) of the same model in PyTorch on the same shapes and threads; and, with ``--context``, our
time per word against the window length.

    .venv/bin/python benchmarks/bench_transformer.py [--seconds 10] [--threads 1,2] [--json F]
    .venv/bin/python benchmarks/bench_transformer.py --context [--json data/results/bench_transformer_context.json]

Shapes: |V| = 17,907 (Brown), m = 128, 4 heads, 2 blocks, d_ff = 512, the output tied to the table,
windows of 4 words (the NPLM's context; K = 128 windows a batch) and of 32 (K = 16): 512 predicted
words a batch. One step is what the trainer does per batch (:meth:`nplm_edu.training.blocks.BlockBackend.update`):
the forward pass over K windows, the full softmax at all K T positions, the backward pass, the gradient
norm clipped at 1, Adam. PyTorch does the same with its own modules: ``nn.Embedding`` and a learned
position table, per block ``nn.LayerNorm``, bias-free ``nn.Linear`` queries, keys, values and output,
``scaled_dot_product_attention`` with the causal mask, ``nn.LayerNorm``, ``nn.Linear`` - GELU (tanh form)
- ``nn.Linear``; a final ``nn.LayerNorm``; logits from the tied table plus a bias; ``cross_entropy``
(mean over the K T words), ``clip_grad_norm_``, ``Adam``. On T threads our full softmax is split into T
blocks of output units (:mod:`nplm_edu.numerics.threads`). Ours and PyTorch's, on every thread count,
run in interleaved rounds (``threads_common.py``, a first round dropped, ``--rounds`` of ``--seconds``
each): a speed is the median over the rounds, a ratio the median of the rounds' ratios with its
quartiles; the load average before and after is reported.
Target: >= 1.0x PyTorch on 1 and 2 threads.

PyTorch is imported when installed, or from ``/tmp/threads/torch_site`` when that folder exists.
``--context`` times :func:`nplm_edu.analysis.transformer.time_per_word` for windows of 4 to 1,024 words
(:data:`WINDOWS`, one thread; chapter 12 draws the committed file) and writes its rows with the load
average and the other processes' share of the cores around them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_common import (METHOD, OthersMeter, import_torch, interleaved_rounds, ratio_of_rounds,  # noqa: E402
                            speed_fields, threads_from_argv, use_threads)

THREADS = threads_from_argv()  # before numpy and torch load

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nplm_edu.models.transformer import TransformerConfig  # noqa: E402
from nplm_edu.numerics.transformer import FastTransformer  # noqa: E402
from nplm_edu.training.blocks import BlockBackend  # noqa: E402
from nplm_edu.training.trainer import TrainConfig  # noqa: E402

V, WORDS = 17_907, 512
SHAPE = TransformerConfig(V=V, n_ctx=32, m=128, heads=4, layers=2, d_ff=512, tie=True)
CONTEXTS = (4, 32)  # the NPLM's window, and a long one
WINDOWS = (4, 16, 64, 256, 1024)  # --context: the window lengths chapter 12 draws


def batches(T: int, count: int = 4, seed: int = 0):
    """``count`` batches (X, Y) of K = WORDS // T windows of T word ids, drawn from a Zipf law (P(rank r) ~ 1/r)."""
    rng, p = np.random.default_rng(seed), 1.0 / np.arange(1, V + 1)
    K = WORDS // T
    return [(rng.choice(V, (K, T), p=p / p.sum()), rng.choice(V, (K, T), p=p / p.sum())) for _ in range(count)]


def numpy_step(T: int):
    """Our training step, as the trainer calls it."""
    from dataclasses import replace

    model = FastTransformer(replace(SHAPE, n_ctx=T))
    cfg = TrainConfig(batch=WORDS // T, lr=1e-3, optimizer="adam", weight_decay=0.0, tie=True)
    backend = BlockBackend(model, cfg, clip=1.0)
    return lambda X, Y: backend.update(X, Y, 1e-3)


def torch_step(T: int):
    """The same model and update in PyTorch (see the module docstring)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)
    c = SHAPE

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(c.m), nn.LayerNorm(c.m)
            self.q, self.k, self.v, self.o = (nn.Linear(c.m, c.m, bias=False) for _ in range(4))
            self.w1, self.w2 = nn.Linear(c.m, c.d_ff), nn.Linear(c.d_ff, c.m)

        def forward(self, x):
            K_, T_, _ = x.shape
            u = self.ln1(x)
            q, k, v = (f(u).view(K_, T_, c.heads, -1).transpose(1, 2) for f in (self.q, self.k, self.v))
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(K_, T_, c.m)
            x = x + self.o(z)
            return x + self.w2(F.gelu(self.w1(self.ln2(x)), approximate="tanh"))

    C, P = nn.Embedding(V, c.m), nn.Parameter(torch.empty(T, c.m).uniform_(-0.1, 0.1))
    blocks, ln_f, b = nn.ModuleList(Block() for _ in range(c.layers)), nn.LayerNorm(c.m), nn.Parameter(torch.zeros(V))
    params = [*C.parameters(), P, *blocks.parameters(), *ln_f.parameters(), b]
    opt = torch.optim.Adam(params, lr=1e-3)

    def step(X, Y):
        x = C(torch.from_numpy(X)) + P
        for block in blocks:
            x = block(x)
        y = ln_f(x) @ C.weight.T + b  # (K, T, |V|) the output tied to the table
        loss = F.cross_entropy(y.reshape(-1, V), torch.from_numpy(Y).reshape(-1))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    return step


def compare(torch_version, seconds: float, rounds: int) -> list[dict]:
    """Rows of words/s, every window length, thread count and contender once in each interleaved round:
    each speed the median over the rounds (``*_best``: the best round), a ratio the median of the rounds' ratios."""
    rows = []
    for T in CONTEXTS:
        steps = {"ours": numpy_step(T), **({"torch": torch_step(T)} if torch_version else {})}
        speeds = interleaved_rounds(steps, batches(T), THREADS, torch_version, seconds, rounds, warm_round=True,
                                    min_steps=1, warmup=0)
        for t in THREADS:
            sp = speeds[t]
            vs = ratio_of_rounds(sp["ours"], sp["torch"]) if torch_version else {"median": None, "iqr": None}
            rows.append({"n_ctx": T, "K": WORDS // T, "threads": t, "rounds": len(sp["ours"]),
                         **speed_fields(sp["ours"], "ours_words_per_s"),
                         **(speed_fields(sp["torch"], "torch_words_per_s") if torch_version else
                            {"torch_words_per_s": None}),
                         "ours_over_torch": vs["median"], "ours_over_torch_iqr": vs["iqr"]})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--seconds", type=float, default=1.0, help="time per measurement in each round (at least one step)")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (the medians are kept)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--context", action="store_true", help="time per word against the window length instead")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    started, load_before, others = time.monotonic(), list(os.getloadavg()), OthersMeter()
    if args.context:
        from nplm_edu.analysis.transformer import time_per_word

        use_threads(1, None)
        doc = {"shape": {k: v for k, v in vars(SHAPE).items() if k != "n_ctx"}, "words_per_batch": WORDS,
               "rows": time_per_word(SHAPE, contexts=WINDOWS, words=WORDS)}
        for r in doc["rows"]:
            print(f"n_ctx {r['n_ctx']:4d}  {r['us_per_word']:9.1f} us a word  (attention {r['attention_us_per_word']:.1f})")
    else:
        torch_version = import_torch(args.no_torch)
        print(f"threads {THREADS}; torch: {torch_version or 'not installed (skipped)'}; load average {load_before[0]:.2f}")
        doc = {"threads": THREADS, "torch": torch_version, "method": METHOD,
               "rows": compare(torch_version, args.seconds, args.rounds)}
    doc.update(load_average_before=load_before, load_average_after=list(os.getloadavg()),
               others_cpu_share=round(others.share(), 3))
    print(f"load average before {load_before[0]:.2f}, after {doc['load_average_after'][0]:.2f}; {others.line()}")
    if args.json:
        from nplm_edu.experiments.common import command_line, write_results

        write_results(Path(args.json), doc, started, command=command_line())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
