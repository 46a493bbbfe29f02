"""nplm_edu: Bengio et al. (2003), A Neural Probabilistic Language Model, in numpy."""
__version__ = "0.1.0"
