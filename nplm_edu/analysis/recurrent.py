"""What a recurrent language model does with its unbounded context, measured (aggregates only, never
per-token data): perplexity by distance to the previous paragraph mark, and the mixture with an n-gram.

Right after a paragraph mark ``<p>`` every model has little to go on; deep into a paragraph the
recurrent state holds dozens of words while an n-gram still sees its last n-1. Grouping the test
tokens by how many tokens separate them from the last ``<p>`` shows where the long context pays.
"""

from __future__ import annotations

import numpy as np

from ..models.output import softmax
from ..training.guards import perplexity_of
from .mixture import em_weight, mixed_log_prob

# distance (tokens since the last paragraph mark, the target counted) -> bin
DISTANCE_BINS = [("1", 1, 1), ("2-5", 2, 5), ("6-20", 6, 20), ("21-50", 21, 50), ("51-100", 51, 100),
                 ("101-200", 101, 200), (">200", 201, None)]


def ppl(log_probs) -> float | None:
    """exp(-mean log P) (None for None)."""
    return None if log_probs is None else perplexity_of(log_probs)


def distance_to_mark(inputs: np.ndarray, mark: int, start: int = 10 ** 6) -> np.ndarray:
    """For each target, 1 + the number of inputs read since the last ``mark`` (the target right after
    a mark has distance 1); ``start`` for targets with no mark before them in ``inputs``."""
    idx = np.arange(len(inputs))
    last = np.maximum.accumulate(np.where(inputs == mark, idx, -1))  # position of the last mark read
    return np.where(last >= 0, idx - last + 1, start)


def by_distance(distance: np.ndarray, logs: dict) -> list[dict]:
    """Perplexity of each model (``logs``: name -> (N,) log P) per distance bin."""
    out = []
    for name, lo, hi in DISTANCE_BINS:
        mask = (distance >= lo) & ((distance <= hi) if hi is not None else True)
        k = int(mask.sum())
        out.append({"bin": name, "tokens": k, **{m: (round(ppl(v[mask]), 3) if k else None) for m, v in logs.items()}})
    return out


def mixture_with(valid_a, valid_b, test_a, test_b) -> dict:
    """lam P_a + (1 - lam) P_b with lam fitted by EM on validation (section 4's mixture): the weight and
    the perplexities on validation and test (None without test log-probabilities)."""
    lam = float(em_weight(valid_a, valid_b)[0])
    return {"weight": round(lam, 5), "valid": ppl(mixed_log_prob(valid_a, valid_b, lam)),
            "test": None if test_a is None else ppl(mixed_log_prob(test_a, test_b, lam))}


def gradient_through_time(model, ids: np.ndarray, K: int = 50, positions: int = 128, warmup: int = 50) -> list:
    """How far back a prediction's gradient reaches: the geometric mean over ``positions`` places t of
    the stream ``ids`` of ||dL_t/dh_{t-k}|| for k = 0..K, with L_t = -log P(w_{t+1} | w_1..w_t) and
    h_{t-k} the state k steps earlier (each place read from a zero state ``warmup`` + K words before).

    For the Elman network dL/dh_{t-1} = (dL/dh_t * (1 - h_t^2)) Wh: a product of k Jacobians, which
    shrinks geometrically when their norms are below 1 (the vanishing gradient of Bengio, Simard &
    Frasconi 1994); the LSTM's cell passes dL/ds_{t-1} = f_t dL/ds_t back without that product."""
    from ..models.input import WithInput
    from ..models.lstm import LSTM
    from ..models.rnn import ElmanRNN

    if isinstance(model, WithInput):  # words read through an input layer: the network
        model.fill(ids)  # reads their rows of C, computed by the layer first
        model = model.model
    W = warmup + K + 1  # words read before each prediction
    ends = np.linspace(W - 1, len(ids) - 2, positions).astype(int)  # the last word read at each place
    X = np.stack([ids[e - W + 1:e + 1] for e in ends])  # (B, W): one place per stream
    target = ids[ends + 1]  # (B,)
    is_lstm = isinstance(model, LSTM)
    cache = (LSTM if is_lstm else ElmanRNN).forward(model, X)  # the reference forward: readable caches
    P, h = model.params, model.config.h
    hT = cache["hs"][-1].astype(np.float64)  # (B, h)
    y = hT @ P["U"].T.astype(np.float64) + P["b"]  # (B, |V|)
    p = softmax(y)  # (B, |V|)
    p[np.arange(len(target)), target] -= 1  # dL_t/dy for one token (not a mean)
    gh = p @ P["U"].astype(np.float64)  # dL_t/dh_t  (B, h)
    gs = np.zeros_like(gh)
    Wh = P["Wh"].astype(np.float64)
    norms = []
    for k in range(K + 1):
        norms.append(np.linalg.norm(gh, axis=1))  # ||dL_t/dh_{t-k}||  (B,)
        t = W - 1 - k  # the step whose output is h_{t-k}
        if is_lstm:  # backward through step t (as LSTM.backward, without the parameters' gradients)
            i, f, o, g = (cache["gates"][t][:, j * h:(j + 1) * h].astype(np.float64) for j in range(4))
            tanh_s = np.tanh(cache["ss"][t + 1].astype(np.float64))
            gs = gs + gh * o * (1 - tanh_s ** 2)
            gz = np.concatenate([gs * g * i * (1 - i), gs * cache["prev_s"][t] * f * (1 - f),
                                 gh * tanh_s * o * (1 - o), gs * i * (1 - g ** 2)], axis=1)
            gs = gs * f
        else:  # backward through h_t = tanh(x_t Wx^T + h_{t-1} Wh^T + d)
            gz = gh * (1 - cache["hs"][t + 1].astype(np.float64) ** 2)
        gh = gz @ Wh
    logs = np.log10(np.maximum(np.array(norms), 1e-300))  # (K + 1, B)
    return [float(f"{10 ** v:.4g}") for v in logs.mean(axis=1)]
