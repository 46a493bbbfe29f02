"""The n-gram baselines of Table 1: counting, maximum likelihood, deleted interpolation,
modified Kneser-Ney and class-based n-grams, all vectorized with numpy.

    counts.py   every n-gram of orders 1..n as sorted packed integer keys (a trie)
    models.py   MaximumLikelihood and KneserNey (one recursion, two kinds of counts)
    interp.py   InterpolatedTrigram, the paper's deleted interpolation (section 4.1), EM weights
    classes.py  exchange_classes (word clustering) and ClassNgram
    build.py    a model by name, fitted and scored (``python -m nplm_edu ngram``, ``reproduce ngrams``)

Every model subclasses :class:`nplm_edu.models.lm.LanguageModel`: ``fit(train_ids)``, ``probs(contexts)``
-> (K, |V|), ``log_prob(contexts, targets)`` -> (K,), ``perplexity(contexts, targets)``.
"""

from .classes import ClassNgram, exchange_classes
from .build import build_model, evaluate
from .counts import NgramCounts
from .interp import InterpolatedTrigram
from .models import KneserNey, MaximumLikelihood, modified_kn_discounts

__all__ = ["NgramCounts", "MaximumLikelihood", "KneserNey", "InterpolatedTrigram", "ClassNgram",
           "exchange_classes", "modified_kn_discounts", "build_model", "evaluate"]
