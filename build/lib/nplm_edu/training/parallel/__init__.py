"""The parallel training algorithms of section 3 of the paper, as backends of the one trainer.

- :mod:`.output_block`: parameter-parallel, the output units split over the ranks of an MPI job
  (section 3.2); ``mpiexec -n M python -m nplm_edu train --parallel output-block ...``.
- :mod:`.hogwild`: data-parallel on shared memory, asynchronous and lock-free (section 3.1);
  ``python -m nplm_edu train --parallel hogwild --workers P ...``.

Both run inside :func:`nplm_edu.training.trainer.train`: the serial trainer's example order,
learning rates, per-epoch validation, early stopping, ``history.json`` and ``checkpoint.npz`` (one
format, written by one process). They checkpoint at the end of every epoch only.
"""
