"""Record, on this machine, the pins of tests/test_nplm.py::test_history_pinned_before_the_reshape by running
the code as it was before the package was reshaped into layers (commit de19dbd), whose modules this imports:

    git worktree add /tmp/pre_reshape de19dbd
    cp tests/data/record_pins_pre_reshape.py /tmp/pre_reshape/
    cd /tmp/pre_reshape && OPENBLAS_NUM_THREADS=1 python record_pins_pre_reshape.py > pins.json

then add pins.json to tests/data/pinned_history.json as one more machine. It cannot run from this tree.
"""
import hashlib
import json
import sys

import numpy as np


def digest(params):
    h = hashlib.sha256()
    for k in sorted(params):
        h.update(k.encode())
        h.update(np.ascontiguousarray(params[k]).tobytes())
    return h.hexdigest()


def main():
    from nplm_edu.corpus import load_corpus  # the modules of de19dbd: none of them exists in the package now
    from nplm_edu.model import NPLM, NPLMConfig
    from nplm_edu.modern import ModernConfig, train_modern
    from nplm_edu.train import TrainConfig, train

    corpus = load_corpus("synthetic", synthetic_tokens=20_000, seed=3, cache=False)
    out = {}
    for name, direct in (("sgd_direct", True), ("sgd_nodirect", False)):
        net = {"n": 4, "h": 20, "m": 8, "direct": direct}
        model = NPLM(NPLMConfig(V=corpus.V, seed=1, **net))
        hist = train(model, corpus, TrainConfig(epochs=3, batch=16, lr=0.3, decay_rate=1e-3, weight_decay=1e-4, seed=2),
                     quiet=True)
        out[name] = {"net": net, "valid_ppl": [e["valid_ppl"].hex() for e in hist["epochs"]],
                     "train_ppl": [e["train_ppl"].hex() for e in hist["epochs"]], "params": digest(model.params)}
    for opt in ("adam", "sgd"):
        net = {"n": 4, "h": 20, "m": 8, "direct": True}
        model = NPLM(NPLMConfig(V=corpus.V, seed=1, **net))
        cfg = ModernConfig(epochs=2, batch=16, lr=2e-3 if opt == "adam" else 0.3,
                           weight_decay=0.01 if opt == "adam" else 1e-4, dropout_x=0.1, dropout_a=0.2, lr_decay=0.7,
                           optimizer=opt, seed=2, patience=2)
        hist = train_modern(model, corpus, cfg, quiet=True)
        out[f"modern_{opt}"] = {"net": net, "valid_ppl": [e["valid_ppl"].hex() for e in hist["epochs"]],
                                "train_ppl": [e["train_ppl"].hex() for e in hist["epochs"]],
                                "params": digest(model.params)}
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
