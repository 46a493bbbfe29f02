"""Tests of section 3's parallel trainers: exactness against the serial trainer under real MPI,
a failing rank ending the job, hogwild on shared memory, and the command line."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.optim import learning_rate, sgd_step
from nplm_edu.training.parallel.output_block import OutputBlockSGD, block_range

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).parent / "mpi_scripts"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


def mpiexec(n, *args, timeout=120):
    """Run `mpiexec -n n python args...`; returns (CompletedProcess, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.run([str(MPIEXEC), "-n", str(n), sys.executable, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=ROOT)
    return proc, time.monotonic() - t0


@pytest.mark.parametrize("V,M", [(23, 1), (23, 2), (23, 3), (23, 4), (50, 3), (9, 4), (3, 4)])
def test_blocks_cover_the_vocabulary_once(V, M):
    # e.g. |V| = 23, M = 3: ceil(23/3) = 8 -> [0, 8), [8, 16), [16, 23)
    blocks = [block_range(V, M, i) for i in range(M)]
    assert blocks[0][0] == 0 and blocks[-1][1] == V
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    assert all(stop - start <= -(-V // M) for start, stop in blocks)


def test_block_range_matches_the_paper_example():
    # |V| = 23, M = 3: start = i * ceil(23/3) = 0, 8, 16; lengths 8, 8, 23 - 16 = 7
    assert [block_range(23, 3, i) for i in range(3)] == [(0, 8), (8, 16), (16, 23)]


@pytest.mark.parametrize("direct,K", [(True, 1), (False, 4)])
def test_serial_run_equals_serial_trainer(direct, K):
    """M = 1 without mpiexec: 10 updates equal NPLM.loss_and_grads + optim.sgd_step to 1e-6 relative."""
    cfg = NPLMConfig(V=23, n=4, m=5, h=6, direct=direct, dtype="float64", seed=1)
    rng = np.random.default_rng(0)
    ctx, tgt = rng.integers(0, 23, size=(60, 3)), rng.integers(0, 23, size=60)
    ref = NPLM(cfg)
    tr = OutputBlockSGD(NPLM(cfg).params, lr=0.05, r=1e-3, weight_decay=1e-3, batch_size=K)
    for t in range(10):
        idx = slice(t * K, (t + 1) * K)
        loss_ref, grads = ref.loss_and_grads(ctx[idx], tgt[idx])
        sgd_step(ref.params, grads, 0.05 / (1 + 1e-3 * t), 1e-3, ref.decayed)
        loss = tr.step(ctx[idx], tgt[idx], learning_rate(0.05, 1e-3, t))
        assert loss == pytest.approx(loss_ref, rel=1e-12)
    par = tr.gather()
    assert set(par) == set(ref.params)
    for k in ref.params:
        np.testing.assert_allclose(par[k], ref.params[k], rtol=1e-6, atol=1e-12 * np.abs(ref.params[k]).max())
    assert np.abs(par["U"] - NPLM(cfg).params["U"]).max() > 1e-3  # the updates did move the parameters


def test_the_blocks_time_includes_its_share_of_the_softmax(monkeypatch):
    """The max, exp and sum over the block's scores split with M: the "block" timer counts them, the
    "replicated" one does not (the softmax's Allreduce calls stay "comm")."""
    import time as _time

    import nplm_edu.training.parallel.output_block as ob

    head = ob.softmax_nll

    def slow_head(*args):
        _time.sleep(0.05)
        return head(*args)

    monkeypatch.setattr(ob, "softmax_nll", slow_head)
    cfg = NPLMConfig(V=23, n=3, m=4, h=5, seed=2)
    tr = OutputBlockSGD(NPLM(cfg).params, batch_size=4)
    rng = np.random.default_rng(0)
    tr.step(rng.integers(0, 23, size=(4, 2)), rng.integers(0, 23, size=4), 0.1)
    t = tr.split_times()
    assert t["block"] >= 0.05 and t["replicated"] < 0.05, t


def test_perplexity_equals_the_model():
    cfg = NPLMConfig(V=23, n=3, m=4, h=5, dtype="float64", seed=2)
    rng = np.random.default_rng(1)
    ctx, tgt = rng.integers(0, 23, size=(37, 2)), rng.integers(0, 23, size=37)
    tr = OutputBlockSGD(NPLM(cfg).params, batch_size=8)
    assert tr.perplexity(ctx, tgt) == pytest.approx(NPLM(cfg).perplexity(ctx, tgt), rel=1e-12)


@pytest.mark.parametrize("M", [2, 3, 4])
def test_mpi_run_equals_serial_trainer(M):
    """Under mpiexec -n M (4: oversubscribed on 2 cores), with and without direct connections, for
    |V| = 23 and 50 that M does not always divide, K = 1 and K > 1: gathered parameters after 12
    updates equal the serial trainer's to 1e-6 relative (the script prints one line per case)."""
    proc, _ = mpiexec(M, SCRIPTS / "exactness.py", 12)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"M={M} ")]
    assert len(lines) == 4 and all(ln.endswith("OK") for ln in lines), proc.stdout


def _in_use(path: Path) -> bool:
    """True if a live process has ``path`` mapped (so it is not a leftover)."""
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            if str(path) in maps.read_text():
                return True
        except OSError:
            continue
    return False


@pytest.fixture
def no_leaked_mpich_shm():
    """An MPICH job that ends in MPI_Abort (or with a rank killed) would leave its shared-memory file in
    /dev/shm: fail if one appeared during the test that no live process maps (another job's, running
    beside the test, is not counted), and remove it so that the next run does not count it again."""
    shm = Path("/dev/shm")
    before = set(shm.glob("mpich_shm_*")) if shm.is_dir() else set()
    yield
    new = set(shm.glob("mpich_shm_*")) - before if shm.is_dir() else set()
    deadline = time.monotonic() + 3  # an aborted job's ranks may still be exiting when mpiexec has returned
    while any(_in_use(f) for f in new) and time.monotonic() < deadline:
        time.sleep(0.1)
    leaked = [f for f in new if f.exists() and not _in_use(f)]
    for f in leaked:
        f.unlink(missing_ok=True)
    assert not leaked, f"leaked MPICH shared memory: {leaked}"


@pytest.mark.parametrize("mode,launcher", [("abort", []), ("plain", ["-m", "mpi4py"])])
def test_failing_rank_ends_the_job(mode, launcher, no_leaked_mpich_shm):
    """Rank 1 raises at its 4th update while rank 0 waits in an Allreduce: the job must end (well
    within 60 s) with a non-zero status and rank 1's error on stderr, not hang; the MPI_Abort that ends
    it leaves no shared memory behind (world() unlinked MPICH's file at the start)."""
    proc, seconds = mpiexec(2, *launcher, SCRIPTS / "fail.py", mode, timeout=90)
    assert proc.returncode != 0
    assert seconds < 60
    assert "rank 1 failed on purpose at update 3" in proc.stderr
    assert "finished without the error" not in proc.stdout


def _small_corpus():
    from nplm_edu.data.corpus import load_corpus

    return load_corpus("synthetic", synthetic_tokens=6000)


@pytest.mark.parametrize("locked", [False, True])
def test_hogwild_trains_and_frees_shared_memory(locked):
    from nplm_edu.training.parallel.hogwild import train_hogwild

    c = _small_corpus()
    cfg = NPLMConfig(V=c.V, n=3, m=8, h=16, seed=0)
    ctx, tgt = c.windows("train", 3)
    vc, vt = c.windows("valid", 3)
    before = set(os.listdir("/dev/shm"))
    out, seen = [], []
    res = train_hogwild(NPLM(cfg).params, ctx, tgt, workers=2, examples=3000, batch_size=4, lr=0.1,
                        locked=locked, trainer_out=out, progress=seen.append)
    assert set(os.listdir("/dev/shm")) - before == set()  # every shared block unlinked
    assert res.updates == 750 and res.examples == 3000  # 2 workers x 1500 examples / K = 4
    assert seen and seen == sorted(seen) and seen[-1] == 3000  # the progress bar's count: rising, then all
    assert np.all(np.isfinite(res.params["U"]))
    untrained = OutputBlockSGD(NPLM(cfg).params).perplexity(vc, vt)
    assert out[0].perplexity(vc, vt) < 0.6 * untrained  # both workers' updates reached the parameters


def _train_cli():
    """The command line as a user types it: `python -m nplm_edu`."""
    return ["-m", "nplm_edu"]


CLI_COMMON = ["train", "--corpus", "synthetic", "--synthetic-tokens", "6000", "--n", "3", "--h", "8", "--m", "6",
              "--epochs", "2", "--batch", "8", "--lr", "0.1", "--dtype", "float64", "--quiet"]


@pytest.fixture(scope="module")
def serial_cli_run(tmp_path_factory):
    """The folder of `python -m nplm_edu train` with CLI_COMMON (2 epochs), run serially."""
    out = tmp_path_factory.mktemp("serial")
    ser = subprocess.run([sys.executable, *map(str, _train_cli()), *CLI_COMMON, "--out", str(out)],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert ser.returncode == 0, ser.stderr
    return out


@pytest.mark.long
@pytest.mark.parametrize("resumed", [False, True])
def test_cli_output_block_matches_serial_cli(tmp_path, serial_cli_run, resumed):
    """`mpiexec -n 2 python -m nplm_edu train --parallel output-block` writes the serial run's history
    and checkpoint (parameters equal to 1e-6 relative in float64); also when it stops after epoch 1 and
    the same command with --resume trains epoch 2 (resume at an epoch boundary, every rank loading it)."""
    import json

    cmd = [*_train_cli(), *CLI_COMMON, "--out", tmp_path / "par", "--parallel", "output-block"]
    if resumed:
        first, _ = mpiexec(2, *cmd, "--epochs", "1")  # (argparse: the last --epochs wins)
        assert first.returncode == 0, first.stderr
        assert len(json.loads((tmp_path / "par" / "history.json").read_text())["epochs"]) == 1
    par, _ = mpiexec(2, *cmd, *(["--resume"] if resumed else []))
    assert par.returncode == 0, par.stderr
    hs, hp = (json.loads((d / "history.json").read_text()) for d in (serial_cli_run, tmp_path / "par"))
    assert hp["parallel"] == {"algorithm": "output-block", "ranks": 2}
    for es, ep in zip(hs["epochs"], hp["epochs"], strict=True):
        assert ep["updates"] == es["updates"]
        assert ep["train_ppl"] == pytest.approx(es["train_ppl"], rel=1e-9)
        assert ep["valid_ppl"] == pytest.approx(es["valid_ppl"], rel=1e-9)
    a, b = np.load(serial_cli_run / "checkpoint.npz"), np.load(tmp_path / "par" / "checkpoint.npz")
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        if k.startswith(("param/", "best/")):
            np.testing.assert_allclose(b[k], a[k], rtol=1e-6, atol=1e-12)


def test_cli_hogwild_trains(tmp_path):
    """`python -m nplm_edu train --parallel hogwild --workers 2` writes a history and a checkpoint."""
    import json

    proc = subprocess.run([sys.executable, *map(str, _train_cli()), *CLI_COMMON, "--out", str(tmp_path),
                           "--parallel", "hogwild", "--workers", "2"], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    h = json.loads((tmp_path / "history.json").read_text())
    assert h["parallel"] == {"algorithm": "hogwild", "workers": 2} and len(h["epochs"]) == 2
    assert h["epochs"][1]["valid_ppl"] < h["epochs"][0]["train_ppl"]  # it learned: first-epoch average > end
    assert (tmp_path / "checkpoint.npz").exists()


@pytest.mark.parametrize("algorithm", ["output-block", "hogwild"])
@pytest.mark.parametrize("option", [["--checkpoint-every-minutes", "5"], ["--resume"]])
def test_cli_parallel_refuses_what_it_cannot_do_and_reads_what_it_resumes(tmp_path, algorithm, option):
    """The parallel modes checkpoint at the end of every epoch only: an explicit --checkpoint-every-minutes
    is refused in one line (not silently ignored). --resume is honoured: it reads the checkpoint, so a file
    that is not one is one error line too, never overwritten by a fresh start."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.npz").write_bytes(b"the run to resume")
    proc = subprocess.run([sys.executable, *_train_cli(), *CLI_COMMON, "--out", str(out), "--parallel", algorithm,
                           *option], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: --parallel {algorithm} checkpoints at the end of every epoch only (no --checkpoint-every-minutes, "
        "no Ctrl-C checkpoint)" if option[0] != "--resume" else
        f"error: {out / 'checkpoint.npz'} is not a readable nplm-edu checkpoint (not a zip archive: another kind of file, or a damaged one)"]
    assert (out / "checkpoint.npz").read_bytes() == b"the run to resume"
    assert not (out / "history.json").exists()


def test_mpi_cli_refuses_in_one_line(tmp_path):
    """Under mpiexec -n 2 every rank refuses --checkpoint-every-minutes, and only rank 0 says so: one
    line for the job."""
    proc, _ = mpiexec(2, *_train_cli(), *CLI_COMMON, "--out", tmp_path, "--parallel", "output-block",
                      "--checkpoint-every-minutes", "5")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: --parallel output-block checkpoints at the end of every epoch only "
                                        "(no --checkpoint-every-minutes, no Ctrl-C checkpoint)"]


@pytest.mark.parametrize("extra", [[], ["--parallel", "hogwild", "--workers", "2"]])
def test_mpiexec_without_the_output_block_trainer_is_refused_in_one_line(tmp_path, extra):
    """mpiexec -n 2 of a serial or hogwild run started two whole runs writing the same folder, every line
    printed twice: now one line, status 2, and no folder."""
    proc, _ = mpiexec(2, *_train_cli(), *CLI_COMMON, "--out", tmp_path / "run", *extra)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: mpiexec started 2 copies of this command, each of which would do all "
                                        "of its work (into the same files): only train --parallel output-block shares "
                                        "one run between processes; run anything else without mpiexec"]
    assert not (tmp_path / "run").exists()


BAD_RUNS = {  # a command line every rank finds wrong at the same point, and the one line rank 0 says
    "argparse": (["--lr", "abc"], r"python -m nplm_edu train: error: argument --lr: invalid float value: 'abc'"),
    "unwritable out": (["--out", "/etc/passwd/x"], r"error: cannot write to /etc/passwd/x: /etc/passwd is a file, not a folder"),
    "diverging": (["--lr", "1e30"], r"error: the training loss became \S+ at update 2 of epoch 1 \(no checkpoint "
                                    r"was written yet\); try a smaller learning rate"),
}


@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_mpi_errors_every_rank_meets_end_the_job_cleanly_in_one_line(tmp_path, case, no_leaked_mpich_shm):
    """Bad input found by argparse, an --out that cannot be written (found before any setup: nothing on
    stdout) and a loss that diverges (seen by every rank in the allreduced loss): status 2, one line
    from rank 0 (argparse's usage too, once), no MPI_Abort and no shared memory left behind."""
    extra, line = BAD_RUNS[case]
    proc, seconds = mpiexec(2, *_train_cli(), *CLI_COMMON, "--out", tmp_path / "run", "--parallel",
                            "output-block", *extra)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and re.fullmatch(line, errors[0]), proc.stderr
    assert proc.stderr.count("usage:") == (case == "argparse")
    assert "Abort" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == "" and seconds < 20


def test_mpi_out_of_memory_is_one_line(tmp_path, no_leaked_mpich_shm):
    """A minibatch too large for memory fails on every rank: the serial command line's one line and
    status 2 (not rank 0's traceback and an Abort). Under a 3 GB address-space limit per process, so
    that the allocation fails at once instead of filling the machine."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3_000_000_000, 3_000_000_000))

    proc = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, *_train_cli(), *CLI_COMMON, "--out",
                           str(tmp_path / "run"), "--parallel", "output-block", "--batch", "100000000"],
                          capture_output=True, text=True, timeout=60, env=ENV, cwd=ROOT, preexec_fn=limit)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == ["error: out of memory: try a smaller --batch, model or corpus"], proc.stderr


def test_mpi_ctrl_c_ends_every_rank_cleanly(tmp_path, no_leaked_mpich_shm):
    """Ctrl-C to mpiexec (which forwards it to every rank) while the ranks train: they agree to stop
    after the same update (one rank may be waiting in an Allreduce, where Python cannot raise), so the
    job ends with status 130 and one line, with no MPI_Abort and no shared memory left behind."""
    import select

    long_run = [*_train_cli(), *[a for a in CLI_COMMON if a != "--quiet"], "--synthetic-tokens", "400000",
                "--batch", "1", "--epochs", "50", "--out", str(tmp_path / "run"), "--parallel", "output-block"]
    proc = subprocess.Popen([str(MPIEXEC), "-n", "2", sys.executable, *long_run], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # rank 0's line just before train(), read from the pipe itself: a buffered readline() can take two
    # lines from the pipe at once and keep the second, while select() then waits for more bytes, which
    # come only at the end of epoch 1 (a CI run saw the line 45 s late, Ctrl-C came in epoch 2)
    deadline, seen, fd = time.monotonic() + 60, "", proc.stdout.fileno()
    while "output blocks over" not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 1.0)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    assert "output blocks over" in seen, seen
    time.sleep(1.5)  # train() sets its Ctrl-C handler at once; an epoch of 320,000 updates takes far longer
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    err = _finish(proc)
    assert proc.returncode == 130, err
    said = [ln for ln in err.replace("\r", "\n").splitlines()  # without the bar's redraws and mpiexec's notes
            if ln.strip() and not ln.startswith(("[mpiexec@", "epoch "))]
    # no epoch of 320,000 updates has ended: nothing inside an epoch is saved under MPI
    assert said == ["interrupted (no checkpoint was written yet)"], err[-1000:]


def test_cli_hogwild_resumes_at_an_epoch_boundary(tmp_path):
    """One hogwild epoch, then the same command with --epochs 2 --resume: the second run continues from the
    checkpoint (its history, update count and parameters), it does not start again."""
    import json

    cmd = [sys.executable, *_train_cli(), *CLI_COMMON, "--out", str(tmp_path), "--parallel", "hogwild", "--workers",
           "2"]
    for extra in (["--epochs", "1"], ["--resume"]):
        proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr
        if extra[0] == "--epochs":
            first = json.loads((tmp_path / "history.json").read_text())["epochs"]
    h = json.loads((tmp_path / "history.json").read_text())
    assert len(first) == 1 and h["epochs"][0] == first[0] and len(h["epochs"]) == 2
    assert h["epochs"][1]["updates"] == 2 * first[0]["updates"] == h["updates"]
    # from the trained parameters: the second epoch's average loss is below the first's (which started untrained)
    assert h["epochs"][1]["train_ppl"] < first[0]["train_ppl"]


FORK_THREADS = """
import json, os, sys, threading
counts = []  # Python threads alive at each fork
os.register_at_fork(before=lambda: counts.append(threading.active_count()))
from nplm_edu.data.corpus import load_corpus
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.parallel.hogwild import HogwildBackend
from nplm_edu.training.trainer import TrainConfig, train
c = load_corpus("synthetic", synthetic_tokens=6000)
model = FusedNPLM(NPLMConfig(V=c.V, n=3, m=6, h=8, seed=0))
config = TrainConfig(epochs=2, batch=8, lr=0.1, examples_per_epoch=400)
train(model, c, config, quiet=sys.argv[1] == "quiet", backend=HogwildBackend(model, config, c.windows("train", 3)))
print(json.dumps(counts))
"""


@pytest.mark.parametrize("quiet", ["quiet", "bars"])
def test_hogwild_forks_its_workers_from_a_single_thread(quiet):
    """A fork copies only the thread that calls it: a lock another thread held then stays locked in the
    worker forever. tqdm runs a monitor thread for every bar, even a disabled one (--quiet), and
    the epoch's bar is open while hogwild forks; the trainer's bar turns that thread off. In a fresh
    interpreter, so that no thread of another test counts."""
    run = subprocess.run([sys.executable, "-c", FORK_THREADS, quiet], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(counts) >= 4 and set(counts) == {1}  # 2 workers x 2 epochs, each forked from the main thread alone


def test_hogwild_wait_survives_the_last_worker_ending_between_two_looks():
    """A worker can end between two reads of its exit code (each read polls the process): waiting
    must not assume that one seen running a moment ago still is (StopIteration failed a CI run)."""
    from nplm_edu.training.parallel.hogwild import _wait

    class Worker:  # running for its first `reads` looks, then ended with status 0
        def __init__(self, reads):
            self.reads, self.joins = reads, 0

        @property
        def exitcode(self):
            self.reads -= 1
            return None if self.reads >= 0 else 0

        def join(self, timeout=None):
            self.joins += 1

    for reads in range(6):
        workers, seen = [Worker(reads), Worker(reads + 1)], []
        _wait(workers, stop=None, done=[3, 4], progress=seen.append)
        assert seen[-1] == 7 and all(w.exitcode == 0 for w in workers)


def test_hogwild_stops_when_the_loss_diverges():
    """A learning rate of 1e30 makes the shared parameters overflow after the first updates: every
    worker stops and train_hogwild raises TrainingDiverged (not a silent epoch of NaN updates), with
    the shared memory freed."""
    from nplm_edu.training.checkpoint import TrainingDiverged
    from nplm_edu.training.parallel.hogwild import HogwildDiverged, train_hogwild

    c = _small_corpus()
    ctx, tgt = c.windows("train", 3)
    before = set(os.listdir("/dev/shm"))
    with pytest.raises(TrainingDiverged, match=r"^the training loss became (nan|inf|-inf|[0-9.e+]+) at about update \d+ "
                                               r"\(hogwild worker [12] of 2\); try a smaller learning rate$") as info, \
            np.errstate(over="ignore", invalid="ignore"):
        train_hogwild(NPLM(NPLMConfig(V=c.V, n=3, m=8, h=16, seed=0)).params, ctx, tgt, workers=2, examples=3000,
                      batch_size=4, lr=1e30)
    assert isinstance(info.value, HogwildDiverged) and info.value.update < 20  # long before 750 updates
    assert set(os.listdir("/dev/shm")) - before == set()
    with pytest.raises(HogwildDiverged) as info, np.errstate(over="ignore", invalid="ignore"):
        train_hogwild(NPLM(NPLMConfig(V=c.V, n=3, m=8, h=16, seed=0)).params, ctx, tgt, workers=1, examples=3000,
                      batch_size=4, lr=1e30)
    assert info.value.update == 2  # the first update ruins the parameters, the second one's loss shows it:
    # counted from 1, as the serial trainer's line counts (update state.step + 1)


def test_cli_hogwild_divergence_is_one_clear_error(tmp_path):
    """The command line ends a diverging hogwild run at once, with the serial trainer's kind of message
    (and status 2, no traceback) instead of training a whole epoch on NaN."""
    lr = CLI_COMMON.index("--lr")
    args = [*CLI_COMMON[:lr + 1], "1e30", *CLI_COMMON[lr + 2:]]
    proc = subprocess.run([sys.executable, *_train_cli(), *args, "--out", str(tmp_path / "run"), "--parallel",
                           "hogwild", "--workers", "2"], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.splitlines()[-1]  # (after numpy's overflow warnings, as in the serial trainer)
    assert re.fullmatch(r"error: the training loss became (nan|inf|-inf|[0-9.e+]+) at about update \d+ of epoch 1 \(hogwild "
                        r"worker [12] of 2\) \(no checkpoint was written yet\); try a smaller learning rate", last), last
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "checkpoint.npz").exists()


# --------------------------------------------------------------------------- hogwild under faults
def _children(pid: int, forked_only: bool = True) -> list[int]:
    """The forked workers of ``pid``: its children running its own command line (not, e.g., the
    multiprocessing resource tracker), from /proc; with ``forked_only=False``, all its children."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and (not forked_only or _cmdline(int(d)) == cmdline):
                out.append(int(d))
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


LONG_HOGWILD = ["train", "--corpus", "synthetic", "--synthetic-tokens", "400000", "--n", "3", "--h", "8", "--m", "6",
                "--epochs", "50", "--batch", "1", "--lr", "0.05", "--quiet", "--parallel", "hogwild", "--workers", "2"]


def _ignores_sigint(pid: int) -> bool:
    """Whether the process has set Ctrl-C (SIGINT, signal 2) to be ignored: bit 1 of SigIgn in /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return bool(int(status.split("SigIgn:")[1].split()[0], 16) & (1 << (2 - 1)))


def _start_hogwild(tmp_path, quiet: bool = True):
    """A long hogwild run, once its two workers train (they have set Ctrl-C aside for the parent).
    The run dumps every thread's Python stack on SIGABRT (faulthandler), for :func:`_finish`."""
    # as a terminal's foreground job: Ctrl-C not ignored. A shell without job control starts its
    # background jobs (`cmd &`, so CI started that way) with SIGINT ignored, which they inherit; Python
    # then leaves it ignored and Ctrl-C cannot stop the run, as the shell intends for a background job
    argv = [a for a in LONG_HOGWILD if quiet or a != "--quiet"]
    proc = subprocess.Popen([sys.executable, *_train_cli(), *argv, "--out", str(tmp_path / "run")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(ENV, PYTHONFAULTHANDLER="1"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = [w for w in _children(proc.pid) if _alive(w)]
        if len(workers) >= 2 and all(_ignores_sigint(w) for w in workers):
            break
        time.sleep(0.05)
    assert len(workers) >= 2, "the workers did not start"
    time.sleep(0.3)
    return proc, workers


def _finish(proc, timeout=30):
    """stderr of the run once it ends; if it does not within ``timeout`` s, fail with where it is stuck
    (the Python stack of each of its threads, and the state of each of its processes)."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        states = {pid: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                  for pid in [proc.pid, *_children(proc.pid, forked_only=False)] if _alive(pid)}
        os.kill(proc.pid, signal.SIGABRT)
        for pid in _children(proc.pid, forked_only=False):
            os.kill(pid, 9)
        err = proc.communicate(timeout=30)[1]
        pytest.fail(f"the run did not end within {timeout} s; process states {states}; its stderr:\n{err}")


def test_hogwild_killed_worker_ends_the_run_at_once_in_one_line(tmp_path):
    """kill -9 of one worker: the others are stopped at once (not when their slices end), one line, exit 2."""
    proc, workers = _start_hogwild(tmp_path)
    t0 = time.monotonic()
    os.kill(workers[0], 9)
    err = _finish(proc)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [err.strip()] and err.startswith("error: a hogwild worker failed"), err
    assert "SIGKILL" in err and "Traceback" not in err
    assert err.strip().endswith("(no checkpoint was written yet)")  # killed in epoch 1: says what survives
    assert not any(_alive(w) for w in workers)


def test_hogwild_shares_anonymous_memory_with_nothing_to_leak(tmp_path):
    """The shared parameters are anonymous memory that the forked workers inherit: while a run trains
    there is no file in /dev/shm and no helper process (no resource tracker) beside the workers, so no
    kill -9 of any process, the parent, a worker or a helper, can leave shared memory behind."""
    before = set(os.listdir("/dev/shm"))
    proc, workers = _start_hogwild(tmp_path)
    try:
        assert set(os.listdir("/dev/shm")) - before == set()
        assert sorted(w for w in _children(proc.pid, forked_only=False) if _alive(w)) == sorted(workers)
    finally:
        os.kill(proc.pid, 9)
        proc.communicate(timeout=30)


def test_hogwild_parent_killed_leaves_no_orphan(tmp_path):
    proc, workers = _start_hogwild(tmp_path)
    os.kill(proc.pid, 9)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers), "orphaned hogwild workers are still running"


def test_hogwild_ctrl_c_is_one_line(tmp_path):
    proc, workers = _start_hogwild(tmp_path)
    for pid in [proc.pid, *workers]:  # a terminal's Ctrl-C reaches the parent and every worker
        os.kill(pid, signal.SIGINT)
    err = _finish(proc)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["interrupted (no checkpoint was written yet)"], err  # in epoch 1
    assert not any(_alive(w) for w in workers)


def test_hogwild_sigterm_is_taken_as_ctrl_c(tmp_path):
    """SIGTERM (sent by `timeout` and batch schedulers) to the parent: the workers stopped, one line, as
    Ctrl-C does (it ended the run silently, exit 143), and no shared memory or orphan left."""
    before = set(os.listdir("/dev/shm"))
    proc, workers = _start_hogwild(tmp_path)
    os.kill(proc.pid, signal.SIGTERM)
    err = _finish(proc)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["interrupted (no checkpoint was written yet)"], err  # in epoch 1
    assert not any(_alive(w) for w in workers) and set(os.listdir("/dev/shm")) - before == set()


def test_hogwild_error_line_is_not_glued_to_the_progress_bar(tmp_path):
    """With the progress bar shown, a failed worker's one line starts a line of its own: the bar is
    closed (and erased) before the error is printed."""
    proc, workers = _start_hogwild(tmp_path, quiet=False)
    os.kill(workers[0], 9)
    err = _finish(proc)
    assert proc.returncode == 2, err
    last = err.replace("\r", "\n").strip().splitlines()[-1]  # what the terminal shows last
    assert last.startswith("error: a hogwild worker failed"), repr(err[-300:])


def test_hogwild_progress_bar_moves_during_the_epoch(tmp_path):
    """The epoch's bar follows the workers' examples as they train (it sat at 0% until the epoch ended):
    with the bar shown, some update of it lies strictly between 0 and the epoch's end."""
    proc, workers = _start_hogwild(tmp_path, quiet=False)
    err = _stderr_until(proc, lambda text: any(0 < int(c) for c in re.findall(r"\| *(\d+)/\d+ \[", text)))
    counts = [int(m) for m in re.findall(r"\| *(\d+)/\d+ \[", err)]  # "| 4321/319996 [" of every redraw
    assert any(0 < c for c in counts), err[-500:]
    assert proc.returncode == 130, err[-500:]  # the epoch was still running: it was Ctrl-C that ended it


def _stderr_until(proc, seen, timeout=120):
    """The run's stderr, read as it is written until ``seen(text so far)`` holds (or ``timeout`` s pass,
    or the run ends), then Ctrl-C to the run and the rest of its stderr once it ends."""
    chunks = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and not seen("".join(chunks)):
        time.sleep(0.05)
    try:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        for pid in [proc.pid, *_children(proc.pid, forked_only=False)]:
            if _alive(pid):
                os.kill(pid, 9)
        proc.wait(timeout=30)
    reader.join(timeout=30)
    proc.stdout.read()
    return "".join(chunks)
