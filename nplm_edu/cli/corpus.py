"""``python -m nplm_edu corpus``: inspect a corpus or export the exact token streams the models see;
and what the subcommands share: the corpus options, the --json report file of mix and ngram."""

from __future__ import annotations

from pathlib import Path

from ..data.corpus import BROWN_SPLIT, Corpus, CorpusSpec, export
from ..data.files import new_folder_removed_on_failure
from ..data.vocab import UNK
from ..errors import UserError
from ..experiments.common import check_output_path, write_json_atomic
from ..experiments.skeleton import check_not_over
from ..training.checkpoint import check_writable
from ..training.guards import sigterm_as_ctrl_c


def split_size(text: str) -> float | int:
    """argparse type: '800000' -> 800000 (a count), '0.8' -> 0.8 (a fraction)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise UserError(f"a split size is a token count or a fraction, got {text!r}") from None


def add_corpus_args(p, default_corpus: str | None = None, brown_slice: tuple[int, int] | None = None) -> None:
    """The corpus options every subcommand shares (defaults from :class:`CorpusSpec`); ``brown_slice``:
    the (train, valid) token counts a target uses on Brown when the sizes are not given."""
    d = CorpusSpec()
    corpus = default_corpus or d.corpus
    train, valid = brown_slice or BROWN_SPLIT
    p.add_argument("--corpus", default=corpus, help=f"brown, synthetic or a UTF-8 text file (default {corpus})")
    p.add_argument("--train-size", type=split_size, default=d.train_size, metavar="N|F",
                   help=f"training tokens (count) or fraction (default: {train} on Brown, 0.8 otherwise)")
    p.add_argument("--valid-size", type=split_size, default=d.valid_size, metavar="N|F",
                   help=f"validation tokens or fraction (default: {valid} on Brown, 0.1 otherwise)")
    p.add_argument("--test-size", type=split_size, default=d.test_size, metavar="N|F",
                   help="test tokens or fraction, after the validation split (default: the rest of the corpus)")
    p.add_argument("--min-count", type=int, default=d.min_count,
                   help=f"words seen fewer times become <unk> (default {d.min_count}: 'seen 3 times or fewer')")
    p.add_argument("--corpus-seed", type=int, default=d.corpus_seed,
                   help=f"seed of the synthetic corpus (default {d.corpus_seed})")
    p.add_argument("--synthetic-tokens", type=int, default=d.synthetic_tokens,
                   help=f"size of the synthetic corpus in tokens (default {d.synthetic_tokens})")


def corpus_spec(args) -> CorpusSpec:
    """The corpus options of a parsed command line as a :class:`CorpusSpec`."""
    return CorpusSpec(corpus=args.corpus, train_size=args.train_size, valid_size=args.valid_size,
                      test_size=args.test_size, min_count=args.min_count, corpus_seed=args.corpus_seed, synthetic_tokens=args.synthetic_tokens)


def corpus_input(args) -> dict:
    """The corpus file the options read, as ``{"--corpus": path}`` (empty for brown and synthetic): an input
    no output may overwrite. A path that is not a regular file (a pipe such as ``<(cat f.txt)``, a device)
    is refused in one line: the corpus is read more than once."""
    name = getattr(args, "corpus", None)
    if not name or name in ("brown", "synthetic"):
        return {}
    path = Path(name)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise UserError(f"--corpus {name} is not a regular file (a pipe or a device?): the corpus is read more "
                        "than once, so save it to a file first")
    return {"--corpus": path} if path.exists() else {}


def check_json_out(path, inputs: dict) -> None:
    """Before any work: the report file ``--json`` names (None: not given) is none of ``inputs`` (nor
    inside one) and can be written."""
    if path:
        check_not_over({"--json": path}, inputs)
        check_output_path(path, "--json")


def write_json_out(path, doc: dict) -> None:
    """The report ``doc`` into the file ``--json`` names (None: not given), and a line saying so."""
    if path:
        print(f"wrote {write_json_atomic(path, doc)}")


def corpus_from_args(args) -> Corpus:
    """The corpus the options name; reading a large text file shows a bar (on rank 0 under mpiexec)
    unless ``--quiet``."""
    from . import mpi_rank

    corpus_input(args)
    return corpus_spec(args).load(progress=not getattr(args, "quiet", False) and mpi_rank() == 0)


def _cmd_info(args) -> int:
    c = corpus_from_args(args)
    info = c.info()
    print(f"corpus {info['corpus']}: {info['tokens']:,} tokens, |V| = {info['V']:,} (with {UNK})")
    for s in ("train", "valid", "test"):
        print(f"  {s:<6} {info[s]['tokens']:>10,} tokens   unknown-word rate {100 * info[s]['unk_rate']:.2f}%")
    return 0


def _cmd_export(args) -> int:
    # a corpus that cannot be read, or Ctrl-C or SIGTERM, leaves no folder of ours behind and no file cut short
    inputs = corpus_input(args)
    for name in ("train.txt", "valid.txt", "test.txt"):  # the files export writes: none may be the corpus read
        check_not_over({"--out": Path(args.out) / name}, inputs)
    with new_folder_removed_on_failure(args.out), sigterm_as_ctrl_c():
        check_writable(args.out)  # before the corpus is read
        c = corpus_from_args(args)
        paths = export(c, Path(args.out))
    for s, p in paths.items():
        print(f"wrote {p} ({len(c.split(s)):,} tokens)")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("corpus", help="inspect or export a corpus",
                              description="Inspect a corpus or export the exact token streams the models see.")
    sub = p.add_subparsers(dest="action", required=True, metavar="{info,export}")
    info = sub.add_parser("info", help="token counts per split, |V|, unknown-word rates",
                          description="Load a corpus and print its vocabulary size |V| and, for each split "
                                      "(train, valid, test), its tokens and unknown-word rate.")
    add_corpus_args(info)
    info.set_defaults(func=_cmd_info)
    ex = sub.add_parser("export", help="write train.txt, valid.txt, test.txt (one paragraph per line)",
                        description="Write the token streams the models see, rare words already <unk>, "
                                    "to DIR/train.txt, DIR/valid.txt and DIR/test.txt, one paragraph per line, so that "
                                    "other toolkits score the very same data.")
    add_corpus_args(ex)
    ex.add_argument("--out", required=True, metavar="DIR", help="output folder (created if missing)")
    ex.set_defaults(func=_cmd_export)
