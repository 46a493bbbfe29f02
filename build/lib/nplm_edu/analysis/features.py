"""The learned word features C as numbers: 2-D views, neighbours, class separation, snapshots.

Section 1.1 of the paper argues that similar words ("cat", "dog") should end up with similar feature
vectors; section 5 suggests m = 2 features per word so that they can be displayed. This module
measures both (the plots are :mod:`nplm_edu.analysis.viz`):

* :func:`pca` / :func:`project`: a 2-D view of C (m = 2 as is; larger m through PCA, an SVD of the
  centred table, in numpy);
* :func:`nearest_neighbours`: the words whose feature vectors are closest, by cosine similarity
  (or euclidean distance);
* :func:`class_agreement`: how well known word classes separate, as the fraction of words whose
  nearest neighbour has the same class (one number per snapshot, so it can be plotted over training);
* :class:`Snapshots`: a recorder for :func:`nplm_edu.training.trainer.train`'s ``callback`` hook that
  keeps a copy of C (or of selected rows) every few updates.
"""

from __future__ import annotations


import numpy as np

from ..errors import UserError


# --------------------------------------------------------------------------- projection
def pca(X: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Principal components of the rows of X (N, m) through an SVD of the centred matrix.

    Returns (Z (N, k) the projected rows, components (k, m) orthonormal directions, ratio (k,) the
    share of the total variance each direction explains). Signs are fixed so that the largest
    loading of each component is positive: the same table always gives the same picture.

    >>> Z, comps, ratio = pca(np.array([[0., 0.], [2., 0.], [4., 0.]]), k=1)
    >>> Z.ravel().tolist(), comps.tolist(), ratio.tolist()
    ([-2.0, 0.0, 2.0], [[1.0, 0.0]], [1.0])
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise UserError(f"pca needs a 2-D table (N, m), got shape {X.shape}")
    if not 1 <= k <= min(X.shape):
        raise UserError(f"pca of a {X.shape[0]}x{X.shape[1]} table can keep 1 to {min(X.shape)} components, not {k}")
    Xc = X - X.mean(axis=0)  # (N, m) centred rows
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)  # Xc = U diag(s) Vt
    comps = Vt[:k]  # (k, m)
    big = np.argmax(np.abs(comps), axis=1)
    comps = comps * np.sign(comps[np.arange(k), big])[:, None]  # largest loading positive
    var = s ** 2
    ratio = var[:k] / var.sum() if var.sum() > 0 else np.zeros(k)
    return Xc @ comps.T, comps, ratio  # (N, k), (k, m), (k,)


def project(C: np.ndarray, components: np.ndarray | None = None, mean: np.ndarray | None = None) -> np.ndarray:
    """2-D coordinates of the rows of C (N, m): C itself when m = 2, else its first two principal
    components. Pass ``components`` (2, m) and ``mean`` (m,) to project several snapshots onto the
    same axes (e.g. those of the final table)."""
    C = np.asarray(C, dtype=np.float64)
    if C.shape[1] == 2 and components is None:
        return C
    if components is None:
        return pca(C, 2)[0]
    mean = C.mean(axis=0) if mean is None else mean
    return (C - mean) @ np.asarray(components).T  # (N, 2)


# --------------------------------------------------------------------------- neighbours
def similarity(C: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """(N, N) similarities between the rows of C: cosine, or minus the euclidean distance
    (so that larger is always closer). Zero rows have cosine 0 with everything."""
    C = np.asarray(C, dtype=np.float64)
    if metric == "cosine":
        norm = np.linalg.norm(C, axis=1, keepdims=True)  # (N, 1)
        U = np.divide(C, norm, out=np.zeros_like(C), where=norm > 0)  # unit rows
        return U @ U.T  # (N, N)
    if metric == "euclidean":
        sq = np.sum(C * C, axis=1)  # (N,)
        d2 = sq[:, None] + sq[None, :] - 2 * C @ C.T  # (N, N) squared distances
        return -np.sqrt(np.maximum(d2, 0))
    raise UserError(f"unknown metric {metric!r}: use cosine or euclidean")


def nearest_neighbours(C: np.ndarray, queries, k: int = 5, metric: str = "cosine",
                       candidates=None) -> tuple[np.ndarray, np.ndarray]:
    """The k rows of C most similar to each query row (the query itself excluded).

    ``queries``: row ids (Q,); ``candidates``: row ids allowed as neighbours (default: all).
    Returns (ids (Q, k), scores (Q, k)) best first; scores are cosine similarities, or minus
    euclidean distances. Ties go to the smaller id."""
    C = np.asarray(C, dtype=np.float64)
    q = np.atleast_1d(np.asarray(queries, dtype=np.int64))
    cand = np.arange(len(C)) if candidates is None else np.asarray(candidates, dtype=np.int64)
    if k < 1 or k > len(cand) - 1:
        raise UserError(f"k must be between 1 and {len(cand) - 1}, got {k}")
    S = similarity(C, metric)[np.ix_(q, cand)]  # (Q, |cand|)
    S[q[:, None] == cand[None, :]] = -np.inf  # a word is not its own neighbour
    order = np.argsort(-S, axis=1, kind="stable")[:, :k]  # (Q, k)
    return cand[order], np.take_along_axis(S, order, axis=1)


def neighbours(C: np.ndarray, vocab, words, k: int = 5, metric: str = "cosine") -> dict[str, list[tuple[str, float]]]:
    """word -> [(neighbour, score), ...] for each word in ``words`` (strings in ``vocab``)."""
    missing = [w for w in words if w not in vocab.index]
    if missing:
        raise UserError(f"not in the vocabulary: {', '.join(missing)}")
    ids, scores = nearest_neighbours(C, [vocab.index[w] for w in words], k, metric)
    return {w: [(vocab.words[j], float(s)) for j, s in zip(row, srow)]
            for w, row, srow in zip(words, ids, scores)}


# --------------------------------------------------------------------------- class separation
def class_labels(vocab, classes: dict[str, str]) -> np.ndarray:
    """One label per id of ``vocab`` (an object array): the word's class, or None if it has none."""
    return np.array([classes.get(w) for w in vocab.words], dtype=object)


def class_agreement(C: np.ndarray, labels, metric: str = "cosine") -> float:
    """Fraction of labelled words whose nearest labelled neighbour has the same label.

    ``labels``: one label per row of C; rows labelled None take no part (neither as query nor as
    neighbour). 1.0: every word sits next to a word of its own class. Chance level is about
    sum_c (n_c / N) (n_c - 1) / (N - 1) for classes of n_c words.
    """
    lab = np.asarray(labels, dtype=object)
    if len(lab) != len(C):
        raise UserError(f"{len(lab)} labels for {len(C)} rows of C")
    keep = np.flatnonzero(lab != None)  # noqa: E711 (elementwise)
    if len(keep) < 2:
        raise UserError("class agreement needs at least two labelled words")
    S = similarity(np.asarray(C)[keep], metric)  # (L, L)
    np.fill_diagonal(S, -np.inf)  # not its own neighbour
    nn = np.argmax(S, axis=1)  # (L,) first maximum: ties go to the smaller id
    return float(np.mean(lab[keep] == lab[keep][nn]))


def chance_agreement(labels) -> float:
    """Expected class agreement of a random table: sum_c (n_c / N) (n_c - 1) / (N - 1)."""
    lab = np.asarray(labels, dtype=object)
    lab = lab[lab != None]  # noqa: E711
    _, n = np.unique(lab.astype(str), return_counts=True)
    N = n.sum()
    return float(np.sum(n / N * (n - 1) / (N - 1)))


# --------------------------------------------------------------------------- snapshots
class Snapshots:
    """Records copies of the feature table C during training; use it as ``train``'s callback.

    >>> snaps = Snapshots(rows=[0, 2])
    >>> class Fake: params = {"C": np.arange(6.0).reshape(3, 2)}
    >>> snaps(0, Fake)            # the initial table, before any update
    >>> snaps.steps, snaps.C.shape
    ([0], (1, 2, 2))

    With ``train(model, corpus, config, callback=snaps, callback_every=50)`` it records after
    every 50 updates; ``every`` records only steps that are multiples of it (default: every call).
    ``rows``: ids of the rows to keep (default all); ``C`` stacks the copies into (S, rows, m).
    """

    def __init__(self, rows=None, every: int = 1):
        if every < 1:
            raise UserError(f"every must be at least 1, got {every}")
        self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        self.every = every
        self.steps: list[int] = []
        self._tables: list[np.ndarray] = []

    def __call__(self, step: int, model) -> None:
        if step % self.every:
            return
        C = model.params["C"]
        self.steps.append(int(step))
        self._tables.append(C.copy() if self.rows is None else C[self.rows].copy())

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> tuple[int, np.ndarray]:
        return self.steps[i], self._tables[i]

    @property
    def C(self) -> np.ndarray:
        """All snapshots stacked: (S, rows, m)."""
        return np.stack(self._tables)

    def agreement(self, labels, metric: str = "cosine") -> np.ndarray:
        """:func:`class_agreement` of every snapshot (S,); ``labels`` per recorded row."""
        return np.array([class_agreement(T, labels, metric) for T in self._tables])

    def save(self, path) -> None:
        """Write the steps and tables to an .npz file (plain arrays: loads with allow_pickle=False)."""
        np.savez_compressed(path, steps=np.array(self.steps), C=self.C,
                            rows=np.array([]) if self.rows is None else self.rows, every=self.every)

    @classmethod
    def load(cls, path) -> "Snapshots":
        """Read what :meth:`save` wrote."""
        with np.load(path, allow_pickle=False) as z:
            s = cls(rows=z["rows"] if len(z["rows"]) else None, every=int(z["every"]))
            s.steps = [int(t) for t in z["steps"]]
            s._tables = list(z["C"])
        return s
