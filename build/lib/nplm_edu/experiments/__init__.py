"""The experiments behind the book's tables, one module per ``reproduce`` target, and what they share
(:mod:`.common`: the results writer and its provenance block)."""
