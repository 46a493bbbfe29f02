"""Sphinx glue for the API pages: the paper writes the vocabulary size as |V|, which
reStructuredText would read as a substitution. Escape it in docstrings (not in doctest lines)."""
import re

_BARS = re.compile(r"(?<!\\)\|(V|V_i|x|y)\|")


def _escape(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        if not line.lstrip().startswith((">>>", "...")):
            lines[i] = _BARS.sub(r"\\|\1\\|", line)


def setup(app):
    app.connect("autodoc-process-docstring", _escape)
    return {"parallel_read_safe": True}
