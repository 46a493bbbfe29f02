"""Run under mpiexec -n M: output-block SGD (section 3.2) vs the serial trainer, float64.

Every rank builds the same NPLM (same seed) and trains N updates on the same example order with
OutputBlockSGD; rank 0 also runs the serial rule (NPLM.loss_and_grads + optim.sgd_step) and
compares the gathered parameters to 1e-6 relative. Prints one line per case; exit status 1 on any
mismatch. Usage: exactness.py [N_UPDATES]
"""
import sys

import numpy as np

from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.optim import sgd_step
from nplm_edu.training.parallel.mpi_job import abort_on_error, world
from nplm_edu.training.parallel.output_block import OutputBlockSGD

LR, R, WD = 0.05, 1e-3, 1e-3  # large enough that N updates move every parameter visibly
CASES = [  # |V|, n, m, h, direct, K
    (23, 4, 5, 7, True, 1),
    (23, 3, 4, 6, False, 1),
    (50, 4, 5, 7, True, 8),
    (50, 3, 4, 0, True, 5),  # no hidden layer (h = 0)
]


def rel_diff(a, b):
    """max |a - b| / max |b| (0 for empty arrays, e.g. U and H when h = 0)."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b))) if b.size and np.any(b) else float(np.max(np.abs(a - b), initial=0))


def serial(cfg, ctx, tgt, order, K):
    model = NPLM(cfg)
    for t, i in enumerate(range(0, len(order), K)):
        idx = order[i:i + K]
        _, grads = model.loss_and_grads(ctx[idx], tgt[idx])
        sgd_step(model.params, grads, LR / (1 + R * t), WD, model.decayed)
    return model.params


def main():
    n_updates = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    comm = world()
    rank, M = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
    bad = 0
    with abort_on_error(comm):
        for V, n, m, h, direct, K in CASES:
            cfg = NPLMConfig(V=V, n=n, m=m, h=h, direct=direct, dtype="float64", seed=3)
            rng = np.random.default_rng(0)
            ids = rng.integers(0, V, size=400)
            ctx = np.lib.stride_tricks.sliding_window_view(ids, n)[:, :-1]  # chronological contexts
            tgt = ids[n - 1:]
            order = rng.permutation(len(tgt))[:n_updates * K]
            tr = OutputBlockSGD(NPLM(cfg).params, lr=LR, r=R, weight_decay=WD, batch_size=K, comm=comm)
            for t, i in enumerate(range(0, len(order), K)):
                tr.step(ctx[order[i:i + K]], tgt[order[i:i + K]], LR / (1 + R * t))
            agree = tr.replicas_agree()
            par = tr.gather()
            if rank == 0:
                ref = serial(cfg, ctx, tgt, order, K)
                init = NPLM(cfg).params
                worst = max(rel_diff(par[k], ref[k]) for k in ref)
                moved = min(float(np.max(np.abs(ref[k] - init[k]))) for k in ref if ref[k].size)
                ok = agree and set(par) == set(ref) and worst <= 1e-6 and moved > 0
                bad += not ok
                print(f"M={M} |V|={V} n={n} m={m} h={h} direct={direct} K={K}: max rel diff {worst:.1e}, "
                      f"replicas agree {agree}, {'OK' if ok else 'MISMATCH'}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
