"""A decoder-only Transformer language model (Vaswani et al. 2017), written to be read.

The NPLM reads a fixed window of n-1 words, each word a row of the shared table C, and mixes them
with one weight matrix per slot. The decoder-only Transformer keeps C, the window (now n_ctx words),
a nonlinearity and the softmax over |V|, and replaces the fixed mixing by attention: which earlier
words a position reads, and how much, is computed from the words themselves. Since attention by
itself ignores order, each position t gets a learned vector P[t] added to its word's features.

For a batch of K windows of T <= n_ctx words X (K, T) (rows are examples, as everywhere here)::

    x = C[X] + P[:T]                                       # (K, T, m)  words and positions
    for each of the L blocks:
        x = x + Attention(LayerNorm1(x))                   # (K, T, m)  causal multi-head self-attention
        x = x + W2 GELU(W1 LayerNorm2(x) + b1) + b2        # (K, T, m)  a position-wise MLP, d_ff units
    a = LayerNorm_f(x)                                     # (K, T, m)
    y = b + U a                                            # (K, T, |V|) the output layer (full softmax)
    P(w_{t+1} = i | w_1 .. w_t) = softmax(y_t)_i

The position t predicts the word after it, so one window gives T predictions, each reading only
positions <= t (the causal mask, :func:`nplm_edu.models.attention.self_attention`). The output layer
is the package's :class:`~nplm_edu.models.output.FullSoftmax` with one input, a, multiplied by U:
its own matrix, or tied to the table (U = C, as in Mnih & Hinton's log-bilinear model 2007; measured
in recurrent language models by Press & Wolf 2017 and Inan et al. 2017; GPT-2 ties them too). Layer
normalization (Ba, Kiros & Hinton 2016) comes before each sublayer, as in GPT-2 (Radford et al.
2019), not after as in Vaswani et al. (2017): the residual path x -> x + f(x) (He et al. 2016) then
carries the gradient back through every block unchanged, as the LSTM's cell does through time.

The MLP's nonlinearity is GELU (Hendrycks & Gimpel 2016), GPT's choice, in its tanh form: unlike
ReLU it is smooth, so central differences check its gradient everywhere, not only away from the kink
at 0. The attention has no biases (through Wq, Wk and Wv the layer norm's shift just before it
acts as the queries', keys' and values' bias).

Initialisation (from a numpy Generator, by default ``default_rng(config.seed)``, in this order):
C, P ~ U(-0.1, 0.1); per block Wq, Wk, Wv, W1 ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), Wo and W2 the
same scaled by 1/sqrt(2L) (each block adds two terms to the residual sum, GPT-2's scaling); layer
norm gains 1, every shift and bias 0; the output layer's U ~ U(-1/sqrt(m), 1/sqrt(m)), b = 0. Each
backward line is written out beside its forward, the pieces in :mod:`nplm_edu.models.attention`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from .attention import gelu, gelu_backward, layer_norm, layer_norm_backward, self_attention, self_attention_backward
from .nplm import check_common
from .lm import LanguageModel
from .output import FullSoftmax
from .rnn import check_batch

BLOCK_PARAMS = ("g1", "beta1", "Wq", "Wk", "Wv", "Wo", "g2", "beta2", "W1", "b1", "W2", "b2")  # one block's, in order


@dataclass
class TransformerConfig:
    """Shape of the model: |V| words, at most n_ctx positions, m features per word and position,
    ``heads`` attention heads (each m / heads features), ``layers`` blocks (L), d_ff hidden units
    in each block's MLP, ``tie``: the output layer's U is the table C."""

    V: int
    n_ctx: int = 32
    m: int = 64
    heads: int = 4
    layers: int = 2
    d_ff: int = 256
    tie: bool = True
    dtype: str = "float32"
    seed: int = 0

    def validate(self) -> None:
        check_common(self)
        for name in ("n_ctx", "m", "heads", "layers", "d_ff"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1, got {getattr(self, name)}", setting=name)
        if self.m % self.heads:
            raise UserError(f"heads must divide m (each head reads m / heads features), got m={self.m}, "
                            f"heads={self.heads}", setting="heads")


def key(layer: int, name: str) -> str:
    """The name of a block's parameter in ``params``: block 0's Wq is "0.Wq"."""
    return f"{layer}.{name}"


# ----------------------------------------------------------------- one block
def block_forward(params: dict, layer: int, x, heads: int):
    """x + Attention(LN1(x)), then + MLP(LN2(.)): (K, T, m) -> (K, T, m), and the cache."""
    p = {n: params[key(layer, n)] for n in BLOCK_PARAMS}
    u1, ln1 = layer_norm(x, p["g1"], p["beta1"])  # (K, T, m)
    att, att_cache = self_attention(u1, p["Wq"], p["Wk"], p["Wv"], p["Wo"], heads)  # (K, T, m)
    x = x + att  # (K, T, m) the first residual sum
    u2, ln2 = layer_norm(x, p["g2"], p["beta2"])  # (K, T, m)
    o = u2 @ p["W1"].T + p["b1"]  # (K, T, d_ff)
    a, gelu_cache = gelu(o)  # (K, T, d_ff)
    x = x + a @ p["W2"].T + p["b2"]  # (K, T, m) the second residual sum
    return x, {"ln1": ln1, "att": att_cache, "ln2": ln2, "u2": u2, "a": a, "gelu": gelu_cache}


def block_backward(params: dict, layer: int, gx, cache):
    """dL/dx at the block's input, and its parameters' gradients keyed like ``params``, from dL/dx at its output."""
    p = {n: params[key(layer, n)] for n in BLOCK_PARAMS}
    g = {}
    # backward through x = x + a W2^T + b2: the residual passes gx on unchanged, plus the MLP's path
    g["b2"] = gx.sum(axis=(0, 1))  # (m,)
    g["W2"] = np.einsum("kti,ktj->ij", gx, cache["a"], optimize=True)  # (m, d_ff)
    ga = gx @ p["W2"]  # (K, T, d_ff)
    # backward through a = GELU(o)
    go = gelu_backward(ga, cache["gelu"])  # (K, T, d_ff)
    # backward through o = u2 W1^T + b1
    g["b1"] = go.sum(axis=(0, 1))  # (d_ff,)
    g["W1"] = np.einsum("kti,ktj->ij", go, cache["u2"], optimize=True)  # (d_ff, m)
    gu2 = go @ p["W1"]  # (K, T, m)
    # backward through u2 = LN2(x), added to the residual's gradient
    gx_ln, g["g2"], g["beta2"] = layer_norm_backward(gu2, cache["ln2"])
    gx = gx + gx_ln  # (K, T, m) dL/dx after the first residual sum
    # backward through x = x + Attention(u1)
    gu1, g_att = self_attention_backward(gx, cache["att"], p["Wq"], p["Wk"], p["Wv"], p["Wo"])
    g.update(g_att)
    # backward through u1 = LN1(x), added to the residual's gradient
    gx_ln, g["g1"], g["beta1"] = layer_norm_backward(gu1, cache["ln1"])
    gx = gx + gx_ln  # (K, T, m) dL/dx at the block's input
    return gx, {key(layer, n): g[n] for n in BLOCK_PARAMS}


def init_block(rng: np.random.Generator, m: int, d_ff: int, layers: int, dt) -> dict:
    """One block's parameters (see the module docstring), drawn in the order of BLOCK_PARAMS."""
    def uniform(rows, cols, scale=1.0):
        r = scale / np.sqrt(cols)  # cols = fan_in
        return rng.uniform(-r, r, size=(rows, cols)).astype(dt)

    residual = 1 / np.sqrt(2 * layers)  # Wo and W2 add to the residual sum: 2L terms in all
    ones, zeros = np.ones(m, dt), np.zeros(m, dt)
    return {"g1": ones.copy(), "beta1": zeros.copy(), "Wq": uniform(m, m), "Wk": uniform(m, m),
            "Wv": uniform(m, m), "Wo": uniform(m, m, residual), "g2": ones.copy(), "beta2": zeros.copy(),
            "W1": uniform(d_ff, m), "b1": np.zeros(d_ff, dt), "W2": uniform(m, d_ff, residual), "b2": zeros.copy()}


# ----------------------------------------------------------------- the model
class Transformer:
    """A decoder-only Transformer language model (Vaswani et al. 2017; see the module docstring).

    ``params`` holds C (|V|, m), P (n_ctx, m), every block's parameters ("0.Wq", ...), the final
    layer norm's gf and betaf, and the output layer's U (|V|, m) and b (|V|,); tied, U is C.

    Read as a window model (``order`` = n_ctx + 1, like an n-gram model's), :meth:`next_log_prob` and
    :meth:`perplexity` score each word from the n_ctx words before it, read at the window's last position."""

    kind = "transformer"

    def __init__(self, config: TransformerConfig, rng: np.random.Generator | None = None):
        config.validate()
        self.config, self.V = config, config.V
        V, m, dt = config.V, config.m, np.dtype(config.dtype)
        rng = np.random.default_rng(config.seed) if rng is None else rng
        self.params: dict[str, np.ndarray] = {
            "C": rng.uniform(-0.1, 0.1, size=(V, m)).astype(dt),  # (|V|, m) the words' features
            "P": rng.uniform(-0.1, 0.1, size=(config.n_ctx, m)).astype(dt),  # (n_ctx, m) the positions'
        }
        for layer in range(config.layers):
            block = init_block(rng, m, config.d_ff, config.layers, dt)
            self.params.update({key(layer, n): block[n] for n in BLOCK_PARAMS})
        self.params.update({"gf": np.ones(m, dt), "betaf": np.zeros(m, dt)})
        self.output = FullSoftmax(V, {"U": m})
        self.params.update(self.output.init_params(rng, dt))
        self.tied = config.tie
        self.order = config.n_ctx + 1  # a window model of order n_ctx + 1: n_ctx words of context
        if self.tied:
            self.params["U"] = self.params["C"]  # one array: y = b + C a
        weights = ("Wq", "Wk", "Wv", "Wo", "W1", "W2")
        self.decayed = ("C", "P") + tuple(key(i, n) for i in range(config.layers) for n in weights) + \
            (() if self.tied else ("U",))  # never the gains, shifts and biases

    def num_params(self) -> int:
        """Free parameters (a tied U counted once)."""
        return int(sum(p.size for name, p in self.params.items() if not (self.tied and name == "U")))

    def check_windows(self, X, Y=None):
        """X (K, T) and Y (K, T) word ids with 1 <= T <= n_ctx, else one clear UserError."""
        X, Y = check_batch(X, Y, self.V)
        if X.shape[1] > self.config.n_ctx:
            raise UserError(f"windows of {X.shape[1]} words are longer than n_ctx = {self.config.n_ctx}",
                            setting="n_ctx")
        return X, Y

    # ----------------------------------------------------------------- forward
    def forward(self, X) -> dict:
        """Everything up to the output layer's input a (K T, m); caches what :meth:`backward` needs."""
        P, (K, T), cfg = self.params, X.shape, self.config
        x = P["C"][X] + P["P"][:T]  # (K, T, m) x_t = C(w_t) + P[t]
        blocks = []
        for layer in range(cfg.layers):
            x, cache = block_forward(P, layer, x, cfg.heads)  # (K, T, m)
            blocks.append(cache)
        a, ln_f = layer_norm(x, P["gf"], P["betaf"])  # (K, T, m)
        return {"X": X, "blocks": blocks, "ln_f": ln_f, "inputs": {"U": a.reshape(K * T, cfg.m)}}

    # ----------------------------------------------------------------- backward
    def backward(self, cache: dict, ga) -> dict:
        """Every parameter's gradient but the output layer's, from dL/da (K T, m)."""
        P, X, cfg = self.params, cache["X"], self.config
        K, T = X.shape
        grads = {}
        # backward through a = LN_f(x)
        gx, grads["gf"], grads["betaf"] = layer_norm_backward(ga.reshape(K, T, cfg.m), cache["ln_f"])
        for layer in reversed(range(cfg.layers)):  # backward through the blocks, last first
            gx, g_block = block_backward(P, layer, gx, cache["blocks"][layer])
            grads.update(g_block)
        # backward through x = C[X] + P[:T]: each position's gradient to its row of P ...
        grads["P"] = np.zeros_like(P["P"])  # (n_ctx, m)
        grads["P"][:T] = gx.sum(axis=0)
        # ... and to its word's row of C (repeated words add up)
        grads["C"] = np.zeros_like(P["C"])  # (|V|, m)
        np.add.at(grads["C"], X.ravel(), gx.reshape(-1, cfg.m))
        return grads

    def loss_and_grads(self, X, Y):
        """Mean negative log-likelihood of the K T next words Y (K, T) after the windows X (K, T)
        (Y[:, t] = the word after X[:, t]) and its gradient for every parameter, keyed like
        ``params`` (tied: "C" holds dL/dC + dL/dU and there is no "U")."""
        X, Y = self.check_windows(X, Y)
        cache = self.forward(X)
        loss, out_cache = self.output.loss(self.params, cache["inputs"], Y.ravel())
        g_in, grads = self.output.backward(self.params, out_cache)
        grads.update(self.backward(cache, g_in["U"]))
        if self.tied:
            grads["C"] += grads.pop("U")  # one array: its gradient is the sum of both uses
        return loss, {k: grads[k] for k in self.params if k in grads}

    # ----------------------------------------------------------------- probabilities
    def log_probs(self, X) -> np.ndarray:
        """log P(w_{t+1} = i | w_1 .. w_t) for every position t and word i: (K, T, |V|) float64."""
        X, _ = self.check_windows(X)
        K, T = X.shape
        return self.output.log_probs(self.params, self.forward(X)["inputs"]).reshape(K, T, self.V)

    def probs(self, X) -> np.ndarray:
        """P(w_{t+1} = i | w_1 .. w_t): (K, T, |V|) float64, each position's row summing to 1."""
        return np.exp(self.log_probs(X))

    def log_prob(self, X, Y) -> np.ndarray:
        """log P(Y[k, t] | X[k, :t+1]): (K, T) float64."""
        X, Y = self.check_windows(X, Y)
        lp = self.output.log_prob(self.params, self.forward(X)["inputs"], Y.ravel())  # (K T,)
        return lp.reshape(X.shape)

    # ----------------------------------------------------------------- a window model
    def window_model(self) -> "WindowReader":
        """This model through the interface the package's other language models share (one object, kept)."""
        if getattr(self, "_window", None) is None:
            self._window = WindowReader(self)
        return self._window

    def next_log_prob(self, contexts, targets) -> np.ndarray:
        """log P(targets[k] | contexts[k]) (K,) float64, contexts (K, T) the T <= n_ctx words before
        each target, read at the window's last position (the others are computed and not scored)."""
        X, _ = self.check_windows(contexts)
        K, T = X.shape
        a = self.forward(X)["inputs"]["U"].reshape(K, T, self.config.m)[:, -1]  # (K, m) the last position
        return self.output.log_prob(self.params, {"U": a}, np.asarray(targets))

    def perplexity(self, contexts, targets, batch: int = 1024) -> float:
        """exp of the mean -log P over windows (contexts (N, T), targets (N,)), ``batch`` at a time:
        with :meth:`~nplm_edu.data.corpus.Corpus.windows` of order n_ctx + 1, every word of a split is
        predicted from the n_ctx words before it (one window, so n_ctx positions computed, per word)."""
        contexts = np.asarray(contexts)
        total = sum(float(self.next_log_prob(contexts[i:i + batch], targets[i:i + batch]).sum())
                    for i in range(0, len(targets), batch))
        return float(np.exp(-total / len(targets)))

    def batch_bytes(self, K: int) -> int:
        """A lower bound on one update's memory for K windows of n_ctx words: their scores (K n_ctx, |V|)."""
        return K * self.config.n_ctx * self.V * np.dtype(self.config.dtype).itemsize


class WindowReader(LanguageModel):
    """A Transformer read through the interface of the package's other language models.

    As a window model of order n_ctx + 1 (``order``, :meth:`probs`, :meth:`log_prob` of contexts
    (K, n_ctx)): each word from the n_ctx words before it, at the window's last position. For drawing
    text (:func:`nplm_edu.analysis.sampling.sample`) it reads like a recurrent model whose state is
    the last n_ctx words read: a prompt of any length (at least one word) is read, the window grows
    with each word drawn up to n_ctx words, then slides."""

    def __init__(self, model: Transformer):
        self.model, self.V, self.order = model, model.V, model.order
        self.output, self.params = model.output, model.params

    def num_params(self) -> int:
        return self.model.num_params()

    def log_prob(self, contexts, targets) -> np.ndarray:
        return self.model.next_log_prob(contexts, targets)

    def probs(self, contexts) -> np.ndarray:
        return self.model.probs(contexts)[:, -1]  # (K, |V|) at the last position

    # ----------------------------------------------------------------- read like a recurrent model
    def initial_state(self, B: int) -> tuple:
        """No word read yet: (B, n_ctx) ids, -1 where no word stands (the window fills from the right)."""
        return (np.full((B, self.model.config.n_ctx), -1, np.int64),)

    def forward(self, X, state) -> dict:
        """Read X (B, T) after the words of ``state``: the last position's features (B, m) as the
        output layer's input, and the new state (the last n_ctx words read, the same count in every row)."""
        words = np.concatenate([state[0], np.asarray(X, np.int64)], axis=1)[:, -self.model.config.n_ctx:]
        n = int((words[0] >= 0).sum())  # the words read so far, at most n_ctx
        K = words.shape[0]
        a = self.model.forward(words[:, -n:])["inputs"]["U"].reshape(K, n, -1)[:, -1]  # (B, m)
        return {"inputs": {"U": a}, "state": (words,)}
