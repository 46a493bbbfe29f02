"""Sphinx glue for readers with no kernel: MathJax on every page, each inline script once.

* MathJax is loaded on every page, not only on pages with equations: the navigation sidebar of
  every page shows chapter titles with math (``\\(C\\)``), and the API and bibliography pages
  have none of their own.
* An extension that calls ``app.add_js_file(None, body=...)`` after the builder started (as
  sphinx-thebe does for its ``const THEBE_JS_URL = ...``) gets its inline script twice in every
  page under Sphinx 7: once kept by the builder with the name ``None``, once re-added from the
  registry with the name ``""`` when writing starts. A ``const`` declared twice is a SyntaxError
  in every reader's console. The builder's copies are dropped here; the registry's remain.
"""


def _drop_early_inline_scripts(app, env, docnames):
    files = getattr(app.builder, "_js_files", None)
    if files is not None:
        files[:] = [js for js in files if js.filename is not None]


def setup(app):
    app.set_html_assets_policy("always")
    app.connect("env-before-read-docs", _drop_early_inline_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
