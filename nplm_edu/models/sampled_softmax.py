"""Sampled training objectives: importance sampling (Bengio & Senecal 2003, cited in the paper's
section 5) and noise-contrastive estimation (Gutmann & Hyvarinen 2010), applied to language models
by Mnih & Teh (2012).

They change the loss, not the model: the network is the paper's, y = b + U a, P = softmax(y), and
it is evaluated exactly (:meth:`SampledSoftmax.log_prob`: the full softmax over the same U and b).
Only training is cheaper: each batch draws k words S = (s_1, ..., s_k) from a proposal Q (shared by
the K examples) and touches only the rows of U of the targets and of S: O(k) per example.

Importance sampling. The gradient of -log P(w | h) is -dy_w + sum_v P(v | h) dy_v; its second term,
an expectation under the model, is estimated from the samples with the self-normalized weights

    r_j = exp(y_{s_j}) / Q(s_j),    w_j = r_j / sum_i r_i,    sum_v P(v|h) dy_v ~ sum_j w_j dy_{s_j}.

That is the gradient of  L_IS = -y_w + log sum_j exp(y_{s_j} - log Q(s_j)) - log k  (the log of the
importance-sampling estimate of the normalizer Z): dL_IS/dy_w = -1, dL_IS/dy_{s_j} = w_j.
The proposal is the training unigram (add-one), or an adaptive unigram, a context-free stand-in for
the adaptive n-gram proposal of Bengio & Senecal 2008: after every batch Q_a <- (1 - lam) Q_a + lam q,
with q(v) = (1/K) sum over the examples of the weights w_j of the samples s_j = v, an estimate of
the network's average distribution; samples come from 0.9 Q_a + 0.1 unigram, so no word's proposal probability vanishes.

The target itself is not among the samples, so in a context where it is far more probable than
Q(w) says, the estimate of Z rarely contains it, -y_w keeps pushing its score up and nothing pulls
it down: the scores of such words grow without bound (seen on Brown: after a few epochs the
validation perplexity rises). :class:`ImportanceSamplingWithTarget` puts the target among the
candidates (the "sampled softmax" of Jean et al. 2015): a softmax over {w, s_1, ..., s_k} of the
scores y_v - log Q(v), whose self-normalized weights now include the target's own,

    L_T = -log w_0,   w = softmax(y_w - log Q(w), y_{s_1} - log Q(s_1), ...),
    dL_T/dy_w = w_0 - 1,   dL_T/dy_{s_j} = w_j,

a cross-entropy, never below 0.

NCE. Tell the target apart from k noise words drawn from Q, with the normalizer fixed to 1 (Mnih &
Teh 2012; the noise words' term is log kQ / (e^z + kQ) = log sigma(-D)): with D(v) = y_v - log(k Q(v)),

    L_NCE = -log sigma(D(w)) - sum_j log sigma(-D(s_j))
    dL/dy_w = -sigma(-D(w)),   dL/dy_{s_j} = sigma(D(s_j)).

A network trained so is close to self-normalized: log Z = log sum_v exp(y_v) near 0, so y_w alone
is almost log P(w | h) (:meth:`SampledSoftmax.log_normalizer` measures how far).

Bengio & Senecal did not fix k: they drew samples until the effective sample size of the weights,
ESS = (sum_j r_j)^2 / sum_j r_j^2, reached a threshold (:class:`ESSImportanceSampling`, with the
adaptive proposal). Self-normalized importance sampling is biased for finite k: the estimate of the
expectation is a ratio of two sample means, whose expectation is not the ratio of their expectations;
the bias shrinks as 1/k, and the ESS says how many samples the weights are really worth.

Randomness: the samples of a batch come from ``numpy.random.default_rng([seed, t])`` with t the
number of batches drawn so far, kept with the weights (``params["draws"]``, as is the adaptive
Q_a): the same seed draws the same samples, also after a checkpoint is resumed.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .output import log_softmax
from .sparse_output import Rows, SparseOutputLayer, check_counts, check_sizes, check_targets
from .tree_softmax import log_sigmoid, sigmoid


def check_k(k, V: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UserError(f"the number of samples k must be a whole number >= 1, got {k!r}")
    return int(k)


class SampledSoftmax(SparseOutputLayer):
    """The full softmax's parameters U (|V|, h) and b (|V|,), drawn exactly as
    :class:`~nplm_edu.models.output.FullSoftmax` draws them, trained on k samples from the unigram
    ``counts`` (add-one: every word can be drawn); exact evaluation. Subclasses define the loss."""

    name = "sampled"
    adaptive = False

    def __init__(self, V: int, h: int, counts, k: int, seed: int = 0):
        check_sizes(V, h)
        self.V, self.h, self.k, self.seed = V, h, check_k(k, V), seed
        self.widths = {"U": h}
        self.decayed = ("U",)
        counts = check_counts(counts, V) + 1.0
        self.unigram = counts / counts.sum()  # (|V|,) Q, add-one
        self.state = ("draws", "Q_adapt") if self.adaptive else ("draws",)
        self.fixed_samples = None  # set to an array to train on given samples (gradient checks)

    def init_params(self, rng, dtype) -> dict:
        r = 1 / np.sqrt(self.h)
        P = {"U": rng.uniform(-r, r, size=(self.V, self.h)).astype(dtype),  # (|V|, h) as FullSoftmax
             "b": np.zeros(self.V, dtype), "draws": np.zeros(1, np.int64)}
        if self.adaptive:
            P["Q_adapt"] = self.unigram.copy()  # (|V|,) float64
        return P

    def proposal(self, params) -> np.ndarray:
        """Q (|V|,) the samples are drawn from."""
        return self.unigram

    def sample(self, params) -> tuple[np.ndarray, np.ndarray]:
        """k words S (k,) from Q, with replacement, and log Q(S) (k,)."""
        Q = self.proposal(params)
        if self.fixed_samples is not None:
            S = np.asarray(self.fixed_samples)
        else:
            rng = np.random.default_rng([self.seed, int(params["draws"][0])])
            params["draws"][0] += 1
            cdf = np.cumsum(Q)  # (|V|,)
            S = np.minimum(np.searchsorted(cdf, rng.random(self.k) * cdf[-1], side="right"), self.V - 1)
        return S, np.log(Q[S])

    def _scores(self, P, inputs, targets):
        """Draw the batch's samples S; return (a, targets, S, log Q(S), y_w (K,) of the targets,
        Y (K, k) of the samples): only those rows of U are read."""
        a = self.input(inputs)
        targets = check_targets(targets, self.V)
        S, logQ = self.sample(P)
        yt = np.einsum("kh,kh->k", a, P["U"][targets]) + P["b"][targets]  # (K,)
        Y = a @ P["U"][S].T + P["b"][S]  # (K, k)
        return a, targets, S, logQ, yt, Y

    def _sparse_grads(self, P, a, targets, S, gyt, gY):
        """From dL/dy_w (K,) and dL/dY (K, k) to dL/da and the gradients of the rows of U, b used."""
        ga = gyt[:, None] * P["U"][targets] + gY @ P["U"][S]  # (K, h)
        rows = np.r_[targets, S]
        gU = np.concatenate([gyt[:, None] * a, gY.T @ a])  # (K + k, h)
        gb = np.r_[gyt, gY.sum(axis=0)]  # (K + k,)
        return {"U": ga}, {"U": Rows(rows, gU), "b": Rows(rows, gb)}

    # ----------------------------------------------------------------- exact evaluation
    def scores(self, params, a) -> np.ndarray:
        return a @ params["U"].T + params["b"]  # (K, |V|) y = b + U a

    def log_normalizer(self, params, inputs, rows: int = 128) -> np.ndarray:
        """log Z = log sum_v exp(y_v) of each context: (K,) float64 (0 for a self-normalized network),
        ``rows`` contexts at a time so the (rows, |V|) scores stay in cache."""
        a = self.input(inputs)
        out = np.empty(len(a))
        for i in range(0, len(a), rows):
            y = self.scores(params, a[i:i + rows])  # (rows, |V|)
            mx = y.max(axis=1, keepdims=True)
            y -= mx
            np.exp(y, out=y)
            out[i:i + rows] = mx[:, 0] + np.log(y.sum(axis=1).astype(np.float64))  # pairwise sum, then float64
        return out

    def log_prob(self, params, inputs, targets):
        """Exact log P(target | h) = y_w - log Z: (K,) float64 (the full softmax's cost)."""
        a = self.input(inputs)
        targets = check_targets(targets, self.V)
        yt = (np.einsum("kh,kh->k", a, params["U"][targets]) + params["b"][targets]).astype(np.float64)
        return yt - self.log_normalizer(params, inputs)

    def log_prob_unnormalized(self, params, inputs, targets):
        """y_w: log P(w | h) if the network were self-normalized (Z = 1): (K,) float64, O(1) per word."""
        a = self.input(inputs)
        targets = check_targets(targets, self.V)
        return (np.einsum("kh,kh->k", a, params["U"][targets]) + params["b"][targets]).astype(np.float64)

    def log_probs(self, params, inputs):
        return log_softmax(self.scores(params, self.input(inputs)).astype(np.float64))  # (K, |V|)


class ImportanceSampling(SampledSoftmax):
    """L_IS with self-normalized importance weights (module docstring), unigram proposal;
    ``adaptive=True`` (:class:`AdaptiveImportanceSampling`) adapts it during training."""

    name = "importance sampling"

    def loss(self, params, inputs, targets):
        a, targets, S, logQ, yt, Y = self._scores(params, inputs, targets)
        logr = (Y - logQ).astype(np.float64)  # (K, k) log r_j = y_{s_j} - log Q(s_j)
        mx = logr.max(axis=1, keepdims=True)
        e = np.exp(logr - mx)
        lse = mx[:, 0] + np.log(e.sum(axis=1))  # (K,) log sum_j r_j
        loss = float(np.mean(lse - np.log(len(S)) - yt))  # the log of the IS estimate of -log P
        w = e / e.sum(axis=1, keepdims=True)  # (K, k) self-normalized weights
        return loss, {"a": a, "targets": targets, "S": S, "w": w}

    def backward_sparse(self, params, cache):
        a, targets, S, w = cache["a"], cache["targets"], cache["S"], cache["w"]
        K = len(targets)
        gyt = np.full(K, -1.0 / K, a.dtype)  # dL/dy_w = -1 / K
        gY = (w / K).astype(a.dtype)  # (K, k) dL/dy_{s_j} = w_j / K
        if self.adaptive and self.fixed_samples is None:
            self.adapt(params, S, w)
        return self._sparse_grads(params, a, targets, S, gyt, gY)

    def adapt(self, params, S, w, lam: float = 0.01) -> None:
        """Q_a <- (1 - lam) Q_a + lam q, q(v) = mean over the batch of the weights of the samples equal to v."""
        Q = params["Q_adapt"]
        Q *= 1 - lam
        np.add.at(Q, S, lam * w.mean(axis=0))  # (k,) -> the sampled words


class AdaptiveImportanceSampling(ImportanceSampling):
    """Importance sampling from 0.9 Q_a + 0.1 unigram, Q_a adapted to the network (module docstring)."""

    name = "importance sampling, adaptive"
    adaptive = True

    def proposal(self, params):
        return 0.9 * params["Q_adapt"] + 0.1 * self.unigram


def effective_sample_size(logr) -> np.ndarray:
    """Kish's effective sample size (sum_j r_j)^2 / sum_j r_j^2 of each row of log importance weights
    log r (K, k): (K,) float64, from k (all weights equal) down to 1 (one weight dominates). Computed
    from r_j / max r, so no exp overflows."""
    logr = np.asarray(logr, dtype=np.float64)
    e = np.exp(logr - logr.max(axis=1, keepdims=True))  # (K, k) r_j / max_i r_i, largest 1
    return e.sum(axis=1) ** 2 / (e * e).sum(axis=1)


class ESSImportanceSampling(AdaptiveImportanceSampling):
    """Importance sampling with the effective-sample-size rule of Bengio & Senecal (2003), here with a
    context-free proposal (the adaptive unigram, where their 2008 paper adapts an n-gram of the context): a sample
    size set by the effective sample size. A batch draws ``k`` words from the proposal, then ``k``
    more, ..., until the mean over the batch's examples of ESS = (sum_j r_j)^2 / sum_j r_j^2
    (:func:`effective_sample_size`) reaches ``ess_min``, or the sample holds ``k_max`` words.
    When the weights concentrate on a few samples (the proposal far from the network), the sample
    grows instead of the gradient estimate resting on one or two words. ``k_used``: the sample size
    of each batch since it was last emptied (the trainer's epoch line reads and empties it)."""

    name = "importance sampling, ESS"

    def __init__(self, V: int, h: int, counts, k: int, seed: int = 0, ess_min: float = 50.0, k_max: int = 2000):
        super().__init__(V, h, counts, k, seed)
        if not (isinstance(ess_min, (int, float)) and 1 <= ess_min):
            raise UserError(f"ess_min (the effective sample size to reach) must be >= 1, got {ess_min!r}",
                            setting="ess_min")
        if isinstance(k_max, bool) or not isinstance(k_max, (int, np.integer)) or k_max < self.k:
            raise UserError(f"k_max (the largest sample) must be a whole number >= k = {self.k}, got {k_max!r}",
                            setting="k_max")
        self.ess_min, self.k_max = float(ess_min), int(k_max)
        self.k_used: list[int] = []

    def _scores(self, P, inputs, targets):
        """As :meth:`SampledSoftmax._scores`, the sample grown block by block until the ESS is reached."""
        a, targets, S, logQ, yt, Y = super()._scores(P, inputs, targets)
        while self.fixed_samples is None and len(S) < self.k_max:
            if effective_sample_size(Y - logQ).mean() >= self.ess_min:
                break
            S2, logQ2 = (v[:self.k_max - len(S)] for v in self.sample(P))  # k more words (up to k_max)
            S, logQ = np.r_[S, S2], np.r_[logQ, logQ2]
            Y = np.concatenate([Y, a @ P["U"][S2].T + P["b"][S2]], axis=1)  # (K, len(S))
        self.k_used.append(len(S))
        return a, targets, S, logQ, yt, Y


class ImportanceSamplingWithTarget(ImportanceSampling):
    """Importance sampling with the target among the candidates (module docstring): L_T = -log w_0."""

    name = "importance sampling, target among the samples"

    def loss(self, params, inputs, targets):
        a, targets, S, logQ, yt, Y = self._scores(params, inputs, targets)
        logit = np.concatenate([(yt - np.log(self.proposal(params)[targets]))[:, None], Y - logQ],
                               axis=1).astype(np.float64)  # (K, 1 + k) y_v - log Q(v), the target first
        logit -= logit.max(axis=1, keepdims=True)
        w = np.exp(logit)
        w /= w.sum(axis=1, keepdims=True)  # (K, 1 + k) self-normalized weights, the target's included
        return float(np.mean(-np.log(w[:, 0]))), {"a": a, "targets": targets, "S": S, "w": w}

    def backward_sparse(self, params, cache):
        a, w = cache["a"], cache["w"]
        K = len(w)
        gyt = ((w[:, 0] - 1) / K).astype(a.dtype)  # dL/dy_w = (w_0 - 1) / K
        gY = (w[:, 1:] / K).astype(a.dtype)  # (K, k) dL/dy_{s_j} = w_j / K
        return self._sparse_grads(params, a, cache["targets"], cache["S"], gyt, gY)


class NCESoftmax(SampledSoftmax):
    """Noise-contrastive estimation with k noise words from the unigram, normalizer fixed to 1.

    The biases start at b = log Q (the unigram), not 0: with Z fixed to 1 the network must start
    near normalized (sum_v exp(b_v) = 1), as a network with b = 0 has Z about |V| and NCE would spend
    its first updates pushing every score down (its loss starts above 100 on Brown)."""

    name = "NCE"

    def init_params(self, rng, dtype) -> dict:
        P = super().init_params(rng, dtype)
        P["b"][:] = np.log(self.unigram)  # (|V|,) log Q: exp(y) sums to about 1 at the start
        return P

    def loss(self, params, inputs, targets):
        a, targets, S, logQ, yt, Y = self._scores(params, inputs, targets)
        logk = np.log(self.k)
        Dt = (yt - logk - np.log(self.proposal(params)[targets])).astype(np.float64)  # (K,) D(w)
        DS = (Y - logk - logQ).astype(np.float64)  # (K, k) D(s_j)
        loss = float(np.mean(-log_sigmoid(Dt) - log_sigmoid(-DS).sum(axis=1)))
        return loss, {"a": a, "targets": targets, "S": S, "Dt": Dt, "DS": DS}

    def backward_sparse(self, params, cache):
        a, targets, S = cache["a"], cache["targets"], cache["S"]
        K = len(targets)
        gyt = (-sigmoid(-cache["Dt"]) / K).astype(a.dtype)  # (K,) dL/dy_w = -sigma(-D(w)) / K
        gY = (sigmoid(cache["DS"]) / K).astype(a.dtype)  # (K, k) dL/dy_s = sigma(D(s)) / K
        return self._sparse_grads(params, a, targets, S, gyt, gY)
