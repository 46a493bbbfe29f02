"""Sphinx glue for the book.

1. The API pages: the paper writes the vocabulary size as |V|, which reStructuredText would read as a
   substitution. Escape it in docstrings (not in doctest lines).
2. The chapters: test bookkeeping stays out of the pages. nbval's cell tags (``nbval-ignore-output``,
   ``nbval-skip``, ...) tell the notebook tests how to treat a cell; MyST-NB would copy every tag
   into the page as a CSS class (``tag_nbval-ignore-output``). Those classes are dropped.
3. Figures of cells that also print tables: MyST-NB wraps every display output of a cell with
   ``"mystnb": {"figure": {"caption": ...}}`` in a captioned figure, tables included, and would declare
   a ``name`` once per output. In a cell with several display outputs, the figure is kept only around
   the image; its name comes from ``"nplm": {"figure_name": ...}`` in the cell's metadata.
"""
import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

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


class FigureAroundImageOnly(SphinxTransform):
    default_priority = 500  # before Sphinx numbers the captioned figures (AutoNumbering, 999)

    def apply(self, **kwargs):
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code":
                continue
            figures = [f for f in cell.findall(nodes.figure)
                       if any(c.get("nb_element") == "mime_bundle" for c in f.children)]
            if len(figures) < 2:
                continue
            kept = []
            for fig in figures:
                bundle = next(c for c in fig.children if c.get("nb_element") == "mime_bundle")
                if any(str(m.get("mime_type", "")).startswith("image/") for m in bundle.children):
                    kept.append(fig)
                else:
                    fig.replace_self(bundle)
            name = (cell.get("cell_metadata") or {}).get("nplm", {}).get("figure_name")
            if name and len(kept) == 1:
                fig = kept[0]
                for old in fig["ids"]:  # an automatic id ("id15"): the name gives the anchor instead
                    self.document.ids.pop(old, None)
                fig["ids"] = []
                fig["names"].append(nodes.fully_normalize_name(name))
                self.document.note_explicit_target(fig, fig)


def setup(app):
    app.add_transform(FigureAroundImageOnly)
    app.connect("autodoc-process-docstring", _escape)
    app.connect("doctree-resolved", _drop_test_tags)
    return {"parallel_read_safe": True}
