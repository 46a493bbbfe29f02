"""Where tokens come from: the Brown corpus through NLTK's reader, and UTF-8 text files read in a
streaming pass (memory independent of the length of the longest token)."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path

from ..errors import UserError
from ..progress import progress_bar
from .vocab import PARAGRAPH, TEXT

READ_BYTES = 1 << 22  # text files are read 4 MiB at a time
BROWN_FIX = "python -m nltk.downloader brown"


def brown_reader():
    """NLTK's reader of the Brown corpus (``nltk.corpus.brown``: ``fileids()``, ``categories()``,
    ``paras()`` ...); a one-line UserError naming the fix, not NLTK's long LookupError, if it is absent."""
    try:
        from nltk.corpus import brown

        brown.fileids()  # NLTK looks for the files only now
    except LookupError:
        raise UserError(f"the Brown corpus is not in NLTK_DATA; fix: {BROWN_FIX}") from None
    return brown


def brown_tokens() -> list[str]:
    """Brown as NLTK gives it, file by file, with ``<p>`` after each paragraph and ``<t>`` after
    each text. 1,177,359 tokens on NLTK's copy (1,161,192 words, 15,667 paragraphs, 500 texts)."""
    try:
        from nltk.corpus import brown

        fileids = brown.fileids()
    except LookupError:
        raise UserError(f"the Brown corpus is not in NLTK_DATA; fix: {BROWN_FIX}") from None
    tokens: list[str] = []
    for fid in fileids:
        for para in brown.paras(fid):
            for sent in para:
                tokens.extend(sent)
            tokens.append(PARAGRAPH)
        tokens.append(TEXT)
    return tokens


def brown_source() -> Path:
    """Where NLTK finds Brown (zip or folder); a UserError naming the fix if it is absent."""
    import nltk.data

    for root in nltk.data.path:
        for name in ("brown.zip", "brown"):
            p = Path(root) / "corpora" / name
            if p.exists():
                return p
    raise UserError(f"the Brown corpus is not in NLTK_DATA; fix: {BROWN_FIX}")


def brown_available() -> bool:
    """Whether NLTK can find the Brown corpus (in ``NLTK_DATA`` or its default folders)."""
    try:
        brown_source()
        return True
    except UserError:
        return False


def _check_text_file(path: Path) -> None:
    if not path.exists():
        raise UserError(f"no such file: {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a text file")


def _utf8_pieces(path: Path, read_bytes: int = READ_BYTES, progress: bool = False) -> Iterator[str]:
    """The text of a UTF-8 file, ``read_bytes`` at a time (a leading byte-order mark dropped);
    ``progress``: a bar of the bytes read, shown once reading has taken a second."""
    with open(path, "rb") as f, progress_bar(total=path.stat().st_size, desc=f"reading {path.name}", unit="B",
                                             unit_scale=True, delay=1, leave=False, disable=not progress) as bar:
        pending = f.read(3)  # a byte-order mark (Windows editors write one) is not part of the first word
        done = 3 if pending == codecs.BOM_UTF8 else 0  # bytes decoded so far
        if done:
            pending = b""
        while True:
            raw = f.read(read_bytes)
            data = pending + raw  # pending: the bytes of a character cut by the previous read
            try:
                text, used = codecs.utf_8_decode(data, "strict", not raw)
            except UnicodeDecodeError as e:
                raise UserError(f"{path} is not UTF-8 text (byte {done + e.start}): convert it first, "
                                "e.g. with iconv") from None
            done, pending = done + used, data[used:]
            bar.update(f.tell() - bar.n)
            if text:
                yield text
            if not raw:
                return


def text_token_chunks(path: Path, read_bytes: int = READ_BYTES, progress: bool = False) -> Iterator[list[str]]:
    """A UTF-8 text file as lists of tokens, a piece of the file at a time: whitespace-separated
    tokens, ``<p>`` after every non-empty line that does not already end in a mark (``<p>``, or
    ``<t>``, as ``corpus export`` writes them), so an exported split reads back as the same stream.
    Memory: one piece and one token, whatever the file. ``progress``: a bar of the bytes read."""
    _check_text_file(path)
    carry, empty = "", True  # the unfinished last line
    open_last = None  # the last word already given of that line, if any

    def ended(words: list[str], last: str) -> list[str]:  # a line's words, then its paragraph mark
        return words if last in (PARAGRAPH, TEXT) else words + [PARAGRAPH]

    for piece in _utf8_pieces(path, read_bytes, progress):
        lines = (carry + piece).split("\n")  # a paragraph per line ("\r\n" too: split() drops the "\r")
        carry = lines.pop()
        out: list[str] = []
        for line in lines:
            words = line.split()
            last = words[-1] if words else open_last
            if last is not None:
                out.extend(ended(words, last))
            open_last = None
        if len(carry) > read_bytes:  # a long line: give its finished words now, keep the last one
            words = carry.split()
            carry = words.pop() if words and not carry[-1].isspace() else ""
            out.extend(words)
            open_last = words[-1] if words else open_last
        if out:
            empty = False
            yield out
    words = carry.split()  # the last line, without a final newline
    last = words[-1] if words else open_last
    if last is not None:
        empty = False
        yield ended(words, last)
    if empty:
        raise UserError(f"{path} is empty or holds only whitespace: no tokens to model")


def text_tokens(path: Path) -> list[str]:
    """A UTF-8 text file as one list of tokens (:func:`text_token_chunks`)."""
    return [t for chunk in text_token_chunks(path) for t in chunk]
