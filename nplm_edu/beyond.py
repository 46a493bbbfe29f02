"""``python -m nplm_edu reproduce beyond``: one row of Table 1 trained with what we know now (issue 6).

The paper's network (section 2) on the same Brown split and vocabulary as :mod:`nplm_edu.table1`
(|V| = 17,907), larger than any of Table 1's (n = 5, h = 200, m = 60, no direct connections),
trained longer, then mixed with the deleted-interpolation trigram and with our modified Kneser-Ney
5-gram, with weights fitted by EM on validation instead of the paper's 0.5 (section 4's mixture,
:mod:`nplm_edu.mixture`; the 0.5 mix is reported too). The model reported is the one with the lowest
validation perplexity among the network and its mixtures. The goal stated in the issue: a test
perplexity of at most 0.72 of our Kneser-Ney 5-gram's (data/results/ngrams.json).

The trainer, :func:`nplm_edu.modern.train_modern`, offers Adam and dropout on x and a
(``--optimizer adam``, ``--dropout``). The defaults of this command are the settings of
data/results/beyond.json, which uses the paper's SGD rule without dropout, with an
lr decaying by 0.8 per epoch, because Adam lost to SGD in short trials of the same network (the
first 200,000 training tokens of Brown, the first 40,000 validation tokens, three epochs), each
written by its command into data/results/beyond_trials/ and shown in chapter 8: Adam fits the
training set faster but generalizes worse. Other variants tried by hand (heavier dropout, tied
U = C, other weight decays) did no better; they were not recorded. Commands::

    python -m nplm_edu reproduce beyond                  # Brown, about an hour on one core: beyond.json
    python -m nplm_edu reproduce beyond --quick          # the same pipeline on a slice: beyond_quick.json
    python -m nplm_edu reproduce beyond --optimizer adam --lr 2e-3 --lr-decay 0.6 --batch 256 \\
        --weight-decay 0.1 --dropout-x 0.2 --dropout-a 0.3 --runs-dir /tmp/adam --out /tmp/adam.json

The run trains in ``<runs-dir>/<out stem>/`` (``--runs-dir``, default ``$NPLM_EDU_RUNS`` or
``~/.cache/nplm_edu/runs``) and checkpoints there after every epoch, every 10 minutes and on Ctrl-C;
rerunning the same command resumes. With a smaller ``--epochs`` than the checkpoint has done, it
trains nothing more and evaluates the best epoch so far. The JSON states every hyperparameter, the
history, train/valid/test perplexities, the mixtures, the ratios to our KN 5-gram, seconds, the
command, commit and machine.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from .errors import UserError
from .model import NPLM
from .modern import _TRAJECTORY, ModernConfig, train_modern

# the network and training of data/results/beyond.json (the defaults of `reproduce beyond`): the paper's SGD
# rule, a larger network, more epochs, no dropout (Adam + dropout lost to it in the short experiments:
# see the note in the JSON and the module docstring); for Adam pass e.g. --optimizer adam --lr 2e-3
# --lr-decay 0.6 --batch 256 --weight-decay 0.1 --dropout-x 0.2 --dropout-a 0.3
NETWORK = dict(n=5, h=200, m=60, direct=False)
DEFAULTS = ModernConfig(epochs=17, batch=128, lr=1.0, weight_decay=1e-4, dropout_x=0.0, dropout_a=0.0, lr_decay=0.8,
                        optimizer="sgd")
QUICK_EPOCHS = 2
TARGET_RATIO = 0.72  # issue 6: test perplexity at most 0.72 of our Kneser-Ney 5-gram's


class Default:
    """A default value that knows it was not typed: ``reproduce`` shares --lr, --batch and
    --weight-decay between targets, and beyond's defaults differ from table1's (see :func:`add_args`).
    Instances are ints or floats equal to table1's defaults, so table1 reads them unchanged."""

    __slots__ = ()

    @staticmethod
    def of(v):
        return _DefaultInt(v) if isinstance(v, int) else _DefaultFloat(v)


class _DefaultInt(int, Default):
    pass


class _DefaultFloat(float, Default):
    pass


def _given(args, name: str, default):
    v = getattr(args, name)
    return default if isinstance(v, Default) else v


def beyond_settings(args) -> tuple[dict, ModernConfig]:
    """(network, training config) from the command line; one clear error line for bad values."""
    net = dict(n=args.n, h=args.h, m=args.m, direct=args.direct)
    if args.tie and (args.h != args.m or args.direct):
        raise UserError(f"--tie needs --h equal to --m and --no-direct, got h={args.h}, m={args.m}")
    if args.h < 1:
        raise UserError(f"--h must be at least 1 (dropout on a needs a hidden layer), got {args.h}")
    for name, v in (("--dropout", args.dropout), ("--dropout-x", args.dropout_x), ("--dropout-a", args.dropout_a)):
        if v is not None and not 0 <= v < 1:
            raise UserError(f"{name} must lie in [0, 1), got {v}")
    both = args.dropout
    px = args.dropout_x if args.dropout_x is not None else both if both is not None else DEFAULTS.dropout_x
    pa = args.dropout_a if args.dropout_a is not None else both if both is not None else DEFAULTS.dropout_a
    epochs = args.epochs if args.epochs is not None else (QUICK_EPOCHS if args.quick else DEFAULTS.epochs)
    cfg = ModernConfig(epochs=epochs, batch=int(_given(args, "batch", DEFAULTS.batch)),
                       lr=_given(args, "lr", DEFAULTS.lr),
                       beta1=args.beta1, beta2=args.beta2, eps=DEFAULTS.eps,
                       weight_decay=_given(args, "weight_decay", DEFAULTS.weight_decay), dropout_x=px, dropout_a=pa,
                       lr_decay=args.lr_decay, patience=int(_given(args, "patience", DEFAULTS.patience)),
                       tie=args.tie, optimizer=args.optimizer, seed=args.seed)
    cfg.validate()
    from .model import NPLMConfig

    NPLMConfig(V=2, **net).validate()
    return net, cfg


def describe(net: dict, cfg: ModernConfig, others=()) -> str:
    """One sentence for the JSON: what was trained and how, from the settings themselves."""
    rule = ("Adam (weight decay decoupled, AdamW)" if cfg.optimizer == "adam"
            else "the paper's SGD rule (weight decay coupled, never on b, d)")
    drop = (f"inverted dropout {cfg.dropout_x:g} on x and {cfg.dropout_a:g} on a" if cfg.dropout_x or cfg.dropout_a
            else "no dropout")
    names = {"kn5": "modified Kneser-Ney 5-gram"}
    mixes = "the deleted-interpolation trigram" + "".join(f" and the {names.get(o, o)}" for o in others)
    return (f"the paper's network (section 2) with n = {net['n']}, h = {net['h']}, m = {net['m']}, "
            f"{'with' if net['direct'] else 'no'} direct connections{', U tied to C' if cfg.tie else ''}; trained "
            f"with {rule}, K = {cfg.batch}, lr {cfg.lr:g} x {cfg.lr_decay:g} per epoch, weight decay "
            f"{cfg.weight_decay:g}, {drop}, at most {cfg.epochs} epochs with early stopping on validation; mixed with "
            f"{mixes} by weights fitted by EM on validation")


def run_beyond(args) -> Path:
    """Train the network (resuming from its run folder if a checkpoint is there), score it alone and
    mixed with the deleted-interpolation trigram (weight 0.5, one EM weight and EM weights per bin,
    fitted on validation) and with our Kneser-Ney 5-gram (EM weights), choose on validation, compare
    the choice's test perplexity with the Kneser-Ney 5-gram's, write the JSON."""
    import json
    import shutil
    from datetime import datetime, timezone

    from .model import NPLMConfig
    from .reproduce import RESULTS, command_line, git_commit, package_modified
    from .table1 import (_fit_trigram, _r, evaluate_row, kn5_test, machine, runs_root, table_corpus,
                         write_json_atomic)

    net, cfg = beyond_settings(args)
    corpus = table_corpus(args)
    out = Path(args.out) if args.out else RESULTS / ("beyond_quick.json" if args.quick else "beyond.json")
    run_dir = runs_root(args) / out.stem
    tokens = {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")}
    full_brown = (corpus.name == "brown" and not args.quick and args.min_count == 4
                  and (tokens["train"], tokens["valid"]) == (800_000, 200_000))
    mcfg = NPLMConfig(V=corpus.V, seed=cfg.seed, **net)
    stamp_data = {"model": asdict(mcfg), "train": {k: getattr(cfg, k) for k in _TRAJECTORY},
                  "corpus": corpus.name, "tokens": tokens, "min_count": args.min_count}
    stamp, ckpt = run_dir / "run_config.json", run_dir / "checkpoint.npz"
    if ckpt.exists():
        old = json.loads(stamp.read_text()) if stamp.exists() else None
        if old != stamp_data and not (args.force or args.quick):
            raise UserError(f"{run_dir} holds a run with other settings: pass --force to train from scratch, "
                            "or another --runs-dir")
        if old != stamp_data or args.force:
            shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(stamp, stamp_data)
    model = NPLM(mcfg)
    resumed = ckpt.exists()
    if not args.quiet:
        print(f"== beyond: {corpus.name}, |V| = {corpus.V:,}; n {mcfg.n}, h {mcfg.h}, m {mcfg.m}, direct "
              f"{mcfg.direct}, {model.num_params():,} parameters; {cfg.optimizer} lr {cfg.lr:g} "
              f"(x{cfg.lr_decay:g} per epoch), "
              f"K {cfg.batch}, dropout x {cfg.dropout_x:g} a {cfg.dropout_a:g}, weight decay {cfg.weight_decay:g}; "
              f"{'resuming' if resumed else 'training'} in {run_dir}", flush=True)

    def progress(h):
        write_json_atomic(run_dir / "history.json", h)

    t0 = time.perf_counter()
    history = train_modern(model, corpus, cfg, out_dir=run_dir, resume=True, quiet=args.quiet, on_epoch=progress)
    t_train = time.perf_counter() - t0
    epochs = history["epochs"]
    if not epochs:
        raise UserError("no epoch finished: nothing to evaluate")
    if not args.quiet:
        print("   scoring train, valid and test; fitting the trigram and the mixture weight", flush=True)
    doc = {}
    t0 = time.perf_counter()
    tri, train_counts = _fit_trigram(corpus, doc, full_brown)
    others = {}
    if mcfg.n >= 5:  # what we know now: mix with the strongest n-gram too, modified Kneser-Ney 5-gram
        from .ngram import KneserNey

        others["kn5"] = KneserNey(5, corpus.V).fit(corpus.train)
    ev = evaluate_row(model, tri, corpus, train_counts, others)
    t_eval = time.perf_counter() - t0
    kn5 = kn5_test(corpus, full_brown)
    best = min(range(len(epochs)), key=lambda i: epochs[i]["valid_ppl"]) + 1
    mix = {k: {kk: (_r(vv) if kk != "weights" else vv) for kk, vv in v.items()} for k, v in ev["mix"].items()}
    # the model we would submit is chosen on validation: the network alone or one of its mixtures
    candidates = {"network": ev["valid"], **{f"mix_{k}": v["valid"] for k, v in ev["mix"].items()}}
    chosen = min(candidates, key=candidates.get)
    tests = {"network": ev["test"], **{f"mix_{k}": v["test"] for k, v in ev["mix"].items()}}
    ratios = None
    if kn5:
        ratios = {**{k: _r(v / kn5) for k, v in tests.items()}, "trigram": _r(doc["trigram"]["test"] / kn5)}
    doc = {
        "row": "beyond", "corpus": corpus.name, "V": corpus.V, "tokens": tokens, "quick": bool(args.quick),
        "what": describe(net, cfg, sorted(others)),
        "model": asdict(mcfg),
        "training": {**asdict(cfg), "lr_schedule": "lr * lr_decay^epoch",
                     "optimizer_rule": ("Adam (Kingma & Ba 2015), weight decay decoupled (AdamW) on C, H, U, W only"
                                        if cfg.optimizer == "adam" else "SGD, the paper's rule: p -= lr (g + "
                                        "weight_decay p) on C, H, U, W, p -= lr g on b, d"),
                     "examples_per_epoch": cfg.examples_per_epoch or int(len(corpus.train) - mcfg.n + 1)},
        "parameters": model.num_params() - (model.params["U"].size if cfg.tie else 0),
        "epochs_requested": cfg.epochs, "epochs_run": len(epochs),
        "best_epoch": best, "stopped_early": history["stopped_early"], "updates": history["updates"],
        "resumed": resumed,
        "train": _r(ev["train"]), "valid": _r(ev["valid"]), "test": _r(ev["test"]),
        "mixtures": mix, "mix_weight_em": _r(ev["mix"]["em"]["weight"]), "trigram": doc["trigram"],
        "table1": _table1_rows(RESULTS / "table1.json") if full_brown else None,
        "kn5_test": kn5, "target_ratio": TARGET_RATIO, "test_over_kn5": ratios,
        "chosen_on_valid": chosen, "chosen_test": _r(tests[chosen]),
        "target_met": None if ratios is None else {k: ratios[k] <= TARGET_RATIO for k in ("network", chosen)},
        "test_by_frequency": ev["test_by_frequency"],
        "history": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in e.items()} for e in epochs],
        "seconds": round(sum(e["seconds"] for e in epochs) + t_eval, 1),
        "seconds_training_this_call": round(t_train, 1),
        "seconds_training": round(sum(e["seconds"] for e in epochs), 1), "seconds_evaluation": round(t_eval, 1),
        "note": "train_ppl in history is measured during each epoch (with dropout, if any); train/valid/test "
                "are the best epoch's parameters with dropout off, over every token of each split; mixtures: "
                "weight 0.5 (the paper's) and one EM weight fitted on validation (also one weight per trigram "
                "context bin); seconds are wall clock on a shared machine",
        "command": command_line(), "commit": git_commit(), "package_modified_since_commit": package_modified(),
        "machine": machine(), "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json_atomic(out, doc)
    if not args.quiet:
        r = ratios or {}
        print(f"beyond: train {ev['train']:.1f}  valid {ev['valid']:.1f}  test {ev['test']:.1f}"
              + (f"  (test / KN5 {r['network']:.3f})" if r else ""))
        for k, v in ev["mix"].items():
            w = f"weight {v['weight']:.3f}" if "weight" in v else "weights per bin"
            print(f"mixed ({k}, {w}): valid {v['valid']:.1f}  test {v['test']:.1f}"
                  + (f"  (test / KN5 {r['mix_' + k]:.3f})" if r else ""))
        print(f"chosen on validation: {chosen}, test {tests[chosen]:.1f}"
              + (f" = {r[chosen]:.3f} of KN5 (target {TARGET_RATIO})" if r else ""))
    print(f"wrote {out}")
    return out


def _table1_rows(path: Path) -> dict | None:
    """The paper-faithful networks of data/results/table1.json, for comparison: test perplexity alone
    and mixed with the trigram by the EM weight."""
    import json

    try:
        rows = json.loads(path.read_text())["rows"]
        return {r: {"test": rows[r]["test"], "mix_em_test": rows[r]["mixtures"]["em"]["test"],
                    "mix_em_weight": rows[r]["mixtures"]["em"]["weight"]} for r in ("MLP1", "MLP9") if r in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def add_args(p) -> None:
    """The options of ``reproduce beyond`` that no other target has. It shares --epochs, --seed, --quick,
    --force, --runs-dir with table1, and reads --lr, --batch, --weight-decay and --patience with its own
    defaults (those of ``DEFAULTS``: the settings of data/results/beyond.json)."""
    p.add_argument("--n", type=int, default=NETWORK["n"], help=f"beyond: order n (default {NETWORK['n']})")
    p.add_argument("--h", type=int, default=NETWORK["h"], help=f"beyond: hidden units (default {NETWORK['h']})")
    p.add_argument("--m", type=int, default=NETWORK["m"], help=f"beyond: features per word (default {NETWORK['m']})")
    p.add_argument("--direct", action=argparse_bool(), default=NETWORK["direct"],
                   help="beyond: direct connections W x (default: off)")
    p.add_argument("--dropout", type=float, default=None,
                   help=f"beyond: dropout probability on both x and a (default x {DEFAULTS.dropout_x}, "
                        f"a {DEFAULTS.dropout_a})")
    p.add_argument("--dropout-x", type=float, default=None, help="beyond: dropout probability on x")
    p.add_argument("--dropout-a", type=float, default=None, help="beyond: dropout probability on a")
    p.add_argument("--beta1", type=float, default=DEFAULTS.beta1, help="beyond: Adam's beta1 (default 0.9)")
    p.add_argument("--beta2", type=float, default=DEFAULTS.beta2, help="beyond: Adam's beta2 (default 0.999)")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default=DEFAULTS.optimizer,
                   help="beyond: sgd (default: the paper's rule, weight decay coupled as in table1) or adam "
                        "(weight decay decoupled)")
    p.add_argument("--tie", action=argparse_bool(), default=DEFAULTS.tie,
                   help="beyond: output vectors U tied to the word features C (needs h = m, no direct)")
    p.add_argument("--lr-decay", type=float, default=DEFAULTS.lr_decay,
                   help=f"beyond: lr multiplied by this after every epoch (default {DEFAULTS.lr_decay})")
    # --lr, --batch, --weight-decay, --patience come from table1 with its defaults; mark those as "not typed"
    # so that beyond uses its own (an explicit value, even equal to table1's, is a plain number)
    p.set_defaults(**{k: Default.of(v) for k, v in
                      (("lr", p.get_default("lr")), ("batch", p.get_default("batch")),
                       ("weight_decay", p.get_default("weight_decay")), ("patience", p.get_default("patience")))})


def argparse_bool():
    import argparse

    return argparse.BooleanOptionalAction
