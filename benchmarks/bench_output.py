"""Speed of the output layers after 2003 against the paper's full softmax: one training step, and the
exact evaluation, at the shapes of Brown's MLP9 (n 5, h 100, m 30, no direct connections, |V| = 17,907,
K = 128), side by side in one process.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_output.py [--rounds 7] [--steps 20] [--json PATH]

One "step" is the whole training update of a batch (forward, backward, the paper's SGD rule with weight
decay): :meth:`FusedNPLM.sgd_update` for the full softmax, :meth:`SparseNPLM.sgd_update` for the others.
The batches are real Brown training windows (the same ones for every method) when NLTK's Brown corpus
is installed, else windows drawn from a Zipf unigram over 17,907 words (then the classes come from
frequency binning only). The methods are timed in alternating rounds (each round times every method
for ``--steps`` steps) and each method's median round is kept, so a change of the machine's load
hits all methods alike; the ratios are full / method. The evaluation times log P(target) over 20
batches of 1,024 test windows (the exact test perplexity's inner loop).

``--reference`` times instead what the batched class-factored and tree layers buy over their readable
references (:mod:`nplm_edu.models.reference_layers`, one example at a time): the loss and gradients
of the output layer alone on batches of K = 128 at h = 100, classes by frequency binning and the
Huffman tree on the training counts, side by side in alternating rounds (CPU time: the fairer
measure when other processes share the cores), and prints reference / fast (``--json``: also writes
them, e.g. to ``data/results/bench_output_reference.json``).

``--adaptive`` times instead the adaptive softmax's training step (Grave et al. 2017; the cutoffs of
``reproduce output-layers``: a head of the 2,000 most frequent words, tails from frequency ranks 2,000
and 6,000 reading h/4 and h/16 features) against PyTorch's ``nn.AdaptiveLogSoftmaxWithLoss`` with the
same cutoffs, ``div_value`` 4 and a head bias (its tails have none), in the same MLP9 network
(``nn.Embedding``, ``nn.Linear``, tanh; SGD with weight decay on the weights), on 1 and 2 threads
(``--threads``), and against the readable layer's step (as under ``--reference``, now on every thread
count: what the fast step's split of the head over the threads buys): the three, on every thread
count, run in interleaved rounds (``threads_common.py``, a first
round dropped; ``--rounds``, ``--seconds`` per measurement): a speed is the median over the rounds, a
ratio the median of the rounds' ratios with its quartiles (wall clock). PyTorch is
used when installed or in ``/tmp/threads/torch_site``; target: ours >= 1.0x PyTorch's examples/s.

Targets (one BLAS thread, an idle machine): training class-factored >= 10x, tree >= 15x, importance
sampling and NCE >= 5x faster than the full softmax; exact evaluation with the class-factored layer
>= 20x faster.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_common import (METHOD, OthersMeter, import_torch, interleaved_rounds,  # noqa: E402
                            ratio_of_rounds, speed_fields, threads_from_argv)

if "--adaptive" in sys.argv:
    THREADS = threads_from_argv()  # before numpy and torch load: their pools can grow to the most
else:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # thread pools are sized when numpy loads: one thread unless told

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from nplm_edu.experiments.output_methods import ADAPTIVE_DIV, build_model  # noqa: E402
from nplm_edu.experiments.output_layers import NETWORK, OutputLayersOptions  # noqa: E402
from nplm_edu.models.nplm import NPLMConfig  # noqa: E402

V, K = 17_907, 128
TARGETS = {"class-frequency": 10, "class-exchange": 10, "tree-huffman": 15, "tree-cluster": 15, "is": 5,
           "is-adaptive": 5, "nce": 5}
EVAL_TARGETS = {"class-frequency": 20, "class-exchange": 20}


def corpus_or_zipf():
    """Brown (the paper's split) if installed, else a Zipf stream of 17,907 words: (corpus-like, is_brown)."""
    from nplm_edu.data.corpus import Corpus, CorpusSpec, Vocabulary
    from nplm_edu.errors import UserError

    try:
        return CorpusSpec(corpus="brown").load(), True
    except UserError:
        rng = np.random.default_rng(0)
        p = 1 / np.arange(1, V + 1)
        ids = rng.choice(V, 1_000_000, p=p / p.sum()).astype(np.int32)
        words = [f"w{i}" for i in range(V - 1)] + ["<unk>"]
        return Corpus("zipf", Vocabulary(words, np.bincount(ids, minlength=V)), ids, (800_000, 900_000)), False


def median_rounds(steps: dict, data, rounds: int, per_round: int) -> tuple[dict, dict]:
    """Seconds per call of each function, wall clock and this process's CPU time: the medians over
    ``rounds`` alternating rounds (CPU time is the fairer measure when other processes share the cores)."""
    wall, cpu = {name: [] for name in steps}, {name: [] for name in steps}
    for name, f in steps.items():  # warm-up
        for c, t in data[:2]:
            f(c, t)
    for r in range(rounds):
        for name, f in steps.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(per_round):
                c, t = data[(r * per_round + i) % len(data)]
                f(c, t)
            wall[name].append((time.perf_counter() - t0) / per_round)
            cpu[name].append((time.process_time() - c0) / per_round)
    med = lambda d: {name: float(np.median(v)) for name, v in d.items()}  # noqa: E731
    return med(wall), med(cpu)


def reference_ratios(corpus, rounds: int) -> list[dict]:
    """Seconds per batch of the readable references and the batched layers, and their ratio (CPU time)."""
    from nplm_edu.models.class_softmax import ClassSoftmax, default_n_classes, frequency_classes
    from nplm_edu.models.reference_layers import class_softmax_reference, tree_softmax_reference
    from nplm_edu.models.sparse_output import train_counts
    from nplm_edu.models.tree_softmax import TreeSoftmax
    from nplm_edu.models.trees import Tree, huffman_merges

    h, rng = NETWORK["h"], np.random.default_rng(0)
    counts = train_counts(corpus.train, corpus.V)
    cls = ClassSoftmax(corpus.V, h, frequency_classes(counts, default_n_classes(corpus.V)))
    tree = TreeSoftmax(corpus.V, h, Tree(huffman_merges(counts)))
    Pc, Pt = cls.init_params(rng, np.float32), tree.init_params(rng, np.float32)
    Uw, bw = Pc["U"][cls.pos], Pc["b"][cls.pos]  # word order, for the reference
    _, tgt = corpus.windows("train", NETWORK["n"])
    data = [(rng.standard_normal((K, h)).astype(np.float32), tgt[rng.integers(0, len(tgt), K)]) for _ in range(8)]

    def fast(layer, P):
        return lambda a, t: layer.backward_sparse(P, layer.loss(P, {"U": a}, t)[1])

    steps = {"class (reference)": lambda a, t: class_softmax_reference(Pc["U_class"], Pc["b_class"], Uw, bw,
                                                                        cls.labels, a, t),
             "class (batched)": fast(cls, Pc),
             "tree (reference)": lambda a, t: tree_softmax_reference(tree.tree, Pt["U_node"], Pt["b_node"], a, t),
             "tree (batched)": fast(tree, Pt)}
    wall, cpu = median_rounds(steps, data, rounds, 4)
    rows = []
    for name in ("class", "tree"):
        ref, fst = cpu[f"{name} (reference)"], cpu[f"{name} (batched)"]
        print(f"{name:6} output layer, loss and gradients of a batch of {K}: reference {1e3 * ref:7.2f} ms, "
              f"batched {1e3 * fst:6.2f} ms (CPU): {ref / fst:5.1f}x")
        rows.append({"layer": name, "reference_cpu_ms": round(1e3 * ref, 3), "batched_cpu_ms": round(1e3 * fst, 3),
                     "speedup_cpu": round(ref / fst, 2)})
    return rows


def finish(doc: dict, json_path, started: float, load_before: list, others: OthersMeter) -> None:
    """The load during the measurements added to ``doc``, printed, and ``doc`` written to ``json_path`` if given."""
    doc.update(load_average_before=load_before, load_average_after=list(os.getloadavg()),
               others_cpu_share=round(others.share(), 3))
    print(f"load average before {load_before[0]:.2f}, after {doc['load_average_after'][0]:.2f}; {others.line()}")
    if json_path:
        from nplm_edu.experiments.common import command_line, write_results

        write_results(json_path, doc, started, command_line())
        print(f"wrote {json_path}")


def run_reference(args) -> None:
    """``--reference``: the readable class and tree layers against the batched ones, printed (and written to --json)."""
    started, load_before, others = time.monotonic(), list(os.getloadavg()), OthersMeter()
    corpus, brown = corpus_or_zipf()
    rows = reference_ratios(corpus, args.rounds)
    doc = {"benchmark": "output layers, readable reference against batched", "V": corpus.V, "K": K,
           "h": NETWORK["h"], "batches": "brown" if brown else "zipf", "rounds": args.rounds, "rows": rows}
    finish(doc, args.json, started, load_before, others)


LR, WD = 0.01, 1e-4  # the step's learning rate and weight decay (ours and PyTorch's)


def torch_adaptive_step(net: NPLMConfig, layer):
    """PyTorch's MLP9 with ``nn.AdaptiveLogSoftmaxWithLoss`` on the layer's cutoffs: a training step on
    (contexts, targets) (targets mapped to their frequency ranks, the order PyTorch's cutoffs assume)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    C, H = nn.Embedding(net.V, net.m), nn.Linear((net.n - 1) * net.m, net.h)
    out = nn.AdaptiveLogSoftmaxWithLoss(net.h, net.V, layer.bounds[1:-1], div_value=float(ADAPTIVE_DIV),
                                        head_bias=True)
    weights = [C.weight, H.weight] + [p for name, p in out.named_parameters() if "bias" not in name]
    biases = [H.bias] + [p for name, p in out.named_parameters() if "bias" in name]
    opt = torch.optim.SGD([{"params": weights, "weight_decay": WD}, {"params": biases}], lr=LR)
    rank = torch.from_numpy(layer.rank)

    def step(contexts, targets):
        x = C(torch.from_numpy(contexts)).reshape(len(targets), -1)  # (K, (n-1) m)
        loss = out(torch.tanh(H(x)), rank[torch.from_numpy(targets)]).loss  # the mean NLL
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    return step


def adaptive_vs_torch(corpus, seconds: float, torch_version, rounds: int) -> list[dict]:
    """Examples/s of the adaptive softmax's training step on every thread count: ours (the fast step,
    :class:`nplm_edu.numerics.adaptive.AdaptiveNPLM`), the readable layer's (``readable``) and PyTorch's,
    in the same interleaved rounds; each ratio the median of the rounds' ratios with its quartiles."""
    from nplm_edu.numerics.sparse import SparseNPLM

    net = NPLMConfig(V=corpus.V, seed=0, **NETWORK)
    model, desc = build_model("adaptive", corpus, net, OutputLayersOptions(), quiet=True)
    readable = SparseNPLM(net, build_model("adaptive", corpus, net, OutputLayersOptions(), quiet=True)[0].output)
    steps = {"ours": lambda c, t: model.sgd_update(c, t, LR, WD),
             "readable": lambda c, t: readable.sgd_update(c, t, LR, WD)}
    if torch_version:
        steps["torch"] = torch_adaptive_step(net, model.output)
    speeds = interleaved_rounds(steps, train_batches(corpus, net.n, 16), THREADS, torch_version, seconds, rounds,
                                warm_round=True)
    rows = []
    for t, sp in speeds.items():  # each speed the median of the rounds, the ratio the median of the rounds' ratios
        vs = ratio_of_rounds(sp["ours"], sp["torch"]) if torch_version else {"median": None, "iqr": None}
        fast = ratio_of_rounds(sp["ours"], sp["readable"])
        rows.append({"threads": t, "cutoffs": desc["cutoffs"], "tail_features": desc["tail_features"],
                     "rounds": len(sp["ours"]), **speed_fields(sp["ours"], "ours_examples_per_s"),
                     **speed_fields(sp["readable"], "readable_examples_per_s"),
                     "ours_over_readable": fast["median"], "ours_over_readable_iqr": fast["iqr"],
                     **(speed_fields(sp["torch"], "torch_examples_per_s") if torch_version else
                        {"torch_examples_per_s": None}),
                     "ours_over_torch": vs["median"], "ours_over_torch_iqr": vs["iqr"]})
    for r in rows:
        print(f"adaptive softmax, MLP9, K = {K}, {r['threads']} thread(s): ours {r['ours_examples_per_s']:9,.0f} ex/s"
              f" (readable layer {r['readable_examples_per_s']:9,.0f} ex/s, fast/readable {r['ours_over_readable']:.2f})"
              + (f", PyTorch {r['torch_examples_per_s']:9,.0f} ex/s, ours/PyTorch {r['ours_over_torch']:.2f}"
                 if torch_version else ""), flush=True)
    return rows


def train_batches(corpus, n: int, count: int = 64, seed: int = 0) -> list:
    """``count`` batches (contexts, targets) of K training windows drawn at random (the same for every method)."""
    rng = np.random.default_rng(seed)
    ctx, tgt = corpus.windows("train", n)
    idx = [rng.integers(0, len(tgt), K) for _ in range(count)]
    return [(np.ascontiguousarray(ctx[i]), tgt[i].copy()) for i in idx]


def run_adaptive(args) -> None:
    """``--adaptive``: the adaptive softmax against PyTorch's on 1 and 2 threads, printed (and written to --json)."""
    started, load_before, others = time.monotonic(), list(os.getloadavg()), OthersMeter()
    torch_version = import_torch(args.no_torch)
    corpus, brown = corpus_or_zipf()
    print(f"threads {THREADS}; {'Brown' if brown else 'Zipf'} windows; torch: {torch_version or 'not installed (skipped)'}; "
          f"load average {load_before[0]:.2f}", flush=True)
    rows = adaptive_vs_torch(corpus, args.seconds, torch_version, args.rounds)
    doc = {"benchmark": "adaptive softmax against PyTorch", "method": METHOD, "V": corpus.V, "K": K, "network": dict(NETWORK),
           "batches": "brown" if brown else "zipf", "threads": THREADS, "torch": torch_version, "rows": rows}
    finish(doc, args.json, started, load_before, others)


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds (the median is kept)")
    ap.add_argument("--steps", type=int, default=20, help="training steps per method per round")
    ap.add_argument("--methods", default=",".join(["full", *TARGETS]), help="comma-separated methods")
    ap.add_argument("--json", help="also write the results here (e.g. data/results/bench_output.json)")
    ap.add_argument("--reference", action="store_true",
                    help="time the readable class and tree references against the batched layers instead")
    ap.add_argument("--adaptive", action="store_true",
                    help="time the adaptive softmax against PyTorch's nn.AdaptiveLogSoftmaxWithLoss instead")
    ap.add_argument("--threads", default="1,2", help="with --adaptive: thread counts, comma-separated (default 1,2)")
    ap.add_argument("--seconds", type=float, default=0.5,
                    help="with --adaptive: time per measurement in each round")
    ap.add_argument("--no-torch", action="store_true", help="with --adaptive: skip PyTorch even if installed")
    args = ap.parse_args()
    if args.reference:
        run_reference(args)
        return
    if args.adaptive:
        run_adaptive(args)
        return
    started = time.monotonic()
    from nplm_edu.experiments.common import command_line, write_results
    from nplm_edu.numerics.blas import blas_info

    corpus, brown = corpus_or_zipf()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if "full" not in methods:
        methods.insert(0, "full")
    if not brown:
        methods = [m for m in methods if m not in ("class-exchange", "tree-cluster")]  # no bigrams worth clustering
    net = NPLMConfig(V=corpus.V, seed=0, **NETWORK)
    models, layers = {}, {}
    cache = Path(tempfile.mkdtemp(prefix="bench_output."))  # the exchange classes, computed once
    for m in methods:
        print(f"building {m} ...", flush=True)
        models[m], layers[m] = build_model(m, corpus, net, OutputLayersOptions(), cache=cache, quiet=True)
    train = train_batches(corpus, net.n)
    vctx, vtgt = corpus.windows("test", net.n)
    eval_batches = [(np.ascontiguousarray(vctx[i:i + 1024]), vtgt[i:i + 1024].copy())
                    for i in range(0, 20 * 1024, 1024)]
    steps = {m: (lambda mod: lambda c, t: mod.sgd_update(c, t, 0.5, 1e-4))(models[m]) for m in methods}
    train_s, train_cpu = median_rounds(steps, train, args.rounds, args.steps)
    evals = {m: (lambda mod: lambda c, t: mod.log_prob(c, t))(models[m]) for m in methods}
    eval_s, eval_cpu = median_rounds(evals, eval_batches, max(3, args.rounds // 2), 2)
    blas = blas_info()
    print(f"\n|V| = {corpus.V:,}, K = {K}, MLP9, {'Brown windows' if brown else 'Zipf windows (no Brown)'}, "
          f"BLAS {blas['name']} on {blas['threads']} thread(s)")
    print(f"{'method':16} {'ms/step':>8} {'train ex/s':>11} {'x full':>7} {'(cpu)':>7} {'target':>7}   "
          f"{'eval ex/s':>10} {'x full':>7} {'(cpu)':>7} {'target':>7}")
    rows = []
    for m in methods:
        r = {"method": m, "layer": layers[m], "train_ms_per_step": round(1e3 * train_s[m], 3),
             "train_examples_per_s": round(K / train_s[m], 1),
             "speedup_vs_full": round(train_s["full"] / train_s[m], 2),
             "speedup_vs_full_cpu": round(train_cpu["full"] / train_cpu[m], 2), "target_speedup": TARGETS.get(m),
             "eval_examples_per_s": round(1024 / eval_s[m], 1),
             "eval_speedup_vs_full": round(eval_s["full"] / eval_s[m], 2),
             "eval_speedup_vs_full_cpu": round(eval_cpu["full"] / eval_cpu[m], 2), "eval_target": EVAL_TARGETS.get(m)}
        rows.append(r)
        t1 = f"{r['target_speedup']:>6}x" if r["target_speedup"] else f"{'':>7}"
        t2 = f"{r['eval_target']:>6}x" if r["eval_target"] else f"{'':>7}"
        print(f"{m:16} {r['train_ms_per_step']:8.2f} {r['train_examples_per_s']:11,.0f} {r['speedup_vs_full']:7.2f} "
              f"{r['speedup_vs_full_cpu']:7.2f} {t1}   {r['eval_examples_per_s']:10,.0f} {r['eval_speedup_vs_full']:7.2f} "
              f"{r['eval_speedup_vs_full_cpu']:7.2f} {t2}")
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    print(f"load average (1 min) at the end: {load}")
    if args.json:
        write_results(args.json, {"benchmark": "output layers", "V": corpus.V, "K": K, "network": dict(NETWORK),
                                  "batches": "brown" if brown else "zipf", "rounds": args.rounds,
                                  "steps_per_round": args.steps, "load_average_1min": load, "rows": rows}, started,
                      command_line())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
