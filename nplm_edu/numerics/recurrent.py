"""The recurrent language models made fast: the same arithmetic as the references
(:mod:`nplm_edu.models.rnn`, :mod:`nplm_edu.models.lstm`, :mod:`nplm_edu.models.gru`; the same numbers
in float64), arranged for speed.

What changes against the reference:

- the input part of every step, x_t Wx^T + d, is ONE product for all T B positions before the loop
  (only h_{t-1} Wh^T, all four gates of the LSTM at once, stays inside the loop; the GRU's is two
  products, U^{z,r} h_{t-1} for both gates, then U^n (r_t h_{t-1}), since r_t comes first);
- the gate nonlinearities are applied in place (the LSTM's gates are stacked i, f, o, g so the
  three sigmoids are one contiguous block), in preallocated buffers reused from batch to batch;
- the backward loop only computes dL/dz_t and dL/dh_{t-1} (the LSTM's gate derivatives, which do not
  depend on dL/dh_t, are taken for all T steps before it); the gradients of Wx, Wh, d and of the
  inputs x are then ONE product each over all T B positions;
- the full softmax output layer computes the logits of all T B positions in one product into a
  reused (T B, |V|) buffer, and the softmax and its gradient in place (the softmax-NLL head,
  :func:`~nplm_edu.numerics.head.softmax_nll`); on several threads
  (:mod:`~nplm_edu.numerics.threads`) each computes a block of the output units, their share of
  the softmax and their rows of dL/dU and dL/db (the paper's section 3.2 output blocks), and only
  dL/dh_t is summed;
  other output layers are called through their interface;
- on several threads, the B streams of a batch (independent recurrences) are split among them,
  each running its block of streams through all T steps, forward and back, with no meeting between
  steps; the products over all T B positions (x_t Wx^T, dL/dWx, dL/dWh, dL/dx) are split by columns;
  each thread runs single-threaded BLAS;
- the gradient of C is a segment sum (:func:`~nplm_edu.numerics.blas.segment_sum`), not ``np.add.at``;
  on several threads each adds up its own columns of dL/dx, after its block of their product.

The gradients returned live in buffers that the next call overwrites: use them before calling again.
"""

from __future__ import annotations


import numpy as np

from ..models.gru import GRU
from ..models.lstm import LSTM
from ..models.output import FullSoftmax
from ..models.rnn import ElmanRNN, RecurrentConfig, check_batch
from .blas import segments
from .full_output import FastOutput
from .threads import block_range, matmul_columns, one_blas_thread, run_blocks, threads


def sigmoid_inplace(a: np.ndarray) -> None:
    """a <- sigma(a) = 1 / (1 + exp(-a)) in place (exp may overflow to inf: sigma is then 0, exactly)."""
    np.negative(a, out=a)
    np.exp(a, out=a)
    a += 1
    np.reciprocal(a, out=a)


class _Fast(FastOutput):
    """The fast forward/backward shared by :class:`FastRNN`, :class:`FastLSTM` and :class:`FastGRU` (a mixin; the output
    layer's fast path is :class:`~nplm_edu.numerics.full_output.FastOutput`'s)."""

    sparse_grads = True  # loss_and_sparse_grads: dL/dC of the batch's rows only
    MIN_STEP_WORK = 1 << 22  # multiply-adds (of a step's recurrent product, or of a product) from which threads split it

    def forward(self, X, state=None, mask_x=None, mask_a=None, resets=None) -> dict:
        X, _ = check_batch(X, None, self.V)
        P, (B, T), h = self.params, X.shape, self.config.h
        state = self._start(X, state)
        resets = None if resets is None else np.asarray(resets, bool)
        x = self._buffer("x", (T, B, self.config.m))
        np.take(P["C"], X.T, axis=0, out=x)  # (T, B, m) x_t = C(w_t)
        if mask_x is not None:
            x *= mask_x  # dropout on x
        z = self._buffer("z", (T, B, self.G * h))  # pre-activations, then the gates, in place
        z2, d = z.reshape(T * B, -1), P["d"]  # x_t Wx^T + d for every t at once (each thread adds d to its columns)
        self._mm(x.reshape(T * B, -1), P["Wx"].T, z2, lambda lo, hi: np.add(z2[:, lo:hi], d[lo:hi], out=z2[:, lo:hi]))
        hs = self._buffer("hs", (T + 1, B, h))  # hs[t + 1] = h_t
        hs[0] = state[0]
        prev = hs[:T] if resets is None else self._buffer("prev", (T, B, h))  # h_{t-1} as step t reads it
        cache = {"X": X, "x": x, "z": z, "hs": hs, "prev": prev, "resets": resets, "mask_x": mask_x}
        self._recur(cache, state, resets)
        a = hs[1:]
        if mask_a is not None:
            a = np.multiply(a, mask_a, out=self._buffer("a", (T, B, h)))  # dropout on h_t
        cache["inputs"] = {"U": a.reshape(T * B, h)}
        return cache

    def loss_and_grads(self, X, Y, state=None, mask_x=None, mask_a=None, resets=None):
        loss, grads, state, words = self.loss_and_sparse_grads(X, Y, state, mask_x, mask_a, resets)
        gC = self._buffer("gC", self.params["C"].shape, zero=True)
        gC[words] = grads["C"]  # the rows of the words in the batch; the others are 0
        return loss, {**grads, "C": gC}, state

    def loss_and_sparse_grads(self, X, Y, state=None, mask_x=None, mask_a=None, resets=None):
        """As :meth:`loss_and_grads`, but the gradient of C is given by its nonzero rows only: returns
        (loss, grads with grads["C"] the (k, m) rows, state, the k word ids of those rows).

        On several threads the whole step runs BLAS on one thread, whatever the output layer: the
        threads are the streams', the products' column blocks' and the full softmax's output blocks';
        a cheap output layer's many small products (one per class present) would wake BLAS's own
        threads, which then poll for work on the cores those blocks need."""
        with one_blas_thread(threads() > 1):
            return self._sparse_grads(X, Y, state, mask_x, mask_a, resets)

    def _sparse_grads(self, X, Y, state, mask_x, mask_a, resets):
        X, Y = check_batch(X, Y, self.V)
        (B, T), h = X.shape, self.config.h
        cache = self.forward(X, state, mask_x, mask_a, resets)
        loss, gA, grads = self._output(cache, Y.T.reshape(-1))
        ga = gA.reshape(T, B, h)
        if mask_a is not None:
            ga *= mask_a  # backward through dropout on h_t
        return (loss, *self._through_time(cache, ga, grads))

    def last_step_sparse_grads(self, X, y, mask_x=None, mask_a=None):
        """As :meth:`loss_and_sparse_grads` from a zero state, but only the LAST step of each row of X
        (B, T) is scored: the mean NLL of y (B,) given the T words of its row (a window model over
        T words); ``mask_a`` (B, h) on h_T. Returns (loss, grads, the word ids of grads["C"]'s rows)."""
        X, _ = check_batch(X, None, self.V)
        (B, T), h = X.shape, self.config.h
        cache = self.forward(X, None, mask_x)
        a = cache["hs"][T] if mask_a is None else cache["hs"][T] * mask_a  # (B, h) h_T, dropout on it
        with one_blas_thread(threads() > 1):  # as in loss_and_sparse_grads
            loss, gA, grads = self._output({"inputs": {"U": a}}, np.asarray(y))
        ga = self._buffer("ga_last", (T, B, h), zero=True)  # dL/dh_t: nothing from the steps before T
        ga[T - 1] = gA if mask_a is None else gA * mask_a  # backward through dropout on h_T
        grads, _, words = self._through_time(cache, ga, grads)
        return loss, grads, words

    def _through_time(self, cache, ga, grads):
        """From dL/dh_t (T, B, h) to every gradient (those of the output layer in ``grads``):
        (grads, the state after the batch, the word ids of grads["C"]'s rows)."""
        P, X = self.params, cache["X"]
        (B, T), mask_x = X.shape, cache["mask_x"]
        gz = self._backrecur(cache, ga)  # dL/dz_t for every t  (T, B, G h)
        gz2, x2 = gz.reshape(T * B, -1), cache["x"].reshape(T * B, -1)
        grads["Wx"] = self._mm(gz2.T, x2, self._buffer("gWx", P["Wx"].shape))  # one product over all t
        grads["Wh"] = self._grad_Wh(gz2, cache, self._buffer("gWh", P["Wh"].shape))
        grads["d"] = np.sum(gz2, axis=0, out=self._buffer("gd", P["d"].shape))
        words, order, starts = segments(X.T.ravel())  # the positions of each word of the batch
        gx = self._buffer("gx", x2.shape)  # (T B, m) dL/dx
        grads["C"] = np.empty((len(words), x2.shape[1]), x2.dtype)  # (k, m) the batch's rows of dL/dC

        def words_rows(lo, hi):  # columns lo..hi of dL/dx, on the thread that computed them
            if mask_x is not None:
                gx[:, lo:hi] *= mask_x.reshape(T * B, -1)[:, lo:hi]  # backward through dropout on x
            np.add.reduceat(gx[order, lo:hi], starts, axis=0, out=grads["C"][:, lo:hi])  # each word's rows

        self._mm(gz2, P["Wx"], gx, then=words_rows)  # dL/dx = dL/dz Wx, then each word's rows
        return {k: grads[k] for k in P}, cache["state"], words

    def _mm(self, a, b, out, then=None):
        """out = a @ b, a product over all T B positions; on several threads its columns are split
        among them where it is large (:func:`~nplm_edu.numerics.threads.matmul_columns`), and so is
        ``then(lo, hi)``, work on columns lo..hi of the result (on one thread: ``then(0, all)``)."""
        T = threads()
        if T > 1 and a.shape[0] * b.shape[0] * b.shape[1] >= self.MIN_STEP_WORK:
            return matmul_columns(a, b, out, T, then)
        np.matmul(a, b, out=out)
        if then is not None:
            then(0, out.shape[1])
        return out

    def _streams(self, loop, resets, per_step: dict, per_row: dict) -> None:
        """``loop(resets, **arrays)`` over the batch's B streams: ``per_step`` arrays (T or T + 1, B, ...),
        ``per_row`` arrays (B, ...). Each stream's recurrence is independent of the others', so on
        several threads each runs a block of the streams (rows) through all T steps, its own products
        on single-threaded BLAS, meeting the others only at the end; one call when a step's product,
        B (G h) h multiply-adds, is below MIN_STEP_WORK (on one BLAS thread: BLAS's threads, woken
        for products that small, would cost more than they save and keep polling for work after)."""
        B = next(iter(per_row.values())).shape[0]
        n = min(threads(), B)
        if n <= 1 or B * self.params["Wh"].size < self.MIN_STEP_WORK:
            with one_blas_thread():
                loop(resets, **per_step, **per_row)
            return

        def block(i, _):
            r = slice(*block_range(B, n, i))
            loop(None if resets is None else resets[r], **{k: a[:, r] for k, a in per_step.items()},
                 **{k: a[r] for k, a in per_row.items()})

        run_blocks(block, n)

    def _grad_Wh(self, gz2, cache, out):
        """dL/dWh (G h, h), one product over all T B positions: dL/dz_t^T h_{t-1}."""
        return self._mm(gz2.T, cache["prev"].reshape(gz2.shape[0], -1), out)

    def chunk_log_prob(self, X, Y, state, resets=None):
        if type(self.output) is not FullSoftmax:
            return super().chunk_log_prob(X, Y, state, resets)
        cache = self.forward(X, state, resets=resets)
        lp = self._log_probs(cache["inputs"]["U"], Y.T.reshape(-1))  # (T B,) log p(w_t)
        return lp.reshape(X.shape[1], X.shape[0]).T, cache["state"]


class FastRNN(_Fast, ElmanRNN):
    """:class:`~nplm_edu.models.rnn.ElmanRNN`, fast: same parameters, same initial values, same numbers."""

    def _recur(self, cache, state, resets):
        hs = cache["hs"]
        self._streams(self._recur_streams, resets, {"z": cache["z"], "hs": hs, "prev": cache["prev"]},
                      {"tmp": self._buffer("tmp", hs[0].shape)})
        cache["state"] = (hs[-1].copy(),)

    def _recur_streams(self, resets, z, hs, prev, tmp):
        """The forward loop over t, on a block of the streams."""
        WhT = self.params["Wh"].T
        for t in range(z.shape[0]):
            if resets is not None:
                np.multiply(hs[t], ~resets[:, t, None], out=prev[t])  # a reset: h_{t-1} := 0
            np.matmul(prev[t], WhT, out=tmp)
            z[t] += tmp  # pre_t = x_t Wx^T + d + h_{t-1} Wh^T
            np.tanh(z[t], out=hs[t + 1])  # h_t

    def _backrecur(self, cache, ga):
        gz = self._buffer("gz", ga.shape)  # dL/dpre_t  (T, B, h)
        gh = self._buffer("gh", ga.shape[1:], zero=True)  # dL/dh_t through step t+1
        self._streams(self._backrecur_streams, cache["resets"], {"ga": ga, "hs": cache["hs"], "gz": gz}, {"gh": gh})
        return gz

    def _backrecur_streams(self, resets, ga, hs, gz, gh):
        """The backward loop over t, on a block of the streams."""
        Wh = self.params["Wh"]
        for t in reversed(range(ga.shape[0])):
            gh += ga[t]  # dL/dh_t
            np.multiply(hs[t + 1], hs[t + 1], out=gz[t])
            np.subtract(1, gz[t], out=gz[t])
            gz[t] *= gh  # backward through tanh: (1 - h_t^2) dL/dh_t
            np.matmul(gz[t], Wh, out=gh)  # dL/dh_{t-1}
            if resets is not None:
                gh *= ~resets[:, t, None]  # backward through a reset


class FastLSTM(_Fast, LSTM):
    """:class:`~nplm_edu.models.lstm.LSTM`, fast: same parameters, same initial values, same numbers."""

    def _recur(self, cache, state, resets):
        z, hs = cache["z"], cache["hs"]
        T = z.shape[0]
        ss = cache["ss"] = self._buffer("ss", hs.shape)  # ss[t + 1] = s_t
        ss[0] = state[1]
        prev_s = ss[:T] if resets is None else self._buffer("prev_s", (T,) + hs.shape[1:])
        cache["prev_s"] = prev_s
        tanh_s = cache["tanh_s"] = self._buffer("tanh_s", (T,) + hs.shape[1:])
        self._streams(self._recur_streams, resets,
                      {"z": z, "hs": hs, "prev": cache["prev"], "ss": ss, "prev_s": prev_s, "tanh_s": tanh_s},
                      {"tmp": self._buffer("tmp", z.shape[1:])})
        cache["state"] = (hs[-1].copy(), ss[-1].copy())

    def _recur_streams(self, resets, z, hs, prev, ss, prev_s, tanh_s, tmp):
        """The forward loop over t, on a block of the streams."""
        WhT, h = self.params["Wh"].T, self.config.h
        with np.errstate(over="ignore"):
            for t in range(z.shape[0]):
                if resets is not None:
                    keep = ~resets[:, t, None]
                    np.multiply(hs[t], keep, out=prev[t])  # a reset: h_{t-1} := 0 ...
                    np.multiply(ss[t], keep, out=prev_s[t])  # ... and s_{t-1} := 0
                np.matmul(prev[t], WhT, out=tmp)
                zt = z[t]
                zt += tmp  # z_t = x_t Wx^T + h_{t-1} Wh^T + d: the four gates in one product
                sigmoid_inplace(zt[:, :3 * h])  # i, f, o
                np.tanh(zt[:, 3 * h:], out=zt[:, 3 * h:])  # g = phi(.)
                i, f, o, g = zt[:, :h], zt[:, h:2 * h], zt[:, 2 * h:3 * h], zt[:, 3 * h:]
                np.multiply(g, i, out=ss[t + 1])
                ss[t + 1] += prev_s[t] * f  # s_t = g_t i_t + s_{t-1} f_t
                np.tanh(ss[t + 1], out=tanh_s[t])
                np.multiply(o, tanh_s[t], out=hs[t + 1])  # h_t = o_t phi(s_t)

    def _backrecur(self, cache, ga):
        gates, h = cache["z"], self.config.h
        B = ga.shape[1]
        gz = self._buffer("gz", gates.shape)  # dL/dz_t  (T, B, 4h)
        gh = self._buffer("gh", (B, h), zero=True)  # dL/dh_t through step t+1
        gs = self._buffer("gs", (B, h), zero=True)  # dL/ds_t through step t+1
        self._streams(self._backrecur_streams, cache["resets"],
                      {"ga": ga, "gates": gates, "tanh_s": cache["tanh_s"], "prev_s": cache["prev_s"], "gz": gz,
                       "dgates": self._buffer("dgates", gates.shape), "ds": self._buffer("ds", ga.shape)},
                      {"gh": gh, "gs": gs, "tmp": self._buffer("tmp_b", (B, h))})
        return gz

    def _backrecur_streams(self, resets, ga, gates, tanh_s, prev_s, gz, dgates, ds, gh, gs, tmp):
        """The backward loop over t, on a block of the streams, after the derivatives that do not depend
        on dL/dh_t (a few calls for all T steps, not a dozen a step: less time holding the interpreter's lock)."""
        self._local_derivatives(gates, tanh_s, dgates, ds)
        Wh, h = self.params["Wh"], self.config.h
        for t in reversed(range(ga.shape[0])):
            i, f, g = gates[t][:, :h], gates[t][:, h:2 * h], gates[t][:, 3 * h:]
            gi, gf, go, gg = (gz[t][:, k * h:(k + 1) * h] for k in range(4))
            gh += ga[t]  # dL/dh_t
            np.multiply(gh, tanh_s[t], out=go)  # dL/do_t = dL/dh_t phi(s_t)
            np.multiply(gh, ds[t], out=tmp)
            gs += tmp  # dL/ds_t = dL/ds_t(next) + dL/dh_t o_t (1 - phi(s_t)^2)
            np.multiply(gs, g, out=gi)  # dL/di_t
            np.multiply(gs, i, out=gg)  # dL/dg_t
            np.multiply(gs, prev_s[t], out=gf)  # dL/df_t
            gs *= f  # dL/ds_{t-1}
            gz[t] *= dgates[t]  # backward through the gates' nonlinearities: dL/dz_t
            np.matmul(gz[t], Wh, out=gh)  # dL/dh_{t-1}
            if resets is not None:
                keep = ~resets[:, t, None]
                gh *= keep  # backward through a reset
                gs *= keep

    def _local_derivatives(self, gates, tanh_s, dgates, ds):
        """For every t at once: dgates <- the gates' derivatives, sigma (1 - sigma) for i, f, o and
        1 - g^2 for g (T, b, 4h); ds <- dh_t/ds_t = o_t (1 - phi(s_t)^2) (T, b, h)."""
        h = self.config.h
        ifo, g = gates[..., :3 * h], gates[..., 3 * h:]
        np.subtract(1, ifo, out=dgates[..., :3 * h])
        dgates[..., :3 * h] *= ifo  # (1 - sigma) sigma
        np.multiply(g, g, out=dgates[..., 3 * h:])
        np.subtract(1, dgates[..., 3 * h:], out=dgates[..., 3 * h:])  # 1 - g^2
        np.multiply(tanh_s, tanh_s, out=ds)
        np.subtract(1, ds, out=ds)
        ds *= gates[..., 2 * h:3 * h]  # (1 - phi(s_t)^2) o_t


class FastGRU(_Fast, GRU):
    """:class:`~nplm_edu.models.gru.GRU`, fast: same parameters, same initial values, same numbers.
    The gates' buffer holds [z r n] per step; r_t h_{t-1} is kept for dL/dU^n."""

    def _recur(self, cache, state, resets):
        z, hs, prev, h = cache["z"], cache["hs"], cache["prev"], self.config.h
        rp = cache["rp"] = self._buffer("rp", prev.shape)  # rp[t] = r_t h_{t-1}  (T, B, h)
        self._streams(self._recur_streams, resets, {"z": z, "hs": hs, "prev": prev, "rp": rp},
                      {"tmp": self._buffer("tmp", (z.shape[1], 2 * h)), "tmp_n": self._buffer("tmp_n", hs[0].shape)})
        cache["state"] = (hs[-1].copy(),)

    def _recur_streams(self, resets, z, hs, prev, rp, tmp, tmp_n):
        """The forward loop over t, on a block of the streams."""
        P, h = self.params, self.config.h
        Wzr_T, Wn_T = P["Wh"][:2 * h].T, P["Wh"][2 * h:].T  # (h, 2h) U^z, U^r; (h, h) U^n
        with np.errstate(over="ignore"):
            for t in range(z.shape[0]):
                if resets is not None:
                    np.multiply(hs[t], ~resets[:, t, None], out=prev[t])  # a reset: h_{t-1} := 0
                azr, an = z[t][:, :2 * h], z[t][:, 2 * h:]
                np.matmul(prev[t], Wzr_T, out=tmp)
                azr += tmp  # W^{z,r} x_t + b^{z,r} + U^{z,r} h_{t-1}: both gates in one product
                sigmoid_inplace(azr)  # z_t, r_t
                np.multiply(azr[:, h:], prev[t], out=rp[t])  # r_t h_{t-1}: r before the matrix
                np.matmul(rp[t], Wn_T, out=tmp_n)
                an += tmp_n
                np.tanh(an, out=an)  # n_t = phi(W^n x_t + b^n + U^n (r_t h_{t-1}))
                np.subtract(prev[t], an, out=hs[t + 1])
                hs[t + 1] *= azr[:, :h]
                hs[t + 1] += an  # h_t = n_t + z_t (h_{t-1} - n_t) = (1 - z_t) n_t + z_t h_{t-1}

    def _backrecur(self, cache, ga):
        h, B = self.config.h, ga.shape[1]
        gz = self._buffer("gz", cache["z"].shape)  # dL/d(pre-activations) [z r n]  (T, B, 3h)
        gh = self._buffer("gh", (B, h), zero=True)  # dL/dh_t through step t+1
        self._streams(self._backrecur_streams, cache["resets"],
                      {"ga": ga, "gates": cache["z"], "prev": cache["prev"], "gz": gz},
                      {"gh": gh, "tmp": self._buffer("tmp_b", (B, h)), "grp": self._buffer("grp", (B, h))})
        return gz

    def _backrecur_streams(self, resets, ga, gates, prev, gz, gh, tmp, grp):
        """The backward loop over t, on a block of the streams."""
        P, h = self.params, self.config.h
        Wzr, Wn = P["Wh"][:2 * h], P["Wh"][2 * h:]
        for t in reversed(range(ga.shape[0])):
            z, r, n = (gates[t][:, k * h:(k + 1) * h] for k in range(3))
            gzz, gr, gan = (gz[t][:, k * h:(k + 1) * h] for k in range(3))
            p = prev[t]  # (B, h) h_{t-1}
            gh += ga[t]  # dL/dh_t
            # backward through h_t = (1 - z_t) n_t + z_t h_{t-1}
            np.subtract(p, n, out=gzz)
            gzz *= gh  # dL/dz_t
            np.subtract(1, z, out=tmp)
            np.multiply(gh, tmp, out=gan)  # dL/dn_t
            np.multiply(n, n, out=tmp)
            np.subtract(1, tmp, out=tmp)
            gan *= tmp  # backward through phi: dL/dan_t
            np.matmul(gan, Wn, out=grp)  # dL/d(r_t h_{t-1})
            np.multiply(grp, p, out=gr)  # dL/dr_t
            gh *= z  # dL/dh_{t-1}, the direct (additive) path
            grp *= r
            gh += grp  # ... and through the candidate
            for gk, k in ((gzz, z), (gr, r)):  # backward through the sigmoids: sigma (1 - sigma)
                np.subtract(1, k, out=tmp)
                tmp *= k
                gk *= tmp
            np.matmul(gz[t][:, :2 * h], Wzr, out=tmp)
            gh += tmp  # ... and through the gates
            if resets is not None:
                gh *= ~resets[:, t, None]  # backward through a reset

    def _grad_Wh(self, gz2, cache, out):
        """dL/dU^{z,r} = dL/dazr_t^T h_{t-1} and dL/dU^n = dL/dan_t^T (r_t h_{t-1}), over all T B positions."""
        h, N = self.config.h, gz2.shape[0]
        self._mm(gz2[:, :2 * h].T, cache["prev"].reshape(N, h), out[:2 * h])
        self._mm(gz2[:, 2 * h:].T, cache["rp"].reshape(N, h), out[2 * h:])
        return out


def recurrent_model(config: RecurrentConfig, output=None, fast: bool = True):
    """The model of ``config.cell``: the fast version (default) or the reference one."""
    config.validate()
    fast_cls, ref_cls = {"rnn": (FastRNN, ElmanRNN), "lstm": (FastLSTM, LSTM), "gru": (FastGRU, GRU)}[config.cell]
    return (fast_cls if fast else ref_cls)(config, output)
