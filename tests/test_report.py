"""What chapters show of a results file: commands as a reader types them, and HTML tables."""

from nplm_edu.analysis.report import readable_command, table_html


def test_readable_command_drops_scratch_places_and_names_programs():
    assert readable_command("python -m nplm_edu reproduce output-layers --runs-dir=/tmp/a --methods is") == \
        "python -m nplm_edu reproduce output-layers --methods is"
    assert readable_command("python b.py --tmp /tmp/s --lmplz=/opt/k/bin/lmplz --sizes 1e6") == \
        "python b.py --lmplz=lmplz --sizes 1e6"
    assert readable_command("python -m nplm_edu train --out 'my runs/x'") == "python -m nplm_edu train --out 'my runs/x'"
    assert readable_command("python -m nplm_edu corpus info") == "python -m nplm_edu corpus info"
    assert readable_command("python b.py --json it's.json") == 'python b.py --json \'it\'"\'"\'s.json\''  # unbalanced: words


def test_tables_escape_text_span_headers_and_align_numbers():
    html = table_html([["<unk>", "1,234", "x11.7", "12.5%", ""]], [[("a & b", 2), "c"]], caption="n < m")
    assert "<caption>n &lt; m</caption>" in html and '<th colspan=2>a &amp; b</th>' in html
    assert "<td>&lt;unk&gt;</td>" in html
    assert html.count('<td class="num">') == 4  # 1,234, x11.7, 12.5% and the blank; not the word


def test_lines_are_escaped_one_block_each():
    from nplm_edu.analysis.report import lines_html

    html = lines_html("a <unk> & b", 4.5)
    assert html == '<div class="nplm-lines"><div>a &lt;unk&gt; &amp; b</div><div>4.5</div></div>'
