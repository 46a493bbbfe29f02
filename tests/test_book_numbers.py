"""The figures the book's prose states agree with data/results/*.json, and its text speaks to readers.

Every figure the prose states from a results file is inserted with MyST-NB glue from a code cell
(GLUED below recomputes each such value from the JSON, so a regenerated result that moves a figure
fails until the cell that reads it is run again).

Many other figures, most of them in the exercises' solutions, are read off the stored outputs of the
notebook's own code cells (what a reader sees printed under a cell), which nbval holds equal to a
fresh run. OUTPUT_FIGURES ties them to those outputs: every row is (notebook, prose pattern, output
pattern, format). The prose pattern is searched in the chapter's markdown (all its pages, every run of white space
read as one space; a figure LaTeX prints as 17{,}907 reads as 17,907). The output pattern is searched in all the notebook's stored outputs as one text
(printed streams, ``text/plain``, and ``text/html`` with its tags stripped; every run of white space
one space); its first group captures a number as the output prints it. With format None the prose
must print exactly that text; with a format spec (".2f", ".0%") the output's number (commas and a
trailing % understood: "14%" is 0.14) is formatted as the prose prints it; a function receives all
the output pattern's groups, as numbers where they read as numbers, and returns what the prose must
say: a derivation (a difference, a ratio, the largest of several) or a figure in words ("a fifth",
"twenty-four", "fifteenth"). Both patterns must be found, and an output pattern must match one
place or all its matches must capture the same text, so that a row never reads a number from some
other table by accident. When a notebook is rerun and an output changes, the sentences that quote
it fail until they are updated.

The last part checks that no markdown cell of the book holds project vocabulary ("issue", a
"target" that is our own bar), a commit hash or a test marker, and that no code cell carries an
nbval comment marker (they belong in the cell's tags, where readers do not see them).
"""

import html
import json
import math
import os
import re
import statistics
from functools import lru_cache
from pathlib import Path

import pytest

from nplm_edu.analysis.quality import whole_epoch_cpu
from nplm_edu.analysis.transformer_rows import TRANSFORMERS


ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
RESULTS = ROOT / "data" / "results"


# --------------------------------------------------------------------------- reading the results
@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


def _select(items: list, spec: str):
    """The one element of ``items`` whose fields match ``spec`` ("model=kn,order=5")."""
    want = dict(kv.split("=", 1) for kv in spec.split(","))
    hits = [it for it in items if all(str(it.get(k)) == v for k, v in want.items())]
    assert len(hits) == 1, f"{len(hits)} elements match [{spec}]"
    return hits[0]


def R(path: str):
    """The value at ``path``: "file/key/key[field=value,...]/index/...", keys as in the JSON."""
    name, *keys = path.split("/")
    node = _load(name)
    for key in keys:
        m = re.fullmatch(r"(.*)\[(.+)\]", key)
        if m:
            node = _select(node[m.group(1)] if m.group(1) else node, m.group(2))
        elif isinstance(node, list):
            node = node[int(key)]
        else:
            node = node[key]
    return node


N = r"([-\d.,]+%?)"  # a number as the prose prints it

def markdown_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


@lru_cache(maxsize=None)
def chapter_pages(notebook: str) -> tuple[Path, ...]:
    """The notebook of a chapter and the pages of its sections, in the order of _toc.yml (a chapter
    split into sections is read as one text, so a row names the chapter, wherever its sentence is)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            if chapter.get("file") == f"book/{notebook}":
                sections = [ROOT / f"{s['file']}.ipynb" for s in chapter.get("sections", [])]
                return (BOOK / f"{notebook}.ipynb", *[p for p in sections if p.exists()])
    return (BOOK / f"{notebook}.ipynb",)


def prose(notebook: str) -> str:
    return re.sub(r"\s+", " ", " ".join(text for page in chapter_pages(notebook) for text in markdown_cells(page)))


# --------------------------------------------------------------------------- figures read off the notebooks' own outputs
def stored_outputs(notebook: str) -> str:
    """Every code cell's stored outputs, in order, as one text: printed streams, ``text/plain``,
    ``text/markdown``, and ``text/html`` with its tags stripped and its entities decoded; every run of white space read as one
    space. The pieces of one printed stream follow each other as printed; other outputs and cells are
    kept apart by a space."""
    return " ".join(_stored_outputs(page) for page in chapter_pages(notebook))


@lru_cache(maxsize=None)
def _stored_outputs(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    pieces = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                pieces.append("".join(o["text"]))
                continue
            data = o.get("data", {})
            if "text/plain" in data:
                pieces.append(f"\n{''.join(data['text/plain'])}\n")
            if "text/html" in data:
                pieces.append(f"\n{html.unescape(re.sub(r'<[^>]*>', ' ', ''.join(data['text/html'])))}\n")
            if "text/markdown" in data:
                pieces.append(f"\n{''.join(data['text/markdown'])}\n")
        pieces.append("\n")
    return re.sub(r"\s+", " ", "".join(pieces))


def as_printed(text: str):
    """A captured group as a number where it reads as one ("1,234", "-0.5", "14%" is 0.14, "2e-10"),
    else the text itself."""
    t = text.replace(",", "")
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        return text


# the prose writes some figures in words: these turn a number into the words it uses
ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen").split()
TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty"}
NTHS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
        9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth", 13: "thirteenth", 14: "fourteenth",
        15: "fifteenth", 16: "sixteenth", 17: "seventeenth", 18: "eighteenth", 19: "nineteenth", 20: "twentieth",
        30: "thirtieth"}


def in_words(k) -> str:  # 24 -> "twenty-four"
    k = int(k)
    if k < 20:
        return ONES[k]
    return TENS[k // 10] + (f"-{ONES[k % 10]}" if k % 10 else "")


def nth(k) -> str:  # 21 -> "twenty-first"
    k = int(k)
    return NTHS[k] if k in NTHS else f"{TENS[k // 10]}-{NTHS[k % 10]}"


FRACTIONS = {2: "half", 3: "third", 4: "quarter", 5: "fifth", 10: "tenth", 12: "twelfth", 20: "twentieth"}


def a_fraction(x) -> str:  # 0.211 -> "a fifth": one over the nearest whole number
    k = round(1 / x)
    return f"a {FRACTIONS.get(k, f'1/{k}')}"


def power_of_ten(*xs) -> str:  # 8e-4, 1e-3, 1e-3 -> "-3": the exponent of the power of ten nearest their geometric mean
    return str(round(statistics.fmean(math.log10(x) for x in xs)))


def alike(fmt):
    """For a sentence that gives one figure for several outputs ("0.85 for both"): every group, formatted,
    must read the same (else the prose meets all the readings, joined by /)."""
    return lambda *xs: "/".join(sorted({format(x, fmt) for x in xs}))


def first_split(a, b) -> int:  # the steps two tree paths ("RRLRL", "RRLLR") share before they part
    return len(os.path.commonprefix([a, b]))


# output patterns used by several rows
TEX = r"(\d{1,3}(?:\{,\}\d{3})+)"  # a number as LaTeX prints it, thousands set off by {,}
BROWN_V = r"\|V\| = (\d{1,3}(?:,\d{3})*)"  # |V| as an output prints it


# chapter 8's table of the rows' runs: epochs and best epoch of the five networks, in order


GRADIENT = r"{} ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+)"  # k = 10, 20, 50, and the factor per step from 20 to 50
ELMAN, LSTM = GRADIENT.format("Elman RNN"), GRADIENT.format("LSTM")  # chapter 11: the gradient's norm k steps back


W = r"(\w+(?:-\w+)?)"  # a figure written in words ("fifteenth", "twenty-four")
A = r"(an? \w+)"  # a fraction in words ("a fifth")

OUTPUT_FIGURES = [
    # chapter 1, ex-intro-1: the loaded die, exactly and by simulation; the fair die
    ("01_introduction", rf"\}} = {N}\$: a fair choice among six faces", r"fair model : ([\d.]+)", ".0f"),
    ("01_introduction", rf"\\approx {N}\$: worse than 6", r"\| exact: ([\d.]+)", None),
    ("01_introduction", rf"\\approx {N}\$: worse than 6", r"loaded model: ([\d.]+) \|", None),
    # ex-intro-2: |V| of Brown, the 5-gram table and MLP1
    ("01_introduction", rf"On Brown, \$\|V\| = {TEX}\$ here", r"\|V\| = ([\d,]+); a table", None),
    ("01_introduction", rf"about \${N} \\times 10\^\{{21\}}\$", r"5-gram table: ([\d.]+e\+21) free", lambda x: f"{x / 1e21:.1f}"),
    ("01_introduction", rf"The network has about {N} million", r"MLP1 : ([\d,]+) free parameters", lambda x: f"{x / 1e6:.1f}"),
    # ex-intro-4: the best lambda at 300 tokens (the unigram then carries 1 - lambda), and the test perplexities
    ("01_introduction", rf"the best \$\\lambda\$ is small \({N}\)", r"(?<![\d,])300 (?:[\d.]+ ){6}([\d.]+)", None),
    ("01_introduction", rf"the unigram must carry {A} of the weight", r"(?<![\d,])300 (?:[\d.]+ ){6}([\d.]+)", lambda lam: a_fraction(1 - lam)),
    ("01_introduction", rf"beats add-one on the test set \({N} against", r"test perplexity ([\d.]+) \(add-one", None),
    ("01_introduction", rf"on the test set \([\d.]+ against {N}\)", r"\(add-one: ([\d.]+)\)", None),
    # chapter 2: the stream, what the two tokenizations differ by (to the hundred), the vocabulary's cover
    ("02_data", rf"Our test set has {N} tokens", r"\btest ([\d,]+) tokens", None),
    ("02_data", rf"length of the stream: our {N} tokens", r"tokens ([\d,]+) \(= ", None),
    ("02_data", rf"distinct\* tokens \(about {N} more here\)", r"distinct [\d,]+ [\d,]+ \+([\d,]+)", lambda x: f"{round(x, -2):,.0f}"),
    ("02_data", rf"in length \(about {N} fewer tokens here\)", r"tokens [\d,]+ [\d,]+ -([\d,]+)", lambda x: f"{round(x, -2):,.0f}"),
    # one token in k: the rate of <unk>, to a whole percent, as one in k
    ("02_data", rf"About one token in {W} is `<unk>`", r"total [\d,]+ [\d,]+ ([\d.]+%)", lambda x: in_words(round(1 / round(x, 2)))),
    ("02_data", rf"already make up about {A} of the text", r"share of all tokens 10 ([\d.]+%)", a_fraction),
    ("02_data", rf"the kept vocabulary covers about {N} of it", r"([\d.]+%) \(the vocabulary without <unk>\)", ".0%"),
    # chapter 2: the bounds of the synthetic grammar
    ("02_data", rf"nothing beats perplexity {N}\.", r"0 previous tokens: at best [\d.]+ nats per token, perplexity ([\d.]+)", ".1f"),
    ("02_data", rf"brings the bound to {N}, two", r"1 previous token: at best [\d.]+ nats per token, perplexity ([\d.]+)", None),
    ("02_data", rf"bound to [\d.]+, two to {N}, and", r"2 previous tokens: at best [\d.]+ nats per token, perplexity ([\d.]+)", None),
    ("02_data", rf"a trigram can at best reach {N}, and", r"2 previous tokens: at best [\d.]+ nats per token, perplexity ([\d.]+)", None),
    ("02_data", rf"the network of the coming chapters included, {N}\.", r"so the best possible perplexity is ([\d.]+)", None),
    # ex-data-4: test tokens unseen in training, split by text and by position
    ("02_data", rf"fewer test words are new to the model \({N} of the test tokens", r"every tenth text [\d,]+ [\d,]+ [\d,]+ ([\d.]+%)", None),
    ("02_data", rf"of the test tokens against {N} by position", r"by position \(paper\) [\d,]+ [\d,]+ [\d,]+ ([\d.]+%)", None),
    # chapter 3: sparsity; the trigram's training perplexity beside the paper's 31
    ("03_ngrams", rf"the whole corpus, and {N} of the test tokens", r"test n-grams never seen in training 1 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)", None),
    ("03_ngrams", rf"More than {A} of the test \*bigrams\*", r"(?<!\S)2 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)",
     lambda x: "a quarter" if 1 / 4 < x < 1 / 3 else f"{x:.0%}"),
    ("03_ngrams", rf"{W} trigrams in ten", r"(?<!\S)3 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)", lambda x: in_words(round(10 * x))),
    ("03_ngrams", rf"and {N} of the 5-grams", r"(?<!\S)5 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)", ".0%"),
    ("03_ngrams", rf"the paper reports {N} too", r"train perplexity ([\d.]+)", ".0f"),
    # the share of test words whose 3 and 4 preceding words were seen together: the test 3- and 4-grams seen
    ("03_ngrams", rf"occurred together in training for only {N} of the test words", r"(?<!\S)3 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)",
     lambda x: f"{1 - x:.0%}"),
    ("03_ngrams", rf"the 4 words before it for {N} \(each such context", r"(?<!\S)4 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)",
     lambda x: f"{1 - x:.0%}"),
    ("03_ngrams", rf"seen together in training for only {N} of the test words, and", r"(?<!\S)4 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)",
     lambda x: f"{1 - x:.0%}"),
    ("03_ngrams", rf"and the 3 words before it for {N}, so most", r"(?<!\S)3 [\d,]+ [\d,]+ of [\d,]+ \(([\d.]+%)\)",
     lambda x: f"{1 - x:.0%}"),
    # the uniform's EM weight in bins 5 to 8, and the count below which p_1(w) < 1/|V|: T / |V|
    ("03_ngrams", rf"keeps a weight of {N} to [\d.]+ in the bins", r"q = 5 [\d,]+ ([\d.]+) [\d.]+ [\d.]+ [\d.]+ q = 6 [\d,]+ ([\d.]+) [\d.]+ [\d.]+ "
     r"[\d.]+ q = 7 [\d,]+ ([\d.]+) [\d.]+ [\d.]+ [\d.]+ q = 8 [\d,]+ ([\d.]+)", lambda *w: f"{min(w):.2f}"),
    ("03_ngrams", rf"keeps a weight of [\d.]+ to {N} in the bins", r"q = 5 [\d,]+ ([\d.]+) [\d.]+ [\d.]+ [\d.]+ q = 6 [\d,]+ ([\d.]+) [\d.]+ [\d.]+ "
     r"[\d.]+ q = 7 [\d,]+ ([\d.]+) [\d.]+ [\d.]+ [\d.]+ q = 8 [\d,]+ ([\d.]+)", lambda *w: f"{max(w):.2f}"),
    ("03_ngrams", rf"fewer than \$T/\|V\| \\approx {N}\$ times", r"Brown: \|V\| = ([\d,]+); ([\d,]+) training", lambda V, T: f"{T / V:.0f}"),
    # Kneser-Ney from order 3 to order 5, on the test set
    ("03_ngrams", r"helps Kneser-Ney by (less than one) percent", r"(?<!\S)3 [\d.]+ ([\d.]+) [\d.]+, [\d.]+, [\d.]+ 4 .*? 5 [\d.]+ ([\d.]+) [\d.]+,",
     lambda kn3, kn5: "less than one" if 1 - kn5 / kn3 < 0.01 else f"{1 - kn5 / kn3:.1%}"),
    ("03_ngrams", rf"With 500 classes instead of {N} words", rf"Brown: {BROWN_V};", None),
    ("03_ngrams", rf"\$\|V\|\$ = {N} against 16,383", rf"Brown: {BROWN_V};", None),
    # chapter 3: the samples
    ("03_ngrams", rf"\(only {N} of the trigram's", r"τ = 1\.0 trigram (\d+%) \d+%", None),
    ("03_ngrams", rf"trigram's and {N} of the 5-gram's occur", r"τ = 1\.0 Kneser-Ney 5-gram (\d+%) \d+%", None),
    ("03_ngrams", r"\((\w+ \w+) of the 5-gram's four-word stretches", r"τ = 0\.7 Kneser-Ney 5-gram (\d+%) \d+%",
     lambda x: {2: "two thirds"}.get(round(3 * x), f"{x:.0%}")),
    ("03_ngrams", rf"grows from {N} of the training tokens", r"\(<unk> is (\d+%) of the training tokens\)", None),
    ("03_ngrams", rf"training tokens to {N} of the 5-gram's text",
     r"τ = 0\.7 Kneser-Ney 5-gram \d+% (\d+%)", None),
    # chapter 3: the vocabulary of the largest resampled corpus
    ("03_ngrams", rf"grows with the corpus \({N} words here\)", rf"100 million tokens: {BROWN_V}", lambda x: f"{round(x, -3):,.0f}"),
    ("03_ngrams", rf"At \$\|V\| = {TEX}\$ the first", rf"100 million tokens: {BROWN_V}", lambda x: f"{round(x, -3):,.0f}"),
    # what the two output layers save at that |V|: |V| / 2 sqrt(|V|) in words (to the hundred), |V| / log2 |V| to the hundred
    ("03_ngrams", r"the first cuts the output layer's multiply-adds about (a \w+fold)", rf"100 million tokens: {BROWN_V}",
     lambda V: {100: "a hundredfold"}.get(round(V / (2 * math.sqrt(V)), -2), f"{V / (2 * math.sqrt(V)):.0f}-fold")),
    ("03_ngrams", rf"the second about {N}-fold", rf"100 million tokens: {BROWN_V}", lambda V: f"{round(V / math.log2(V), -2):,.0f}"),
    # ex-ngrams-2: add-one's probabilities (c(h .) + |V| for a context seen 10 times) and perplexity
    ("03_ngrams", rf"Adding one to each of \$\|V\| = {TEX}\$", rf"Brown: {BROWN_V};", None),
    ("03_ngrams", rf"only \$20/{TEX}\$ of the probability", rf"Brown: {BROWN_V};", lambda V: f"{V + 10:,.0f}"),
    ("03_ngrams", rf"a test perplexity more than {W} times that of Kneser-Ney's", r"add-one bigram: test perplexity ([\d.]+); Kneser-Ney bigram: ([\d.]+)",
     lambda add_one, kn: in_words(math.floor(add_one / kn))),
    # ex-ngrams-3: the share of test 5-grams seen in training, with 200,000 tokens against 800,000
    ("03_ngrams", rf"the share of seen test 5-grams roughly {W}", r"seen in training: ([\d.]+%) with 200,000 tokens, ([\d.]+%) with 800,000",
     lambda small, full: {2: "halves"}.get(round(full / small), f"x{small / full:.2f}")),
    # chapter 4, ex-arch-1: the AP News model's parameters, and the share of what one example touches
    ("04_architecture", rf"says that {N} of the parameters \*one example touches\*", r"of which the output layer ([\d.]+%)", ".1%"),
    ("04_architecture", rf"60 \\times 501 = {TEX}\$", r"AP News model: ([\d,]+) parameters", None),
    ("04_architecture", rf"\+ h\)\$ of them, about {N};", r"output layer b, U, W [\d,]+ ([\d.]+%)", ".0%"),
    ("04_architecture", rf"\$\|V\|\\,m\$, about {N};", r"feature table C [\d,]+ ([\d.]+%)", ".0%"),
    ("04_architecture", rf"the hidden layer {A} of a percent", r"hidden layer H, d [\d,]+ ([\d.]+%)", lambda x: a_fraction(100 * x)),
    ("04_architecture", rf"the output layer's share is {N}:", r"of which the output layer ([\d.]+%)", ".1%"),
    # ex-arch-2: MLP1's multiply-adds per example and per epoch; the AP News model's
    ("04_architecture", rf"For MLP1 that is {N} against", r"MLP1 on Brown: forward ([\d,]+) \+", None),
    ("04_architecture", rf"For MLP1 that is [\d,]+ against {N} million", r"MLP1 on Brown: forward [\d,]+ \+ ([\d,]+)", lambda x: f"{x / 1e6:.1f}"),
    ("04_architecture", rf"the output layer is {N} of the work",
     r"MLP1 on Brown: forward [\d,]+ \+ [\d,]+ multiply-adds per example \(output layer ([\d.]+%)\)", ".1%"),
    ("04_architecture", rf"example and \${N} \\times 10\^\{{13\}}\$ per epoch", r"training \(3x\) ([\d.]+e\+13)", lambda x: f"{x / 1e13:.1f}"),
    # (the minutes an epoch of MLP1 would take are glued from the cell that prints them)
    # training costs three forward passes: 3 x (hidden + output multiply-adds), in units of 10^7
    ("04_architecture", rf"Training costs about three times the forward pass, \${N} \\times 10\^7\$",
     r"MLP1 on Brown: forward ([\d,]+) \+ ([\d,]+) multiply-adds", lambda hidden, output: f"{3 * (hidden + output) / 1e7:.1f}"),
    ("04_architecture", rf"forward passes alone cost \${N} \\times 10\^\{{14\}}\$", r"one epoch: forward ([\d.]+e\+14)", lambda x: f"{x / 1e14:.1f}"),
    # chapter 5: the gradient checks, as powers of ten (the exponent nearest the geometric mean of the errors)
    ("05_backprop", r"All relative errors are around \$10\^\{(-\d+)\}\$",
     r"h=6, direct=True (\S+) (\S+) (\S+) (\S+) (\S+) (\S+) h=6, direct=False (\S+) (\S+) (\S+) (\S+) - (\S+) h=0, direct=True (\S+) - - - (\S+) (\S+)",
     power_of_ten),
    # the timings of the reference and the fast path: a cell nbval does not compare (timings vary), so these
    # two read the run shown, which the prose describes as such
    ("05_backprop", rf"The gap is {W} at \$K = 1\$", r"K = 1 [\d.]+ [\d.]+ [\d.]+ ([\d.]+)x K = 128 [\d.]+ [\d.]+ [\d.]+ ([\d.]+)x",
     lambda k1, k128: "largest" if k1 > k128 else "smallest"),
    ("05_backprop", rf"In the run shown, the middle column is even {W} than the reference at \$K = 1\$",
     r"K = 1 ([\d.]+) ([\d.]+) [\d.]+ [\d.]+x", lambda reference, middle: "slower" if middle > reference else "faster"),
    # ex-backprop-2, ex-backprop-3, ex-backprop-4: relative errors of the checks (ex-backprop-2's table is a cell
    # nbval does not compare: its rounding errors vary from machine to machine)
    ("05_backprop", r"the table's largest error is about \$10\^\{(-\d+)\}\$", r"(?<!\S)1e-05 (\d+e-\d+) 1e-06", power_of_ten),
    ("05_backprop", r"of only about \$10\^\{(-\d+)\}\$", r"initial dropped (\S+) (\S+) (\S+)", power_of_ten),
    ("05_backprop", rf"the same bug gives a relative error of about {N}\.", r"random dropped (\S+) (\S+) (\S+)", alike(".1f")),
    ("05_backprop", r"each agrees to about \$10\^\{(-\d+)\}\$",
     r"C (\S+) H1 (\S+) d1 (\S+) H2 (\S+) d2 (\S+) U (\S+) W (\S+) b (\S+)", power_of_ten),
    # chapter 6: the synthetic runs against the grammar's bound
    ("06_training", rf"How good is {N}\?", r"best valid ppl ([\d.]+)", None),
    ("06_training", rf"the best possible perplexity on a long sample is {N}\.", r"on a long sample: ([\d.]+)", None),
    ("06_training", rf"which differs a little from {N} because", r"on a long sample: ([\d.]+)", None),
    ("06_training", rf"the networks are within {N} of the truth",
     r"network, direct=True test perplexity ([\d.]+) network, direct=False test perplexity ([\d.]+) .*?the grammar itself test perplexity ([\d.]+)",
     lambda a, b, truth: format(max(a, b) / truth - 1, ".0%")),
    ("06_training", rf"of the truth \({N} and [\d.]+ against", r"network, direct=True test perplexity ([\d.]+)", None),
    ("06_training", rf"of the truth \([\d.]+ and {N} against", r"network, direct=False test perplexity ([\d.]+)", None),
    ("06_training", rf"and [\d.]+ against {N}\), the Kneser-Ney", r"the grammar itself test perplexity ([\d.]+)", None),
    ("06_training", rf"the Kneser-Ney 5-gram {N} above it",
     r"Kneser-Ney 5-gram test perplexity ([\d.]+) the grammar itself test perplexity ([\d.]+)", lambda kn, truth: format(kn / truth - 1, ".1%")),
    ("06_training", rf"above it \({N}\)\.", r"Kneser-Ney 5-gram test perplexity ([\d.]+)", None),
    ("06_training", rf"validation perplexity of {N} is", r"best valid ppl ([\d.]+)", None),
    ("06_training", rf"validation perplexity of [\d.]+ is {N} bits per token", r"best valid ppl ([\d.]+)", lambda x: f"{math.log2(x):.2f}"),
    # chapter 6: the samples that the grammar could produce
    ("06_training", rf"and {N} of its sentences break the grammar", r"trigram: yesterday the .*? (\d+%) of the \d+ whole sentences", lambda x: format(1 - x, ".0%")),
    ("06_training", rf"\({N} and [\d]+% of their sentences are", r"Kneser-Ney 5-gram: yesterday the .*? (\d+%) of the \d+ whole sentences", None),
    ("06_training", rf"\(\d+% and {N} of their sentences are", r"network: yesterday the .*? (\d+%) of the \d+ whole sentences", None),
    # chapter 6: how far the rate falls (the table of ex-training-1)
    ("06_training", rf"the rate falls to about {A} of \$\\varepsilon_0\$ after 6 Brown epochs", r"r = 1e-4, 6 epochs [\d,]+ ([\d.]+)", a_fraction),
    ("06_training", rf"and {A} after 30, the most a row may train", r"r = 1e-4, 30 epochs [\d,]+ ([\d.]+)", a_fraction),
    # ex-training-1
    ("06_training", rf"the paper's rate falls by only {N} in 20 epochs", r"paper, Brown: K = 1, r = 1e-8, 20 epochs [\d,]+ ([\d.]+)",
     lambda x: format(1 - x, ".0%")),
    ("06_training", rf"on AP News by {N} in 5", r"paper, AP News: K = 1, r = 1e-8, 5 epochs [\d,]+ ([\d.]+)", lambda x: format(1 - x, ".0%")),
    ("06_training", rf"\$r = 1/\({N} \\times 10\^7\)", r"paper, Brown: K = 1, r = 1e-8, 20 epochs ([\d,]+)", lambda t: f"{t / 1e7:.1f}"),
    ("06_training", rf"= {N} \\times 10\^\{{-8\}}\$", r"r = ([\d.]+)e-08: eps_t / eps_0 = 0\.500", None),
    ("06_training", rf"practically constant \({N} updates in 20 epochs\)", r"K = 128, r = 1e-8, 20 Brown epochs ([\d,]+)", None),
    ("06_training", rf"after 6 epochs the rate is about {A} of the initial one", r"r = 1e-4, 6 epochs [\d,]+ ([\d.]+)", a_fraction),
    ("06_training", rf"the most a row may train, about {A}\.", r"r = 1e-4, 30 epochs [\d,]+ ([\d.]+)", a_fraction),
    # ex-training-2: what a weight keeps over one epoch
    ("06_training", rf"size, \$T\$ the number of updates: {N} in the paper's Brown setting",
     r"paper on Brown, lambda = 1e-4: [\d,]+ updates per epoch, a weight keeps ([\d.]+)", ".0%"),
    ("06_training", rf"{N} in our synthetic runs", r"synthetic, K = 32, lambda = 1e-4: [\d,]+ updates per epoch, a weight keeps ([\d.]+)", ".0%"),
    # the printed 0.105 to one decimal of a percent: (1 - 0.3 * 0.01) ** 750 = 0.10502
    ("06_training", rf"and only {N} with \$\\lambda = 10\^\{{-2\}}\$", r"synthetic, K = 32, lambda = 1e-2: [\d,]+ updates per epoch, a weight keeps ([\d.]+)", ".1%"),
    # ex-training-3 (its statement): the updates of the K = 1 and K = 32 runs
    ("06_training", rf"examples in {N} updates at", r"K = 1, lr 0\.01: ([\d,]+) updates", None),
    ("06_training", rf"with \$K = 32\$ \({N} updates\)", r"K = 32, lr [\d.]+: ([\d,]+) updates", None),
    # ex-training-4: the rescaled model
    ("06_training", rf"at a finite scale, \$s = {N}\$", r"the best scale is s = .*? = ([\d.]+)", None),
    ("06_training", rf"\\lVert C\\rVert\^2 = {N}\$ against", r"at initialization, ([\d.]+) against [\d.]+ after T", None),
    ("06_training", rf"\\lVert W\\rVert\^2 = {N}\$\. Training has not settled", r"at initialization, [\d.]+ against ([\d.]+) after T", None),
    ("06_training", rf"over the \$T = {TEX}\$ updates", r"after T = ([\d,]+) updates", None),
    ("06_training", rf"\\varepsilon\\lambda T = {N}\$", r"eps lambda T = ([\d.]+):", None),
    ("06_training", rf"\\lambda T\}} = {N}\$", r"exp\(-2 eps lambda T\) = ([\d.]+)", None),
    ("06_training", rf"from {N} against [\d.]+ at initialization", r"\|W\|\^2: ([\d.]+) against [\d.]+ at initialization", None),
    ("06_training", rf"from [\d.]+ against {N} at initialization", r"\|W\|\^2: [\d.]+ against ([\d.]+) at initialization", None),
    # ex-training-5 (and its statement: the table of epochs): both loops stop after the same epoch
    ("06_training", rf"the validation perplexity {W} from epoch 6 to epoch 7", r"(?<!\S)6 [\d.]+ ([\d.]+) 0\.3000 7 [\d.]+ ([\d.]+) 0\.3000",
     lambda e6, e7: "rises" if e7 > e6 else "falls"),
    ("06_training", rf"Both stop after epoch {N},", r"stopped after epoch (\d+),", None),
    ("06_training", rf"after epoch \d+, worse than epoch {N},", r"kept the parameters of epoch (\d+)", None),
    ("06_training", rf"go back to the parameters of epoch {N}:", r"kept the parameters of epoch (\d+)", None),
    # chapter 10: the Brown runs, one method against the full softmax (CPU time)
    # chapter 10: why the cheap layers are not cheaper (the count of multiply-adds; classes in a batch)
    # 16.5 sits halfway (here and in the tree's row above): output_layers.json has 16.47
    # chapter 10: self-normalization (the synthetic demonstration's figures are glued)
    # chapter 10: the classes and trees built on Brown
    # chapter 10: the output-block algorithm with a cheap output layer
    # chapter 10: the energy network on a slice of Brown
    # chapter 10: tied embeddings on the synthetic grammar (glued)
    # chapter 10: the two trees on the synthetic corpus (the paths printed as L and R)
    ("10_output_layers", r"In the clustered tree the words of a class share the first steps of their paths: the animals all start with (\w+),",
     r"(?<!\S)cat \S+ (\S+) dog \S+ (\S+) horse \S+ (\S+) kitchen", lambda *p: os.path.commonprefix(p)),
    ("10_output_layers", rf"\*kitchen\* and \*garden\* part after the {W} step",
     r"(?<!\S)kitchen (\S+) \S+ garden (\S+) \S+ walking", lambda a, b: nth(first_split(a, b))),
    ("10_output_layers", rf"about as frequent as each other, share {W}\.", r"(?<!\S)cat \S+ \S+ dog (\S+) \S+ horse (\S+)",
     lambda a, b: in_words(first_split(a, b))),
    # chapter 11: the gradient checks (the largest error, as a power of ten; a cell nbval does not compare)
    ("11_recurrent", r"Relative errors of order \$10\^\{(-\d+)\}\$ and below",
     r"network C Wx Wh d U b rnn (\S+) (\S+) (\S+) (\S+) (\S+) (\S+) lstm (\S+) (\S+) (\S+) (\S+) (\S+) (\S+)",
     lambda *errors: power_of_ten(max(errors))),
    # chapter 11: the small networks against the grammar's bound, and the character-aware section: glued
    # chapter 11: the Brown runs (glued; GLUED below checks the figures computed from the results files)
]


@pytest.mark.parametrize("notebook, prose_pattern, output_pattern, fmt", OUTPUT_FIGURES,
                         ids=[f"{nb}:{pat[:40]}" for nb, pat, _, _ in OUTPUT_FIGURES])
def test_prose_figure_matches_stored_output(notebook, prose_pattern, output_pattern, fmt):
    """The figure the prose prints equals the one the notebook's stored outputs print (formatted by
    ``fmt`` as the prose prints it). The output pattern must match one place, or all its matches must
    capture the same text, so that a row cannot read another table's line by accident. A format spec
    rounds the printed number as Python does; where the printed digits sit exactly halfway (0.105 to a
    whole percent), the row's comment says which way the results file rounds."""
    text = prose(notebook)
    found = [m.group(1).replace("{,}", ",").rstrip(".,") for m in re.finditer(prose_pattern, text)]
    assert found, f"{notebook}: the prose no longer says /{prose_pattern}/ (update the sentence or this row)"
    shown = {m.groups() for m in re.finditer(output_pattern, stored_outputs(notebook))}
    assert shown, f"{notebook}: the stored outputs no longer show /{output_pattern}/ (update this row)"
    assert len(shown) == 1, f"{notebook}: /{output_pattern}/ matches outputs that disagree: {sorted(shown)}"
    groups = next(iter(shown))
    if fmt is None:
        expected = groups[0]
    elif callable(fmt):
        expected = fmt(*map(as_printed, groups))
    else:
        expected = format(as_printed(groups[0]), fmt)
    for got in found:
        assert got == expected, f"{notebook}: the prose says {got}, the stored outputs say {expected} ({', '.join(groups)})"


def test_the_output_checks_can_fail():
    # a figure that disagrees with the stored outputs is reported ...
    with pytest.raises(AssertionError, match="the stored outputs say"):
        test_prose_figure_matches_stored_output("06_training", rf"How good is {N}\?", r"best valid ppl ([\d.]+)", ".1f")
    with pytest.raises(AssertionError, match="the stored outputs say"):
        test_prose_figure_matches_stored_output("06_training", rf"Both stop after epoch {N},", r"kept the parameters of epoch (\d+)", None)
    # ... and so are a sentence that is gone, an output that is gone, and an output pattern that reads two different lines
    with pytest.raises(AssertionError, match="no longer says"):
        test_prose_figure_matches_stored_output("06_training", rf"a sentence the book never had {N}", r"best valid ppl ([\d.]+)", None)
    with pytest.raises(AssertionError, match="no longer show"):
        test_prose_figure_matches_stored_output("06_training", rf"How good is {N}\?", r"an output no cell printed ([\d.]+)", None)
    with pytest.raises(AssertionError, match="disagree"):
        test_prose_figure_matches_stored_output("06_training", rf"How good is {N}\?", r"direct=\w+ ?: (\d+) epochs", None)
    # the outputs are read as a reader sees them: html tables without their tags, and streams as one text
    assert "MLP9 18 yes 15 112,500" in stored_outputs("08_results") and "<td>" not in stored_outputs("08_results")
    assert "epoch 6: 4,500 updates, valid 4.3412 epoch 7:" in stored_outputs("06_training")
    assert [as_printed(t) for t in ("1,234", "14%", "2e-10", "RLL")] == [1234.0, 0.14, 2e-10, "RLL"]
    assert (in_words(24), nth(21), nth(15), a_fraction(0.211), power_of_ten(8e-4, 1e-3, 1e-3)) == (
        "twenty-four", "twenty-first", "fifteenth", "a fifth", "-3")


# --------------------------------------------------------------------------- words readers should not meet
FORBIDDEN = {
    "project vocabulary 'issue'": re.compile(r"\bissues?\b", re.IGNORECASE),
    "a test marker": re.compile(r"nbval", re.IGNORECASE),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    "a test file's name": re.compile(r"\btests/\w+|\btest_\w+\.py\b"),
    "a control character (a LaTeX backslash read as a JSON escape, such as \\t in \\times)": re.compile(r"[\x00-\x09\x0b-\x1f]"),
    "'target' as our own bar": re.compile(
        r"\b(?:our|the first|the second|the \d\.\d+|\d\.\d+) targets?\b|\btargets? (?:is |was |are |were )?(?:met|missed)\b"
        r"|\bthe target was\b|\bshort of the target\b", re.IGNORECASE),
}
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
PAGES = sorted(BOOK.glob("*.md"))


def test_the_book_has_chapters():
    assert len(NOTEBOOKS) >= 9


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=[p.name for p in NOTEBOOKS + PAGES])
def test_markdown_speaks_to_readers(path):
    texts = markdown_cells(path) if path.suffix == ".ipynb" else [path.read_text(encoding="utf-8")]
    problems = [f"cell {i}: {what}: {m.group(0)!r}"
                for i, text in enumerate(texts)
                for what, rx in FORBIDDEN.items() for m in rx.finditer(text)]
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_chapter_8_arithmetic_rates_are_as_its_exercise_says():
    """ex-results-3: 2|V|D flops per pass, three passes per training example and one per validation
    example, over each row's fastest epoch: the three rows of largest D near 110 GFLOP/s, MLP7 and
    MLP9 near 90."""
    rows, V, T = R("table1/rows"), R("table1/V"), R("table1/tokens")
    D = {"MLP1": 50 + 4 * 60, "MLP3": 0 + 4 * 60, "MLP5": 50 + 4 * 30, "MLP7": 50 + 2 * 30, "MLP9": 100}
    rate = {r: 2 * V * d * (3 * T["train"] + T["valid"]) / min(e["seconds"] for e in rows[r]["history"]) / 1e9
            for r, d in D.items()}
    assert all(100 <= rate[r] <= 120 for r in ("MLP1", "MLP3", "MLP5")), rate
    assert all(80 <= rate[r] < 100 for r in ("MLP7", "MLP9")), rate


# what a printed output must not show a reader either: where our files happened to be, and commits
IN_OUTPUTS = {"a commit hash": FORBIDDEN["a commit hash"],
              "a path on the machine that ran it": re.compile(r"(?<![\w.])(?:/(?:tmp|work|home|root|mnt|Users)/|~/)\S*")}


def output_texts(path: Path) -> list[tuple[int, str]]:
    """(cell index, text) of every printed or displayed text output of a notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb["cells"]):
        for o in cell.get("outputs", []):
            out += [(i, "".join(o["text"]))] if "text" in o else []
            out += [(i, "\n".join([o.get("evalue", ""), *o.get("traceback", [])]))] if o["output_type"] == "error" else []
            out += [(i, "".join(o["data"][k])) for k in ("text/plain", "text/html", "text/markdown") if k in o.get("data", {})]
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_outputs_speak_to_readers(path):
    problems = [f"cell {i}: {what}: {m.group(0)!r}" for i, text in output_texts(path)
                for what, rx in IN_OUTPUTS.items() for m in rx.finditer(text)]
    assert not problems, f"{path.name}: " + "; ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_test_markers_are_tags_not_code(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    marked = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
              and re.search(r"^\s*#\s*(NBVAL_|PYTEST_VALIDATE_)", "".join(c["source"]), re.MULTILINE)]
    assert not marked, f"{path.name}: cells {marked} carry an nbval comment; use the tag nbval-ignore-output"


# --------------------------------------------------------------------------- figures inserted with glue
GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)")  # {glue:text}`name:.1f` names the figure "name"


def glued_names(path: Path) -> set[str]:
    """The figures a notebook's code cells glue: MyST-NB stores each as an output named in its metadata."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return {o["metadata"]["scrapbook"]["name"] for c in nb["cells"] for o in c.get("outputs", [])
            if "scrapbook" in o.get("metadata", {})}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_glued_figure_is_stored(path):
    """A figure the prose inserts with glue is computed by a code cell of the same notebook (nbval holds its
    stored value equal to a fresh run, so it cannot drift from the results files it is read from)."""
    used = {m.group(1) for text in markdown_cells(path) for m in GLUE_ROLE.finditer(text)}
    missing = sorted(used - glued_names(path))
    assert not missing, f"{path.name}: the prose inserts {missing}, which no code cell glues"


def glued_value(path: Path, name: str):
    """The value a notebook's code glued as ``name``, as stored (MyST-NB keeps its repr)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    [value] = [o["data"]["application/papermill.record/text/plain"] for c in nb["cells"] for o in c.get("outputs", [])
               if o.get("metadata", {}).get("scrapbook", {}).get("name") == name]
    return float(value)


def _ratio_k50(R, model="rnn"):  # the gradient's norm 50 steps back over its norm at the prediction
    g = R(f"recurrent_one_seed/rows[model={model}]/gradient_through_time")
    return g[50] / g[0]


def _first_below(R):  # the first position of a stream followed back (j - 1 steps) to where the gradient is below 1%
    g = R("recurrent_one_seed/rows[model=rnn]/gradient_through_time")
    return 1 + next(k for k, x in enumerate(g) if x / g[0] < 0.01)


def _last_changes(R):  # the largest relative change of validation perplexity over the last two epochs of either network
    v = {m: [e["valid_ppl"] for e in R(f"recurrent_one_seed/rows[model={m}]/history")] for m in ("rnn", "lstm")}
    return max(abs(1 - h[k] / h[k - 1]) for h in v.values() for k in (-2, -1))


def _recurrent_runs(R, model):  # the seed rows of one row of the recurrent table, by seed
    return sorted((r for r in R("recurrent/runs") if r["method"] == model), key=lambda r: r["seed"])


def _chapter11_runs(R):  # the seed rows of chapter 11's rows: the file's without the Transformers' (chapter 12's)
    return [r for r in R("recurrent/runs") if r["method"] not in TRANSFORMERS]


def _best_mean(R, model):  # the mean over a row's seeds of each seed's lowest validation perplexity
    return statistics.mean(min(e["valid_ppl"] for e in r["history"]) for r in _recurrent_runs(R, model))


def _reached(R, model, within):  # per seed: (epoch, CPU seconds of the epochs up to it) at the first validation
    bar = (1 + within) * _best_mean(R, "nplm-dropout")  # within 5% or 1% of the NPLM row's quality
    out = []
    for r in _recurrent_runs(R, model):
        k = next(i for i, e in enumerate(r["history"]) if e["valid_ppl"] <= bar)
        out.append((r["history"][k]["epoch"], sum(e["cpu_seconds"] for e in r["history"][: k + 1])))
    return out


def _epoch_cpu(R, model):  # the mean over a row's seeds of each one's mean CPU seconds an epoch
    return statistics.mean(statistics.mean(e["cpu_seconds"] for e in r["history"]) for r in _recurrent_runs(R, model))


def _medians_by_network(R):  # every network's median speedup from 1 to 2 threads in each run of the method
    medians = {}
    for name in ("bench_threads", "bench_recurrent_threads"):
        for run in R(f"bench_threads_earlier/{name}") + [R(name)]:
            for s in run["scaling"]:
                medians.setdefault(s.get("shape") or f"{s['cell']}{s['h']}", []).append(s["ours_2_over_1"])
    return medians


def _ap_share(c, V=17964, h=60):  # the output layer's share of the paper's count, c the features per example
    out = V * (1 + c + h)
    return out / (out + h * (1 + c) + c)


def _one(values):  # the one value every seed shares
    assert len(set(values)) == 1, values
    return values[0]


QUALITY_ROWS = {"lstm": "lstm", "gru": "gru", "nplm-dropout": "nplm", "lstm-4": "lstm4", "char-lstm": "char"}
QUALITY_GLUED = [  # 11_2_brown's time to quality: CPU seconds to within 5% and 1% of nplm-dropout's mean best
    *[("11_2_brown", f"quality_{key}_{pct}{sd}",
       lambda R, m=m, w=pct / 100, f=f: f([cpu for _, cpu in _reached(R, m, w)]))
      for m, key in QUALITY_ROWS.items() for pct in (5, 1)
      for sd, f in (("", statistics.mean), ("_sd", statistics.stdev))],
    ("11_2_brown", "quality_reference", lambda R: _best_mean(R, "nplm-dropout")),
    ("11_2_brown", "quality_within_5", lambda R: 1.05 * _best_mean(R, "nplm-dropout")),
    ("11_2_brown", "quality_within_1", lambda R: 1.01 * _best_mean(R, "nplm-dropout")),
    ("11_2_brown", "quality_rnn_best", lambda R: _best_mean(R, "rnn")),
    ("11_2_brown", "quality_updates", lambda R: R("recurrent/runs[method=lstm,seed=0]/history/0/updates")),
    ("11_2_brown", "quality_words", lambda R: R("recurrent/rule/batch") * R("recurrent/rule/T")),
    ("11_2_brown", "quality_lstm_epoch_5", lambda R: _one([e for e, _ in _reached(R, "lstm", 0.05)])),
    ("11_2_brown", "quality_lstm_epoch_1", lambda R: _one([e for e, _ in _reached(R, "lstm", 0.01)])),
    ("11_2_brown", "quality_gru_epoch_5", lambda R: _one([e for e, _ in _reached(R, "gru", 0.05)])),
    ("11_2_brown", "quality_nplm_epoch_1_low", lambda R: min(e for e, _ in _reached(R, "nplm-dropout", 0.01))),
    ("11_2_brown", "quality_nplm_epoch_1_high", lambda R: max(e for e, _ in _reached(R, "nplm-dropout", 0.01))),
    ("11_2_brown", "quality_lstm4_cost", lambda R: _epoch_cpu(R, "lstm-4") / _epoch_cpu(R, "lstm")),
    ("11_2_brown", "quality_char_cost", lambda R: _epoch_cpu(R, "char-lstm") / _epoch_cpu(R, "lstm")),
    # a run's CPU seconds over its wall seconds, lowest and highest over the seeds; one seed's dearest epoch
    # over its cheapest, the largest over the seeds, minus one
    ("11_2_brown", "quality_share_low",
     lambda R: min(r["cpu_seconds_training"] / r["wall_seconds_training"] for r in _chapter11_runs(R))),
    ("11_2_brown", "quality_share_high",
     lambda R: max(r["cpu_seconds_training"] / r["wall_seconds_training"] for r in _chapter11_runs(R))),
    ("11_2_brown", "quality_swing", lambda R: max(max(c) / min(c) - 1 for r in _chapter11_runs(R)
                                                  if (c := [e["cpu_seconds"] for e in r["history"]]))),
    ("11_2_brown", "quality_grid_epochs", lambda R: R("recurrent/protocol/grid_epochs")),
    # the character-aware LSTM's epochs of coming within 5%, earliest and latest over the seeds; how many of its
    # seeds came later than the LSTM of the same seed (the seeds of both rows are 0, 1, 2); its number of seeds
    ("11_2_brown", "quality_char_epoch_5_low", lambda R: min(e for e, _ in _reached(R, "char-lstm", 0.05))),
    ("11_2_brown", "quality_char_epoch_5_high", lambda R: max(e for e, _ in _reached(R, "char-lstm", 0.05))),
    ("11_2_brown", "quality_char_later_5", lambda R: sum(c > w for (c, _), (w, _) in zip(_reached(R, "char-lstm", 0.05),
                                                                                         _reached(R, "lstm", 0.05)))),
    ("11_2_brown", "quality_char_seeds", lambda R: len(_recurrent_runs(R, "char-lstm"))),
    # an LSTM epoch's CPU seconds over an Elman epoch's in the protocol's runs (the mean over each row's seeds)
    ("11_2_brown", "lstm_epoch_cost", lambda R: _epoch_cpu(R, "lstm") / _epoch_cpu(R, "rnn")),
]


def _count_bins(R):  # the training-count bins of the character-aware LSTM's table, rarest first: "0-3", ..., ">10000"
    return [b["bin"] for b in R("recurrent/runs[method=char-lstm,seed=0]/words/by_frequency/target") if b["bin"] != "unk"]


SAMPLES_AND_BINS_GLUED = [  # 11_2_brown: the samples' settings, and the bounds of the bins the text names
    ("11_2_brown", "sample_length", lambda R: R("recurrent/samples/length")),
    ("11_2_brown", "sample_seed_a", lambda R: R("recurrent/samples/seeds")[0]),
    ("11_2_brown", "sample_seed_b", lambda R: R("recurrent/samples/seeds")[1]),
    ("11_2_brown", "sample_prompt_words", lambda R: len(R("recurrent/runs[method=lstm,seed=0]/samples/prompt").split())),
    ("11_2_brown", "char_rare_from", lambda R: int(_count_bins(R)[0].split("-")[0])),
    ("11_2_brown", "char_rare_to", lambda R: int(_count_bins(R)[0].split("-")[1])),
    ("11_2_brown", "char_second_from", lambda R: int(_count_bins(R)[1].split("-")[0])),
    ("11_2_brown", "char_second_to", lambda R: int(_count_bins(R)[1].split("-")[1])),
    ("11_2_brown", "char_top_above", lambda R: int(_count_bins(R)[-1].lstrip(">"))),
]


def _claim_seeds(R, cell, model, key="gap"):  # one model's values over its seeds in a cell of the central claim
    return R("central_claim/tables")[cell][model][key]["values"]


def _claim_runs(R, method, key="test_ppl"):  # one network's value per seed, from its rows
    return [r[key] for r in R("central_claim/runs") if r["method"] == method]


CLAIM_CELLS = {"av8": "animal-verb/8000", "av40": "animal-verb/40000", "ta8": "time-animal/8000",
               "ta40": "time-animal/40000"}
CLAIM_NETWORKS = ("network_learned", "network_fixed_pca", "network_fixed_random")


# figures the prose inserts with glue, against the same figures computed here from the results files:
# (notebook, glued name, value)
GLUED = [
    # chapter 8: each network's gap (removed minus ordinary sentences) as the mean and sample std of its seeds
    *[("08_central_claim", f"{p}_{m}_gap", lambda R, c=c, m=m: statistics.mean(_claim_seeds(R, c, m)))
      for p, c in CLAIM_CELLS.items() for m in CLAIM_NETWORKS],
    *[("08_central_claim", f"{p}_{m}_gap_std", lambda R, c=c, m=m: statistics.stdev(_claim_seeds(R, c, m)))
      for p, c in CLAIM_CELLS.items() for m in CLAIM_NETWORKS],
    ("08_central_claim", "av8_kn5_gap", lambda R: _claim_seeds(R, "animal-verb/8000", "kn5")[0]),  # one value
    ("08_central_claim", "av8_margin_kn5",  # the learned network minus the 5-gram on the removed sentences
     lambda R: statistics.mean(_claim_seeds(R, "animal-verb/8000", "network_learned", "heldout"))
     - _claim_seeds(R, "animal-verb/8000", "kn5", "heldout")[0]),
    ("08_central_claim", "claim_n_seeds", lambda R: len(R("central_claim/protocol/seeds"))),
    *[("08_central_claim", f"ff_{short}", lambda R, v=v: statistics.mean(_claim_runs(R, f"brown-slice/{v}")))
      for short, v in (("learned", "learned"), ("pca", "fixed_pca"), ("random", "fixed_random"))],
    ("08_central_claim", "ff_train_tokens", lambda R: R("central_claim/brown_design/fixed_features/tokens/0")),
    ("08_central_claim", "nov_near_neighbour_seen_minus_kn5",  # the network minus KN5 where a neighbour covers
     lambda R: statistics.mean(r["scores"]["near_neighbour_seen_minus_kn5"] for r in R("central_claim/runs")
                               if r["method"] == "brown/mlp9")),
    ("11_2_brown", "brown_V", lambda R: R("recurrent_one_seed/V")),
    ("11_2_brown", "nplm_share_of_rnn_params",
     lambda R: R("beyond/parameters") / R("recurrent_one_seed/rows[model=rnn]/parameters")),
    ("11_2_brown", "recurrent_last_changes", _last_changes),
    ("11_2_brown", "one_B", lambda R: R("recurrent_one_seed/rows[model=rnn]/settings/train/batch")),
    ("11_2_brown", "one_clip", lambda R: R("recurrent_one_seed/rows[model=lstm]/settings/stream/clip")),
    ("11_2_brown", "one_keep", lambda R: 1 - R("recurrent_one_seed/rows[model=lstm]/settings/train/dropout_a")),
    ("11_2_brown", "lstm_lr", lambda R: R("recurrent_one_seed/rows[model=lstm]/settings/train/lr")),
    ("11_2_brown", "rnn_lr", lambda R: R("recurrent_one_seed/rows[model=rnn]/settings/train/lr")),
    ("11_2_brown", "rnn_k50", _ratio_k50),
    ("11_2_brown", "bptt_T", lambda R: R("recurrent_one_seed/rows[model=rnn]/settings/stream/T")),
    ("11_2_brown", "rnn_first_below", _first_below),
    ("12_transformer", "brown_V", lambda R: R("table1/V")),
    ("10_output_layers", "two_sqrt_V", lambda R: 2 * math.sqrt(R("output_layers/V"))),
    ("10_output_layers", "full_cost", lambda R: R("output_layers/V") * R("output_layers/network/h")),
    ("10_1_bands", "V", lambda R: R("output_layers/V")),
    *[("12_transformer", f"torch_ratio_{T}_{k}",  # ours / PyTorch, windows of T words on k threads
       lambda R, T=T, k=k: R(f"bench_transformer/rows[n_ctx={T},threads={k}]/ours_over_torch"))
      for T in (4, 32) for k in (1, 2)],
    *[("10_1_bands", f"adaptive_{who}_{k}_x",  # the fast adaptive step over the readable one's / PyTorch's, k threads
       lambda R, who=who, k=k: R(f"bench_adaptive/rows[threads={k}]/ours_over_{'readable' if who == 'fast' else 'torch'}"))
      for who in ("fast", "torch") for k in (1, 2)],
    *[("10_1_bands", f"adaptive_readable_{k}_x",  # the readable step over PyTorch's: a ratio of the median speeds
       lambda R, k=k: R(f"bench_adaptive/rows[threads={k}]/readable_examples_per_s")
       / R(f"bench_adaptive/rows[threads={k}]/torch_examples_per_s")) for k in (1, 2)],
    *[("10_1_bands", f"adaptive_{who}_1_eps", lambda R, who=who: R(f"bench_adaptive/rows[threads=1]/{who}_examples_per_s"))
      for who in ("readable", "torch")],
    ("10_3_brown", "mean_class",  # frequency binning's words per class, |V| / n_c
     lambda R: R("output_layers/V") / R("output_layers/summary/class-frequency/layer/n_classes")),
    *[("10_3_brown", f"class_rows_{end}",  # output rows read per training example, the cheaper and the dearer of
       # the two ways of building the classes (frequency binning, the exchange algorithm)
       lambda R, pick=pick: pick(R(f"output_layers/summary/class-{way}/layer/cost_per_example")
                                 for way in ("frequency", "exchange"))) for end, pick in (("low", min), ("high", max))],
    *[("10_3_brown", f"nce_log_Z_{end}",  # NCE's mean log Z over the test contexts, its lowest and highest seed
       lambda R, pick=pick: pick(R("output_layers/summary/nce/test_log_Z_mean/values")))
      for end, pick in (("low", min), ("high", max))],
    ("10_3_brown", "nce_Z",  # e to NCE's mean log Z (mean over its seeds): Z in the geometric mean over the contexts
     lambda R: math.exp(R("output_layers/summary/nce/test_log_Z_mean/mean"))),
    ("10_3_brown", "cpu_swing",  # one run's dearest epoch over its cheapest in CPU seconds, the largest over the
     # runs, minus one; the epochs timed in part and the effective-sample-size rule's (its work changes) left out
     lambda R: max(max(c) / min(c) - 1 for r in R("output_layers/runs") if r["method"] != "is-ess"
                   if (c := whole_epoch_cpu(r["history"])))),
    *[("11_recurrent", f"gru_fast_x_{h}", lambda R, h=h: R(f"bench_gru_readable/rows[h={h}]/fast_over_readable"))
      for h in (256, 512)],
    ("12_transformer", "ctx_attention_us_last",  # the longest window's attention, microseconds a word
     lambda R: R("bench_transformer_context/rows[n_ctx=1024]/attention_us_per_word")),
    # the attention layers while the scores' multiply-adds (2Tm a layer) are fewer than the projections' (4m^2):
    # T = 4, 16, 64 below 2m = 256; their cheapest and dearest microseconds a word, then the first T at or above 2m
    ("12_transformer", "ctx_attention_short_low",
     lambda R: min(R(f"bench_transformer_context/rows[n_ctx={T}]/attention_us_per_word") for T in (4, 16, 64))),
    ("12_transformer", "ctx_attention_short_high",
     lambda R: max(R(f"bench_transformer_context/rows[n_ctx={T}]/attention_us_per_word") for T in (4, 16, 64))),
    ("12_transformer", "ctx_T_short_last", lambda R: R("bench_transformer_context/rows[n_ctx=64]/n_ctx")),
    ("12_transformer", "ctx_T_rise", lambda R: 2 * R("bench_transformer_context/shape/m")),
    ("12_transformer", "ctx_attention_us_rise",
     lambda R: R("bench_transformer_context/rows[n_ctx=256]/attention_us_per_word")),
    ("12_transformer", "ctx_update_growth",  # the whole update per word, longest window over the shortest
     lambda R: R("bench_transformer_context/rows[n_ctx=1024]/us_per_word")
     / R("bench_transformer_context/rows[n_ctx=4]/us_per_word")),
    ("07_threads", "bench_V", lambda R: R("bench_threads/rows[shape=MLP9,threads=1,batch=128]/V")),
    ("07_threads", "rec_V", lambda R: R("bench_recurrent_threads/rows/0/V")),
    *[("07_threads", f"block_m{M}",  # rank 0's output block at K = 128 in the MPI runs, ms per update
       lambda R, M=M: 1e3 * R(f"parallel/output_block[M={M},K=128]/ranks/0/block")
       / R(f"parallel/output_block[M={M},K=128]/updates")) for M in (1, 2)],
    *[("07_threads", f"{who}_{net}_{q}",  # the quartiles of a recurrent network's 1 -> 2 thread ratios
       lambda R, who=who, key=key, net=net, i=i: (100 if who == "lead_kept" else 1)
       * R(f"bench_recurrent_threads/scaling[cell={net[:-3]},h={net[-3:]}]/{key}_iqr/{i}"))
      for who, key in (("speedup", "ours_2_over_1"), ("torch_speedup", "torch_2_over_1"), ("lead_kept", "lead_kept"))
      for net in ("lstm256", "lstm512", "gru256", "gru512") for i, q in enumerate(("q1", "q3"))],
    # the speedups from 1 to 2 threads of the six networks (MLP1, MLP9, LSTM and GRU at h 256 and 512), lowest and highest
    *[("07_threads", f"speedup_{end}",
       lambda R, pick=pick: pick([s["ours_2_over_1"] for s in R("bench_threads/scaling")]
                                 + [s["ours_2_over_1"] for s in R("bench_recurrent_threads/scaling")]))
      for end, pick in (("low", min), ("high", max))],
    *[("07_threads", f"earlier_MLP9_{i}", lambda R, i=i: R(f"bench_threads_earlier/bench_threads/{i}/scaling[shape=MLP9]/ours_2_over_1"))
      for i in (0, 1)],
    *[("07_threads", f"earlier_lstm512_{i}",
       lambda R, i=i: R(f"bench_threads_earlier/bench_recurrent_threads/{i}/scaling[cell=lstm,h=512]/ours_2_over_1"))
      for i in (0, 1, 2)],
    ("07_threads", "runs_lstm512", lambda R: len(R("bench_threads_earlier/bench_recurrent_threads")) + 1),  # and this one
    ("07_threads", "run_spread",  # the widest range of one network's median speedup over the three runs (MLP9's)
     lambda R: max(max(v) - min(v) for v in _medians_by_network(R).values())),
    *[("07_measured", f"hog_seconds_{end}", lambda R, pick=pick: pick(r["seconds"] for r in R("parallel/hogwild")))
      for end, pick in (("min", min), ("max", max))],
    ("07_measured", "worst_pair_k128",  # the fastest one-process run at K = 128 over the slowest two-process run
     lambda R: min(R("parallel/output_block[M=1,K=128]/repeats_seconds_per_update"))
     / max(R("parallel/output_block[M=2,K=128]/repeats_seconds_per_update"))),
    ("07_parallel", "share_ap_gap",  # the AP model's output share with (n-1)m minus with nm, in percentage points:
     # |V| = 17,964, n = 6, m = 100, h = 60, out = |V|(1 + c + h) over out + h(1 + c) + c, c = (n-1)m or nm
     lambda R: 100 * (_ap_share(500) - _ap_share(600))),
    *QUALITY_GLUED,
    *SAMPLES_AND_BINS_GLUED,
]


@pytest.mark.parametrize("notebook, name, value", GLUED, ids=[f"{nb}:{name}" for nb, name, _ in GLUED])
def test_glued_figure_is_computed_from_the_results(notebook, name, value):
    assert glued_value(BOOK / f"{notebook}.ipynb", name) == pytest.approx(value(R), rel=1e-12, abs=0)


def test_the_checks_can_fail():
    # each forbidden pattern catches what it is meant to, and leaves ordinary prose alone
    bad = ["the issue's five targets", "(commit 4d3df6e, another CPU)", "# NBVAL_IGNORE_OUTPUT",
           "the 0.72 target is met", "our target, a speedup of at least 1.8", "just short of the target",
           "(tested in `tests/test_fused.py`)", "$128 \times 100$"]
    for text in bad:
        assert any(rx.search(text) for rx in FORBIDDEN.values()), text
    good = ["the probability of the target word", "only targets can have negative entries", "1,181,041 tokens",
            "13994528 examples", "a decade of effort", "the (context, target) pairs"]
    for text in good:
        assert not any(rx.search(text) for rx in FORBIDDEN.values()), text
    assert all(rx.search(text) for rx, text in zip(IN_OUTPUTS.values(), ["(commit 3274ecb)", "--runs-dir /tmp/x/runs"]))
    assert not any(rx.search(text) for rx in IN_OUTPUTS.values()
                   for text in ["data/results/scale.json", "train --out runs/ap", "12.5 tokens/s", "runs/table1/MLP9"])
    # a glued figure that is not the one the results file gives is reported
    with pytest.raises(AssertionError):
        test_glued_figure_is_computed_from_the_results("11_2_brown", "rnn_k50", lambda R: _ratio_k50(R, "lstm"))


# --------------------------------------------------------------------------- every figure has a caption
def test_every_figure_of_the_book_has_a_caption_and_a_name_of_its_own():
    """A cell whose stored outputs hold an image shows it as a numbered figure with a caption
    ("mystnb": {"figure": ...}); a cell that also prints tables names its figure with
    "nplm": {"figure_name"} (book/_ext/nplm_docs.py keeps the figure around the image only)."""
    names, figures = [], 0
    for path in sorted(BOOK.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            outputs = cell.get("outputs", [])
            if not any("image/png" in o.get("data", {}) for o in outputs):
                continue
            figures += 1
            meta = cell["metadata"]
            figure = meta.get("mystnb", {}).get("figure", {})
            assert len(figure.get("caption", "").split()) >= 8, f"{path.name} cell {i}: no caption"
            shown = sum("data" in o for o in outputs)  # display outputs, each of which MyST-NB would wrap
            name = figure.get("name") if shown == 1 else meta.get("nplm", {}).get("figure_name")
            assert name and re.fullmatch(r"fig-[a-z0-9-]+", name), f"{path.name} cell {i}: no name"
            assert shown == 1 or "name" not in figure, f"{path.name} cell {i}: a name declared once per output"
            names.append(name)
    assert figures >= 26 and len(set(names)) == len(names)
