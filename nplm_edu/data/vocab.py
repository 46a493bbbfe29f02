"""The marks every corpus shares: paragraph and text ends (section 4 of the paper keeps them as
tokens), and the symbol that stands for rare words."""

PARAGRAPH, TEXT, UNK = "<p>", "<t>", "<unk>"
