"""The Python package (python/distal) end to end, run under mpirun by tests/python/run.sh.

Compiles SUMMA (examples/summa.dtl), the matrix-vector product and the sparse one of the
example application (examples/app/matvec.dtl, spmv.dtl) and conjugate gradient
(examples/cg.dtl, a loop and a floating param), fills the blocks from global NumPy arrays by
the block queries (and, for SUMMA, through import/export from row blocks), computes, gathers
on rank 0 and compares with NumPy at sizes that the rank counts do not divide.  Then the
errors: arrays of the wrong dtype, shape or layout, unknown params and tensors raise before
C is called; failing calls (plan_create, compute) raise DistalError with PREFIX_error's
message; a program distalc rejects raises CompileError with distalc's message.

usage: mpirun -np P python3 check.py TOP_SRCDIR WORKDIR
"""
import os
import sys

import numpy as np
from mpi4py import MPI

import distal

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
top_srcdir, workdir = sys.argv[1], sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL rank {rank}: {what}", flush=True)


def gather_global(plan, name, block, shape):
    """The global tensor from every rank's block (replicas must agree); rank 0 gets it and
    whether every element was covered."""
    parts = comm.gather((plan.block(name)[0], block), root=0)
    if rank:
        return None, True
    out = np.full(shape, np.nan)
    for off, b in parts:
        sl = tuple(slice(o, o + e) for o, e in zip(off, b.shape))
        out[sl] = b
    return out, not np.isnan(out).any()


def close(a, b, tol=1e-10):
    return np.abs(a - b).max() <= tol * max(1.0, np.abs(b).max())


def expect(exc, fn, what, contains=None):
    try:
        fn()
    except exc as e:
        if contains and contains not in str(e):
            check(False, f"{what}: {exc.__name__} without '{contains}': {e}")
        return e
    except Exception as e:  # noqa: BLE001 -- the wrong kind is a failure
        check(False, f"{what}: {type(e).__name__} instead of {exc.__name__}: {e}")
        return None
    check(False, f"{what}: no {exc.__name__}")
    return None


def row_box(n):
    return n * rank // size, n * (rank + 1) // size


def test_summa(lib):
    n, chunk = 37, 5
    rng = np.random.default_rng(7)
    B, C = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ref = B @ C
    with lib.plan(comm, n=n, chunk=chunk) as plan:
        check(plan.global_shape("A") == (n, n), f"global shape of A: {plan.global_shape('A')}")
        A = plan.zeros("A")
        plan.compute(A, plan.block_of("B", B), plan.block_of("C", C))
        got, covered = gather_global(plan, "A", A, (n, n))
        if rank == 0:
            check(covered and close(got, ref), "summa through block_of: A = B C")
        # the application's row blocks in, the kernel's result back to row blocks
        r0, r1 = row_box(n)
        Bk = plan.import_tensor("B", B[r0:r1].copy(), (r0, 0))
        Ck = plan.import_tensor("C", C[r0:r1].copy(), (r0, 0))
        A2 = plan.zeros("A")
        plan.compute(A=A2, B=Bk, C=Ck)
        rows = plan.export_tensor("A", A2, (r0, 0), (r1, n))
        check(rows.shape == (r1 - r0, n) and close(rows, ref[r0:r1]), "summa through import/export of row blocks")
        errors_dense(plan, A, B, C)


def errors_dense(plan, A, Bfull, Cfull):
    B, C = plan.block_of("B", Bfull), plan.block_of("C", Cfull)
    expect(TypeError, lambda: plan.compute(A.astype(np.float32), B, C), "float32 block", "dtype")
    wrong = np.zeros((A.shape[0] + 1, A.shape[1]))
    expect(ValueError, lambda: plan.compute(wrong, B, C), "block of the wrong shape", "shape")
    if A.shape[1] > 1:
        strided = np.zeros((A.shape[0], 2 * A.shape[1]))[:, ::2]
        expect(ValueError, lambda: plan.compute(strided, B, C), "non-contiguous block", "contiguous")
    ro = A.copy()
    ro.flags.writeable = False
    expect(ValueError, lambda: plan.compute(ro, B, C), "read-only output", "writable")
    expect(TypeError, lambda: plan.compute(A, B), "a missing tensor", "missing C")
    expect(TypeError, lambda: plan.compute(A, B, C, D=C), "an unknown tensor", "no tensor 'D'")
    expect(TypeError, lambda: plan.compute(A.tolist(), B, C), "a list", "numpy array")
    expect(KeyError, lambda: plan.block("Z"), "block of an unknown tensor")
    expect(ValueError, lambda: plan.block_of("B", np.zeros((3, 3))), "global array of the wrong shape")
    expect(TypeError, lambda: plan.lib.plan(comm, m=3), "unknown param", "no param 'm'")
    expect(TypeError, lambda: plan.lib.plan(comm, n=2.5), "float for an integer param", "integer")
    expect(TypeError, lambda: plan.lib.plan(comm, n=True), "a bool for an integer param", "integer")
    expect(OverflowError, lambda: plan.lib.plan(comm, n=2**64 + 4), "a param beyond 64 bits", "64-bit")
    expect(OverflowError, lambda: plan.import_tensor("B", B[:1].copy(), (2**64, 0)), "an offset beyond 64 bits", "64-bit")


def test_matvec(lib):
    n = 53
    rng = np.random.default_rng(11)
    Ag, xg = rng.standard_normal((n, n)), rng.standard_normal(n)
    with lib.plan(comm, n=n) as plan:
        check(plan.block("x") == ((0,), (n,)), f"x is replicated: {plan.block('x')}")
        y = plan.zeros("y")
        plan.compute(y, plan.block_of("A", Ag), plan.block_of("x", xg))
        got, covered = gather_global(plan, "y", y, (n,))
        if rank == 0:
            check(covered and close(got, Ag @ xg), "matvec: y = A x")


def sparse_matrix(n, m, density, seed):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, m)) < density
    dense = np.where(mask, rng.standard_normal((n, m)), 0.0)
    coords = np.argwhere(dense != 0)
    return dense, coords, dense[dense != 0]


def test_spmv(lib):
    n, m = 41, 29
    dense, coords, vals = sparse_matrix(n, m, 0.2, 5)
    xg = np.random.default_rng(6).standard_normal(m)
    mine = np.arange(len(vals)) % size == rank  # every rank passes some entries
    with lib.plan(comm, n=n, m=m) as plan:
        Ab = plan.import_sparse("A", coords[mine], vals[mine])
        (r0, c0), (nr, nc) = plan.block("A")
        block = dense[r0:r0 + nr, c0:c0 + nc]
        check(Ab.nnz == np.count_nonzero(block), f"spmv: A's piece has {Ab.nnz} values, not {np.count_nonzero(block)}")
        ec, ev = Ab.entries()
        check(np.array_equal(dense[ec[:, 0], ec[:, 1]], ev) and len(ev) == np.count_nonzero(block),
              "spmv: the piece's entries are the block's nonzeros")
        y = plan.zeros("y")
        plan.compute(y, Ab, plan.block_of("x", xg))
        got, covered = gather_global(plan, "y", y, (n,))
        if rank == 0:
            check(covered and close(got, dense @ xg), "spmv: y = A x")
        expect(TypeError, lambda: plan.compute(y, plan.block_of("A", dense), plan.block_of("x", xg)),
               "a dense block for a sparse tensor", "sparse")
        expect(TypeError, lambda: plan.compute(y, Ab.entries()[1], plan.block_of("x", xg)),
               "values for a sparse tensor", "SparseBlock")
        expect(ValueError, lambda: plan.import_sparse("A", coords[:, :1], vals), "coordinates n x 1", "n x 2")
        # a piece of another plan's distribution: compute refuses it on every rank, with a message
        with lib.plan(comm, n=n + 1, m=m) as other:
            foreign = other.import_sparse("A", coords[mine], vals[mine])
            e = expect(distal.DistalError, lambda: plan.compute(y, foreign, plan.block_of("x", xg)),
                       "compute with a piece of another box")
            check(e is None or (e.message and e.call == "spmv_compute"), f"compute's message: {e}")


BALANCED = """param n = 10;
machine M = grid(p);
tensor y(n) @ M(i -> i) balanced by A;
tensor A(n, n) csr @ M(ij -> i) balanced;
tensor x(n) @ M(j -> j) balanced by A;
y(i) = A(i, j) * x(j);
"""


def test_balanced(lib):
    """Balanced partitions: boundaries from the entries (balance_split), a plan with them whose
    blocks follow them, y = A x against NumPy; bad boundaries refused."""
    n = 53
    rng = np.random.default_rng(8)
    dense = np.zeros((n, n))
    for i in range(n):  # skewed: row i holds about n / (i + 1) entries
        k = max(1, n // (i + 1))
        dense[i, rng.integers(0, n, size=k)] = rng.integers(1, 9, size=k) / 4.0
    r, c = np.nonzero(dense)
    coords, vals = np.stack([r, c], 1).astype(np.int64), dense[r, c]
    xg = rng.standard_normal(n)
    mine = np.arange(len(vals)) % size == rank
    check(lib.balanced == ("A",), f"balanced tensors {lib.balanced}")
    split = lib.balance_split(comm, coords[mine][:, 0], n, size)
    check(split[0] == 0 and split[-1] == n and np.all(np.diff(split) >= 0), f"boundaries {split}")
    counts = [np.count_nonzero(dense[split[q]:split[q + 1]]) for q in range(size)]
    most_in_a_row = max(np.count_nonzero(dense, axis=1))
    check(max(counts) <= len(vals) / size + most_in_a_row, f"entries per block {counts}")
    with lib.balanced_plan(comm, {"A": [split]}, n=n) as plan:
        (r0,), (nr,) = plan.block("y")
        (x0,), (nx,) = plan.block("x")
        check((r0, nr) == (split[rank], split[rank + 1] - split[rank]) and (x0, nx) == (r0, nr),
              "balanced: the vectors' blocks are the boundaries passed")
        Ab = plan.import_sparse("A", coords[mine], vals[mine])
        check(Ab.nnz == counts[rank], f"balanced: A's piece has {Ab.nnz} values, not {counts[rank]}")
        y = plan.zeros("y")
        plan.compute(y, Ab, plan.block_of("x", xg))
        got, covered = gather_global(plan, "y", y, (n,))
        if rank == 0:
            check(covered and close(got, dense @ xg), "balanced: y = A x")
    with lib.balanced_plan(comm, {"A": [None]}, n=n) as plan:  # None: blocks of equal extent
        (r0,), (nr,) = plan.block("y")
        s = -(-n // size)
        check(r0 == min(n, rank * s) and nr == min(n, (rank + 1) * s) - r0, "balanced: None gives equal extents")
    expect(ValueError, lambda: lib.balanced_plan(comm, {"A": [split[:-1]]}, n=n), "short boundaries", "values needed")
    expect(KeyError, lambda: lib.balanced_plan(comm, {"y": [split]}, n=n), "boundaries of y", "not a balanced tensor")
    bad = split.copy()
    bad[-1] = n + 1
    expect(distal.DistalError, lambda: lib.balanced_plan(comm, {"A": [bad]}, n=n), "boundaries past the extent",
           "must rise from 0 to")


def test_cg(lib):
    n = 30
    # a symmetric positive definite tridiagonal matrix
    dense = np.diag(np.full(n, 4.0)) + np.diag(np.full(n - 1, -1.0), 1) + np.diag(np.full(n - 1, -1.0), -1)
    coords = np.argwhere(dense != 0)
    vals = dense[dense != 0]
    bg = np.random.default_rng(3).standard_normal(n)
    e = expect(distal.DistalError, lambda: lib.plan(comm), "cg without its param n")
    check(e is None or "n" in e.message, f"plan_create's message names n: {e}")
    with lib.plan(comm, n=n, tol=1e-12) as plan:
        check(plan.params["tol"] == 1e-12 and plan.params["maxit"] == 1000, f"params: {plan.params}")
        mine = slice(rank, None, size)
        A = plan.import_sparse("A", coords[mine], vals[mine])
        x = plan.zeros("x")
        plan.compute(A, plan.block_of("b", bg), x)
        got, covered = gather_global(plan, "x", x, (n,))
        if rank == 0:
            check(covered and close(got, np.linalg.solve(dense, bg), 1e-9), "cg: A x = b")
        it = plan.iterations
        check(0 < it <= n + 1, f"cg ran {it} iterations")
    expect(ValueError, lambda: plan.zeros("x"), "a closed plan", "closed")


def test_auto(lib, plain):
    """--auto's run-time choice through the package: Plan.schedule names the variant plan_create
    chose for these sizes and rank count, and compute gives NumPy's results for each shape"""
    rng = np.random.default_rng(5)
    for n, m, k in ((23, 19, 17), (130, 5, 7), (4, 9, 300)):
        B, C, x = rng.standard_normal((n, k)), rng.standard_normal((k, m)), rng.standard_normal(m)
        with lib.plan(comm, n=n, m=m, k=k) as plan:
            text, pred = plan.schedule
            check(text.startswith("variant ") and "statement 1:" in text and pred > 0, f"schedule {text!r} {pred}")
            A, y = plan.zeros("A"), plan.zeros("y")
            plan.compute(A, plan.block_of("B", B), plan.block_of("C", C), plan.block_of("x", x), y)
            gA, cA = gather_global(plan, "A", A, (n, m))
            gy, cy = gather_global(plan, "y", y, (n,))
            if rank == 0:
                check(cA and cy and close(gA, B @ C) and close(gy, (B @ C) @ x), f"--auto at {n} x {m} x {k}: {text.split(chr(10))[0]}")
    with plain.plan(comm, n=5, m=4, k=3) as plan:
        expect(AttributeError, lambda: plan.schedule, "schedule without --auto", "one schedule")


def test_compile_errors():
    bad = os.path.join(workdir, "bad.dtl")
    if rank == 0:
        with open(bad, "w") as f:
            f.write("param n = 8;\ntensor A(n) @ Q(i -> i);\nA(i) = 1;\n")
    comm.Barrier()
    e = expect(distal.CompileError, lambda: distal.compile(bad), "compile of a bad program", "error:")
    check(e is None or "bad.dtl:2" in str(e), f"distalc's located message: {e}")
    expect(ValueError, lambda: distal.compile(bad, options=["--exe"]), "compile with --exe", "--exe")
    expect(FileNotFoundError, lambda: distal.compile(os.path.join(workdir, "none.dtl")), "compile of no file")


def main():
    ex = os.path.join(top_srcdir, "examples")
    summa = distal.compile(os.path.join(ex, "summa.dtl"))
    matvec = distal.compile(os.path.join(ex, "app", "matvec.dtl"))
    spmv = distal.compile(os.path.join(ex, "app", "spmv.dtl"))
    cg = distal.compile(os.path.join(ex, "cg.dtl"))
    path = os.path.join(workdir, "balanced.dtl")
    if rank == 0:
        with open(path, "w") as f:
            f.write(BALANCED)
    comm.Barrier()
    balanced = distal.compile(path)
    check(summa.tensors == ("A", "B", "C") and summa.dtype("A") == np.float64, f"{summa}")
    check(summa.defaults() == {"n": 4096, "chunk": 256, "gx": None, "gy": None}, f"defaults {summa.defaults()}")
    test_summa(summa)
    test_matvec(matvec)
    test_spmv(spmv)
    test_cg(cg)
    test_balanced(balanced)
    auto_rt = os.path.join(top_srcdir, "tests", "e2e", "programs", "auto_runtime.dtl")
    test_auto(distal.compile(auto_rt, options=["--auto"]), distal.compile(auto_rt))
    test_compile_errors()
    total = comm.allreduce(failures)
    if rank == 0:
        print(f"{'PASS' if total == 0 else 'FAIL'} python package at {size} ranks ({total} failures)", flush=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
