"""Sphinx glue for the book.

1. The API pages: the paper writes the vocabulary size as |V|, which reStructuredText would read as a
   substitution. Escape it in docstrings (not in doctest lines).
2. The chapters: test bookkeeping stays out of the pages. nbval's cell tags (``nbval-ignore-output``,
   ``nbval-skip``, ...) tell the notebook tests how to treat a cell; MyST-NB would copy every tag
   into the page as a CSS class (``tag_nbval-ignore-output``). Those classes are dropped.
"""
import re

from docutils import nodes

_BARS = re.compile(r"(?<!\\)\|(V|V_i|x|y)\|")
_TEST_TAGS = re.compile(r"^tag_(nbval-|raises-exception$)")


def _escape(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        if not line.lstrip().startswith((">>>", "...")):
            lines[i] = _BARS.sub(r"\\|\1\\|", line)


def _drop_test_tags(app, doctree, docname):
    for node in doctree.findall(nodes.Element):
        classes = node.get("classes")
        if classes and any(_TEST_TAGS.match(c) for c in classes):
            node["classes"] = [c for c in classes if not _TEST_TAGS.match(c)]


def setup(app):
    app.connect("autodoc-process-docstring", _escape)
    app.connect("doctree-resolved", _drop_test_tags)
    return {"parallel_read_safe": True}
