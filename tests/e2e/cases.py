"""cases.py -- the table of end-to-end cases run by run_e2e.py.

examples(long) covers every program in examples/ at 1, 2, 3, 4, 6 and 8 ranks where its
machine allows, at sizes that divide evenly over the grid and sizes that do not;
programs(long) covers tests/e2e/programs/, plus runs that must fail cleanly and runs
that check --fill (precompute_programs: the programs with precompute, and precompute
that distalc must reject; sparse_programs: the programs with sparse tensors, and programs
that distalc must reject); gpu(long) covers tests/gpu/programs/ (gpu machines and GPU units,
compiled for the CUDA target).  The default is sized for `make check`; --long adds sizes
and rank counts.
"""

import os

import numpy as np

import dtl
import sparse
from run_e2e import TOP_SRCDIR, Run, grid_fit

RANKS = [1, 2, 3, 4, 6, 8]


def _expand(suite, file, param_sets, ranks, validate_at=None, grids=None, exact=False, **kw):
    """Runs of file for every param set at every rank count that fits its machine.
    grids: rank count -> grid params to pass explicitly (else worked out by grid_fit).
    The run at validate_at (default: the middle rank count that fits) adds --validate.
    kw: more arguments of every Run (inputs, monitor, args)."""
    prog = dtl.parse_file(os.path.join(TOP_SRCDIR, file))
    runs = []
    for params in param_sets:
        values = prog.param_values(params)
        fitting = [p for p in ranks if (grids and p in grids) or grid_fit(prog, p, values) is not None]
        vat = validate_at if validate_at is not None else (fitting[len(fitting) // 2] if fitting else None)
        for p in fitting:
            grid = grids.get(p) if grids else None
            runs.append(Run(suite, file, p, params, grid=grid, validate=(p == vat), exact=exact, **kw))
    return runs


def examples(long=False):
    ex = lambda name: "examples/" + name  # noqa: E731
    ranks = RANKS
    runs = []

    def add(name, param_sets, **kw):
        runs.extend(_expand("examples", ex(name), param_sets, ranks, **kw))

    add("cannon.dtl", [{"n": 12}, {"n": 13}] + ([{"n": 17}, {"n": 3}] if long else []))
    add("pumma.dtl", [{"n": 12}, {"n": 13}] + ([{"n": 17}, {"n": 3}] if long else []))
    add("summa.dtl", [{"n": 12, "chunk": 4}, {"n": 13, "chunk": 5}]
        + ([{"n": 16, "chunk": 16}, {"n": 11, "chunk": 1}, {"n": 5, "chunk": 7}] if long else []))
    add("johnson.dtl", [{"n": 12}, {"n": 13}] + ([{"n": 4}, {"n": 17}] if long else []))
    add("solomonik.dtl", [{"n": 12, "r": 1}, {"n": 13, "r": 2}]
        + ([{"n": 16, "r": 4}, {"n": 9, "r": 3}] if long else []))
    add("cosma.dtl", [{"ni": 12, "nj": 8, "nk": 16, "steps": 2},
                      {"ni": 13, "nj": 7, "nk": 11, "steps": 3}]
        + ([{"ni": 5, "nj": 17, "nk": 9, "steps": 1}, {"ni": 16, "nj": 16, "nk": 16, "steps": 4}]
           if long else []))
    add("ttv.dtl", [{"n": 8, "m": 6, "p": 4}, {"n": 7, "m": 5, "p": 3}]
        + ([{"n": 13, "m": 1, "p": 9}] if long else []))
    add("innerprod.dtl", [{"n": 6, "m": 4, "p": 8}, {"n": 5, "m": 7, "p": 3}]
        + ([{"n": 1, "m": 9, "p": 13}] if long else []))
    add("ttm.dtl", [{"n": 8, "m": 4, "p": 6, "q": 5}, {"n": 7, "m": 3, "p": 5, "q": 4}]
        + ([{"n": 13, "m": 2, "p": 9, "q": 1}] if long else []))
    add("mttkrp.dtl", [{"n": 8, "m": 6, "p": 4, "r": 5}, {"n": 7, "m": 5, "p": 9, "r": 3}]
        + ([{"n": 11, "m": 13, "p": 2, "r": 6}] if long else []))
    # grids given explicitly: the other shapes of COSMA's and Solomonik's grids
    runs.append(Run("examples", ex("cosma.dtl"), 8, {"ni": 13, "nj": 9, "nk": 17, "steps": 2},
                    grid={"gx": 1, "gy": 2, "gz": 4}, validate=True))
    runs.append(Run("examples", ex("cosma.dtl"), 4, {"ni": 10, "nj": 6, "nk": 7, "steps": 3},
                    grid={"gx": 1, "gy": 1, "gz": 4}))
    runs.append(Run("examples", ex("solomonik.dtl"), 4, {"n": 12, "r": 2}, grid={"q": 2, "c": 1}))
    if long:
        runs.append(Run("examples", ex("cosma.dtl"), 6, {"ni": 13, "nj": 9, "nk": 17, "steps": 5},
                        grid={"gx": 3, "gy": 1, "gz": 2}))
        runs.append(Run("examples", ex("solomonik.dtl"), 2, {"n": 12, "r": 1}, grid={"q": 1, "c": 2}))
        runs.append(Run("examples", ex("cannon.dtl"), 6, {"n": 14}, grid={"gx": 2, "gy": 3}))
        runs.append(Run("examples", ex("ttm.dtl"), 8, {"n": 5, "m": 4, "p": 3, "q": 2}))
    # a rank count that does not fit the machine is a clean error, not a hang
    runs.append(Run("examples", ex("johnson.dtl"), 2, {"n": 8}, error="ranks"))
    runs.extend(solver_examples(long))
    return runs


# ---- the applications with temporaries, floating params and loops -------------------------


def _blackscholes_inputs(values, rng):
    """Spot prices and strikes in [20, 120), times to expiry in [0.05, 2) years."""
    n = values["n"]
    return {"S": rng.uniform(20, 120, n), "K": rng.uniform(20, 120, n), "T": rng.uniform(0.05, 2, n)}


def _jacobi_inputs(values, rng):
    """R: random, zero on the diagonal; d: a diagonal 2 to 3 times the sum of |R| along
    its row, of either sign (so that A = D + R is strictly diagonally dominant and the
    iteration contracts by 1/2 or more each step)."""
    n = values["n"]
    r = rng.uniform(-1, 1, (n, n))
    np.fill_diagonal(r, 0)
    d = (np.abs(r).sum(axis=1) * rng.uniform(2, 3, n) + 0.5) * rng.choice([-1, 1], n)
    return {"R": r, "d": d}


def _spd_inputs(values, rng):
    """A: sparse, symmetric, its diagonal larger than the sum of the |entries| of its row
    (positive definite, well conditioned: conjugate gradient converges in a few dozen
    iterations at the sizes tested)."""
    n = values["n"]
    a = sparse.random_sparse((n, n), np.float64, rng, density=0.3, symmetry="symmetric")
    np.fill_diagonal(a, 0)
    np.fill_diagonal(a, np.abs(a).sum(axis=1) + rng.uniform(0.5, 1.5, n))
    return {"A": a}


def _dominant_inputs(values, rng):
    """A: sparse, nonsymmetric, strictly diagonally dominant with a positive diagonal (its
    eigenvalues in the right half-plane): BiCGSTAB converges on it smoothly, so rounding
    cannot change the iteration count.  (With diagonal entries of either sign it may
    converge erratically, and a change in the last bit of b changes the iterates.)"""
    n = values["n"]
    a = sparse.random_sparse((n, n), np.float64, rng, density=0.3)
    np.fill_diagonal(a, 0)
    np.fill_diagonal(a, np.abs(a).sum(axis=1) * rng.uniform(1.5, 2.5, n) + rng.uniform(0.5, 1, n))
    return {"A": a}


def _cancel_inputs(values, rng):
    """A: 1e9 times the identity plus entries in [-1, 1] (validate_chain.dtl: u = A x nearly
    equals 1e9 x, and w = u - 1e9 x keeps only the small entries' part)."""
    n = values["n"]
    return {"A": 1e9 * np.eye(n) + rng.uniform(-1, 1, (n, n))}


def _int_div_inputs(values, rng):
    """int_div.dtl: divisors with zeros and -1s, dividends with the types' most negative values."""
    n = values["n"]
    pick = lambda choices: rng.choice(choices, n)  # noqa: E731
    return {"a": pick(np.array([np.iinfo(np.int64).min, -9, 0, 5, 12], dtype=np.int64)),
            "b": pick(np.array([0, -1, 2, -3], dtype=np.int64)),
            "c": pick(np.array([np.iinfo(np.int32).min, -8, 3, 100], dtype=np.int32)),
            "d": pick(np.array([0, -1, 3, -2], dtype=np.int32))}


def solver_examples(long=False):
    """examples/blackscholes.dtl, jacobi.dtl, cg.dtl and bicgstab.dtl on inputs they work
    on (positive prices, a diagonally dominant or a symmetric positive definite matrix):
    the results, and for the iterative methods the iteration count (iterations=K) against
    the oracle's, which runs the same loop in NumPy; one run of each with --monitor, runs
    where maxit ends the loop before the condition does, and floating params given on the
    command line.  Few rank counts each (--long: all of them)."""
    ex = lambda name: "examples/" + name  # noqa: E731
    runs = []

    def add(name, sets, **kw):
        for params, rk in sets:
            runs.extend(_expand("examples", ex(name), [params], RANKS if long else rk, **kw))

    add("blackscholes.dtl", [({"n": 13}, [1, 3]), ({"n": 16, "rate": 0.05, "vol": 0.45}, [4])],
        inputs=_blackscholes_inputs)
    add("jacobi.dtl", [({"n": 12, "maxit": 60}, [1, 4]), ({"n": 11, "maxit": 5}, [2])], inputs=_jacobi_inputs)
    add("jacobi.dtl", [({"n": 10, "maxit": 60, "tol": 1e-20}, [3])], inputs=_jacobi_inputs, monitor=True)
    # the solutions norm-wise (see Run), to 1e-8 of the largest |x|: the compiled iterates and
    # NumPy's differ by rounding only (the iteration count is checked on its own)
    kw = {"norm_tol": 1e-8}
    add("cg.dtl", [({"n": 12}, [1, 4]), ({"n": 14, "maxit": 3}, [2])], inputs=_spd_inputs, **kw)
    add("cg.dtl", [({"n": 11, "tol": 1e-8}, [3])], inputs=_spd_inputs, monitor=True, **kw)
    add("bicgstab.dtl", [({"n": 12}, [1, 4])], inputs=_dominant_inputs, **kw)
    add("bicgstab.dtl", [({"n": 15, "tol": 1e-7}, [3])], inputs=_dominant_inputs, monitor=True, **kw)
    add("bicgstab.dtl", [({"n": 13, "maxit": 2}, [2])], inputs=_dominant_inputs, args=["--json"], **kw)
    # repetitions: x, which += updates, is reset before each one
    runs.append(Run("examples", ex("cg.dtl"), 3, {"n": 10}, inputs=_spd_inputs,
                    args=["--iters", "2", "--warmup", "1"], **kw))
    # each statement compiled alone (--no-fuse): the same results
    runs.append(Run("examples", ex("blackscholes.dtl"), 3, {"n": 11}, inputs=_blackscholes_inputs,
                    compile_args=["--no-fuse"]))
    runs.append(Run("examples", ex("cg.dtl"), 2, {"n": 9}, inputs=_spd_inputs, compile_args=["--no-fuse"],
                    monitor=True, **kw))
    return runs


def programs(long=False):
    pr = lambda name: "tests/e2e/programs/" + name  # noqa: E731
    ranks = [1, 2, 3, 4] + ([5, 6, 8] if long else [])
    runs = []

    def add(name, param_sets, long_sets=(), rk=None, **kw):
        sets = list(param_sets) + (list(long_sets) if long else [])
        runs.extend(_expand("programs", pr(name), sets, rk or ranks, **kw))

    add("running.dtl", [{"n": 8}, {"n": 13}], [{"n": 1}, {"n": 3}])
    add("matvec.dtl", [{"n": 10, "m": 7}], [{"n": 3, "m": 16}])
    add("matvec2d.dtl", [{"n": 11, "m": 9}], [{"n": 16, "m": 4}])
    add("transpose.dtl", [{"n": 9, "m": 6}], [{"n": 4, "m": 13}])
    add("elementwise.dtl", [{"n": 7, "m": 5}], [{"n": 16, "m": 2}])
    add("elementwise_int.dtl", [{"n": 6, "m": 7}], [{"n": 13, "m": 3}])
    add("ttv.dtl", [{"n": 5, "m": 6, "p": 7}], [{"n": 8, "m": 8, "p": 8}])
    add("innerprod.dtl", [{"n": 6, "m": 5, "p": 4}], [{"n": 9, "m": 1, "p": 7}])
    add("ttm.dtl", [{"n": 6, "m": 4, "p": 5, "q": 7}], [{"n": 8, "m": 2, "p": 3, "q": 9}])
    add("mttkrp.dtl", [{"n": 6, "m": 5, "p": 4, "r": 3}], [{"n": 9, "m": 8, "p": 3, "r": 5}])
    add("contract4.dtl", [{"n": 4, "m": 5, "p": 3, "q": 2}], [{"n": 7, "m": 3, "p": 4, "q": 3}])
    add("layout.dtl", [{"n": 7, "m": 8, "p": 5}], [{"n": 12, "m": 3, "p": 9}])
    add("grid3d.dtl", [{"n": 6, "m": 5, "p": 7}], [{"n": 8, "m": 8, "p": 8}])
    add("fuse.dtl", [{"n": 7, "m": 6}], [{"n": 5, "m": 11}])
    add("nodist.dtl", [{"n": 5, "m": 6, "p": 4}], [{"n": 9, "m": 2, "p": 7}])
    add("accumulate.dtl", [{"n": 6, "m": 5, "p": 4, "chunk": 3}], [{"n": 11, "m": 7, "p": 9, "chunk": 2}])
    add("multi.dtl", [{"n": 8, "chunk": 3}], [{"n": 13, "chunk": 5}])
    add("types.dtl", [{"n": 7, "chunk": 2}], [{"n": 12, "chunk": 5}])
    add("mixed_types.dtl", [{"n": 13}], [{"n": 5}])
    # integer division by zero and of the most negative value by -1: defined, at every rank count
    add("int_div.dtl", [{"n": 10}, {"n": 13}], [{"n": 3}], inputs=_int_div_inputs)
    # --validate's tolerance for results computed from other results (every run validated)
    for p in ([1, 2, 3, 4, 6, 8] if long else [1, 2, 3]):
        runs.extend(_expand("programs", pr("validate_chain.dtl"), [{"n": 9}, {"n": 14}], [p], validate_at=p,
                            inputs=_cancel_inputs))
    # loop conditions with C's arithmetic (integer operations in int64)
    add("cond_int.dtl", [{"k": 1, "n": 6}, {"k": 2, "n": 9}], rk=[1, 2, 3], monitor=True)
    # a loop's first statement divides integers: not fused across the back edge (no trap)
    add("backedge_intdiv.dtl", [{"n": 4}, {"n": 11}], rk=[1, 2, 3, 4, 6])
    # ... with values whose int32 products wrap (--fill index: up to 999): the statement's type computes
    runs.extend(_expand("programs", pr("mixed_types.dtl"), [{"n": 50000}], [1, 3], fill_args=["--fill", "index"]))
    # the rewrite jam: four rows' sums at once, the rows left over (n below and above 4 per rank)
    add("jam.dtl", [{"n": 9, "m": 7, "p": 6}, {"n": 3, "m": 5, "p": 2}], [{"n": 17, "m": 4, "p": 3}, {"n": 1, "m": 9, "p": 1}])
    # a term without the summed variable counts once, wherever + and - place it
    add("sum_terms.dtl", [{"n": 7, "m": 5, "p": 3}, {"n": 2, "m": 9, "p": 1}], [{"n": 13, "m": 1, "p": 4}])
    add("scalars.dtl", [{"n": 6, "m": 5}], [{"n": 11, "m": 3}])
    add("replicated.dtl", [{"n": 7, "m": 6, "p": 5}], [{"n": 4, "m": 9, "p": 12}])
    add("communicate.dtl", [{"n": 6, "m": 5, "p": 7, "chunk": 3}], [{"n": 9, "m": 8, "p": 4, "chunk": 2}])
    add("schedules.dtl", [{"n": 9, "m": 8, "p": 6, "chunk": 4}], [{"n": 5, "m": 12, "p": 7, "chunk": 3}])
    add("partial_dist.dtl", [{"n": 7, "m": 5}], [{"n": 12, "m": 4}])
    add("nested.dtl", [{"n": 6, "m": 7, "p": 8}], [{"n": 9, "m": 4, "p": 3}])
    add("literal_grid.dtl", [{"n": 7}], [{"n": 12}], rk=[2, 4, 6, 8] if long else [2, 4])
    add("required.dtl", [{"n": 5}])
    add("kernels.dtl", [{"n": 6, "m": 5, "p": 4, "r": 3}], [{"n": 9, "m": 2, "p": 7, "r": 5}])
    # scaled products: a number, a param, a sign, a division, -=, scalar tensors (the copy of
    # the smallest factor scaled, or a scalar output's sum), integers
    add("kernels_scaled.dtl", [{"n": 6, "m": 5, "p": 4, "r": 3}, {"n": 9, "m": 2, "p": 7, "r": 5},
                               {"n": 1, "m": 8, "p": 3, "r": 2}], rk=[1, 2, 3, 4, 6, 8])
    add("kernel_layouts.dtl", [{"n": 6, "m": 5, "p": 4, "r": 3, "q": 2}],
        [{"n": 9, "m": 2, "p": 7, "r": 5, "q": 3}])
    add("literals.dtl", [{"n": 5}], [{"n": 9}], exact=True)
    add("owner_default.dtl", [{"n": 7, "m": 5}], [{"n": 12, "m": 3}, {"n": 2, "m": 9}])
    add("owner_hier.dtl", [{"n": 10, "m": 6}], [{"n": 5, "m": 13}])
    add("chosen_layout.dtl", [{"n": 7, "m": 5}], [{"n": 12, "m": 3}])
    add("fusion_program.dtl", [{"n": 13, "m": 7}], [{"n": 5, "m": 11}])
    add("fetch_merge.dtl", [{"n": 10, "m": 7, "it": 3}], [{"n": 5, "m": 12, "it": 2}])
    add("fetch_merge2d.dtl", [{"n": 10, "m": 7}], [{"n": 5, "m": 13}])
    add("redistribute.dtl", [{"n": 10, "m": 7}], [{"n": 13, "m": 4}])
    add("invariant.dtl", [{"n": 10, "it": 4}, {"n": 4, "it": 1}], [{"n": 13, "it": 3}])
    add("sparse_invariant.dtl", [{"n": 10, "it": 4}, {"n": 4, "it": 1}], [{"n": 13, "it": 3}])
    add("invariant_chain.dtl", [{"n": 10, "it": 3}, {"n": 7, "it": 1}], [{"n": 2, "it": 2}])
    add("strips.dtl", [{"n": 21, "q": 19, "r": 5}, {"n": 9, "q": 8, "r": 1}, {"n": 17, "q": 16, "r": 3}],
        [{"n": 30, "q": 33, "r": 16}])
    runs.extend(precompute_programs(long))
    runs.extend(sparse_programs(long))
    runs.extend(function_programs(long))
    runs.extend(loop_programs(long))
    # literals that do not fit: located errors (README, "Choices")
    for name, line, text in _LITERAL_REJECTED:
        runs.append(Run("programs", "literal_%s.dtl" % name, None, compile_error=[line], source=text))
    # runs that must fail cleanly: one message, a nonzero exit, no hang
    runs.append(Run("programs", pr("fusion_program.dtl"), 3, {"n": 9, "m": 4}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("fetch_merge.dtl"), 3, {"n": 9, "m": 4, "it": 2}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("fetch_merge2d.dtl"), 4, {"n": 9, "m": 5}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("redistribute.dtl"), 6, {"n": 9, "m": 5}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("invariant.dtl"), 4, {"n": 11, "it": 3}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("sparse_invariant.dtl"), 3, {"n": 11, "it": 3}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("invariant_chain.dtl"), 3, {"n": 11, "it": 3}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("literal_grid.dtl"), 3, {"n": 7}, error="ranks"))
    runs.append(Run("programs", pr("required.dtl"), 2, {}, error="param"))
    runs.append(Run("programs", pr("matvec.dtl"), 2, {"n": 10, "m": 7}, error="shape"))
    runs.append(Run("programs", pr("matvec.dtl"), 2, {"n": 10, "m": 7}, error="dtype"))
    runs.append(Run("programs", pr("matvec.dtl"), 2, {"n": 10, "m": 7}, error="option"))
    # --fill random --seed: the same tensors at any rank count
    runs.append(Run("programs", pr("multi.dtl"), None, {"n": 9, "chunk": 4}, fill_ranks=[1, 4]))
    if long:
        runs.append(Run("programs", pr("grid3d.dtl"), None, {"n": 7, "m": 6, "p": 5},
                        fill_ranks=[1, 3, 8]))
    return runs


# Literals that distalc must reject, as (name, the line of the error, the program).
_LITERAL_HEAD = """param n = 4;
machine M = grid(g);
tensor B(n) int64 @ M(i -> i);
tensor I(n) int64 @ M(i -> i);
tensor J(n) int32 @ M(i -> i);
tensor F(n) float @ M(i -> i);
"""
_LITERAL_REJECTED = [
    ("int64_max_plus_1", 7, _LITERAL_HEAD + "I(i) = B(i) + 9223372036854775808;\n"),
    ("int64_huge", 7, _LITERAL_HEAD + "I(i) = B(i) * 99999999999999999999;\n"),
    ("int64_min_parens", 7, _LITERAL_HEAD + "I(i) = -(9223372036854775808);\n"),
    ("int32_too_large", 8, _LITERAL_HEAD + "I(i) = B(i);\nJ(i) = 2147483648 + B(i);\n"),
    ("int32_min", 7, _LITERAL_HEAD + "J(i) = -2147483648;\n"),
    ("int32_float", 7, _LITERAL_HEAD + "J(i) = B(i) * 3e9;\n"),
    ("int64_float", 7, _LITERAL_HEAD + "I(i) = 1e19;\n"),
    ("float_overflow", 7, _LITERAL_HEAD + "F(i) = B(i) * 3.5e38;\n"),
    ("double_overflow", 7, _LITERAL_HEAD + "I(i) = B(i) * 1e309;\n"),
    ("split_factor", 8, _LITERAL_HEAD + "I(i) = B(i)\n  .split(i, io, ii, 9223372036854775808);\n"),
    ("shape", 1, "tensor T(9223372036854775808);\n"),
    ("param_default", 1, "param n = 9223372036854775808;\n"),
    ("grid_dim", 1, "machine M = grid(9223372036854775808, 2);\n"),
    ("fixed_coordinate", 2, "machine M = grid(g, h);\ntensor T(4) @ M(x -> x, 9223372036854775808);\n"),
    # an integer division by a literal 0 (or one that truncates to 0)
    ("int_div_zero", 7, _LITERAL_HEAD + "J(i) = 1 / 0;\n"),
    ("int_div_zero_float", 7, _LITERAL_HEAD + "I(i) = B(i) / -(0.5);\n"),
    # ... or by literals that make 0
    ("int_div_zero_expr", 7, _LITERAL_HEAD + "J(i) = B(i) / (2 * 3 - 6);\n"),
    # ... literals that make 0 by an integer division or abs, min, max of literals
    ("int_div_zero_quotient", 7, _LITERAL_HEAD + "J(i) = B(i) / (1 / 2);\n"),
    ("int_div_zero_min", 7, _LITERAL_HEAD + "J(i) = B(i) / min(0, 1);\n"),
    ("int_div_zero_abs", 7, _LITERAL_HEAD + "I(i) = B(i) / abs(-0);\n"),
    # ... in a loop's condition whose operands are integers (an int64 division)
    ("cond_div_zero", 3, "tensor c int64;\nc = 0;\nrepeat 3 until (c / -0 > 1) {\n  c = c + 1;\n}\n"),
    ("cond_div_zero_expr", 3, "tensor c int64;\nc = 0;\nrepeat 3 until (c / (2 - 2) > 1) {\n  c = c + 1;\n}\n"),
    ("cond_div_zero_quotient", 3, "tensor c int64;\nc = 0;\nrepeat 3 until (c / (3 / 4) > 1) {\n  c = c + 1;\n}\n"),
    # a temporary written only in a loop that never runs is unwritten after it
    ("temp_repeat0", 8, "param n = 4;\nmachine M = grid(g);\ntensor x(n) @ M(i -> i);\ntemp s;\nrepeat 0 {\n  s = 1;\n}\n"
                        "x(i) = s;\n"),
]


# Element-wise functions, -= and params as values: each program at two sizes that do not
# divide the grids, whose rank counts together are 1, 2, 3, 4, 6 and 8 (every count at both
# sizes with --long).
_FUNCTION_PROGRAMS = [
    ("functions.dtl", [({"n": 7, "m": 5, "k": 3}, [1, 3, 4, 8]), ({"n": 5, "m": 9, "k": 2}, [2, 6])]),
    ("functions_int.dtl", [({"n": 6, "m": 7, "k": 3}, [2, 3, 6]), ({"n": 9, "m": 5, "k": 4}, [1, 4, 8])]),
    ("minus_assign.dtl", [({"n": 9, "m": 7, "chunk": 3}, [1, 2, 6, 8]),
                          ({"n": 5, "m": 11, "chunk": 2}, [3, 4])]),
    ("param_values.dtl", [({"n": 7, "m": 5, "scale": 3, "offset": 2}, [2, 4, 8]),
                          ({"n": 10, "m": 3, "scale": 7, "offset": 5}, [1, 3, 6])]),
    ("sparse_functions.dtl", [({"n": 11, "m": 9}, [1, 4, 6]), ({"n": 7, "m": 13}, [2, 3, 8])]),
    ("sparse_split_once.dtl", [({"n": 10, "m": 11, "p": 5}, [1, 3, 8]), ({"n": 7, "m": 5, "p": 3}, [2, 4, 6])]),
]
_FUNCTION_HEAD = """param n = 4;
machine M = grid(g);
tensor D(n) @ M(i -> i);
tensor I(n) int32 @ M(i -> i);
tensor L(n) int64 @ M(i -> i);
"""
# Programs that distalc must reject, as (name, the line of the error, the program).
_FUNCTION_REJECTED = [
    ("int32_sqrt", 6, _FUNCTION_HEAD + "I(i) = abs(I(i)) + sqrt(I(i));\n"),
    ("int64_exp", 7, _FUNCTION_HEAD + "L(i) = L(i);\nL(i) = min(L(i), exp(D(i)));\n"),
    ("int64_log", 6, _FUNCTION_HEAD + "L(i) -= log(D(i));\n"),
    ("int32_erf", 6, _FUNCTION_HEAD + "I(i) = erf(D(i));\n"),
    ("int32_pow", 6, _FUNCTION_HEAD + "I(i) = pow(I(i), 2);\n"),
    ("too_few", 7, _FUNCTION_HEAD + "D(i) = D(i) *\n  pow(D(i));\n"),
    ("too_many", 6, _FUNCTION_HEAD + "D(i) = sqrt(D(i), 2);\n"),
    ("min_one", 6, _FUNCTION_HEAD + "I(i) = min(I(i));\n"),
    ("no_args", 6, _FUNCTION_HEAD + "D(i) = exp();\n"),
    ("float_param_shape", 3, "param n = 4;\nparam tol = 1e-8;\ntensor D(tol);\nD(i) = D(i) * 2;\n"),
    ("float_param_int", 4, "param n = 4;\nparam tol = 1e-8;\ntensor I(n) int32;\nI(i) = I(i) * tol;\n"),
    ("tensor_later", 3, "param n = 4;\ntensor D(n);\nD(i) = exp(i);\ntensor exp(n);\n"),
    ("param_parens", 4, "param n = 4;\nparam k = 2;\ntensor D(n);\nD(i) = D(i) * k();\n"),
    ("unknown", 6, _FUNCTION_HEAD + "D(i) = sqr(D(i) + 1);\n"),
]


def function_programs(long=False):
    """tests/e2e/programs/functions*.dtl, minus_assign.dtl, param_values.dtl and
    sparse_functions.dtl, sparse_split_once.dtl: element-wise functions, -= and params as values, on double,
    float, int32 and int64; and programs that distalc must reject (a function that an
    integer statement does not allow, a wrong argument count, a floating param in a shape
    or an integer statement)."""
    pr = lambda name: "tests/e2e/programs/" + name  # noqa: E731
    runs = []
    for name, sets in _FUNCTION_PROGRAMS:
        for params, rk in sets:
            runs.extend(_expand("programs", pr(name), [params], RANKS if long else rk))
    for name, line, text in _FUNCTION_REJECTED:
        runs.append(Run("programs", "function_%s.dtl" % name, None, compile_error=[line], source=text))
    return runs


# Temporaries, floating params and loops (LANGUAGE.md sections 3, 4 and 9): each program at
# two param sets, at the rank counts given (every count at both with --long); the second set
# with --monitor for the programs with loops.
_LOOP_PROGRAMS = [
    ("temps.dtl", [({"n": 7, "m": 5}, [1, 4]), ({"n": 10, "m": 3}, [6])]),
    ("temp_loop.dtl", [({"n": 9, "m": 6, "steps": 4}, [1, 3]), ({"n": 5, "m": 11, "steps": 2}, [2])]),
    ("nested_loops.dtl", [({"n": 8, "outer": 3, "inner": 5}, [1, 4]),
                          ({"n": 11, "outer": 4, "inner": 2, "tol": 0.5}, [3])]),
    # floating params at their defaults, then given (one negative, one with an exponent)
    ("float_params.dtl", [({"n": 8, "k": 3}, [1, 4]),
                          ({"n": 7, "k": 2, "alpha": -0.75, "beta": 3e-2, "gamma": 0.5, "tol": 1e-4}, [6])]),
    ("conditions.dtl", [({"n": 10}, [1, 3]), ({"n": 9, "k": 5, "lo": 10.0, "hi": 100.0}, [2])]),
    # fusion across the back edge (also a loop of one iteration)
    ("backedge.dtl", [({"n": 10, "it": 4}, [1, 3, 8]), ({"n": 13, "it": 2}, [2]), ({"n": 7, "it": 1}, [4, 6])]),
]
# The declarations of the rejected programs below (ten lines).
_LOOP_HEAD = """param n = 4;
param maxit = 3;
param tol = 1e-8;
machine M = grid(g);
tensor x(n) @ M(i -> i);
tensor y(n) @ M(i -> i);
tensor s;
tensor I(n) int32 @ M(i -> i);
temp t(n) @ M(i -> i);
temp a;
"""
# Programs that distalc must reject, as (name, the line of the error, the program): a
# temporary read before a statement wrote it, a floating param where only integers may be,
# a condition over a non-scalar, a bad repeat bound.
_LOOP_REJECTED = [
    ("temp_read_first", 11, _LOOP_HEAD + "y(i) = t(i) + x(i);\n"),
    ("temp_scalar_read_first", 12, _LOOP_HEAD + "y(i) = x(i);\ns = a * 2;\n"),
    ("temp_accumulate_first", 11, _LOOP_HEAD + "t(i) += x(i);\ny(i) = t(i);\n"),
    ("temp_subtract_first", 11, _LOOP_HEAD + "a -= x(i);\ns = a;\n"),
    ("temp_reads_itself_first", 11, _LOOP_HEAD + "t(i) = x(i) + t(i);\ny(i) = t(i);\n"),
    ("temp_read_in_loop_before_write", 12,
     _LOOP_HEAD + "repeat maxit {\n  y(i) = t(i) * 2;\n  t(i) = x(i) + y(i);\n}\n"),
    ("temp_read_in_nested_loop", 13, _LOOP_HEAD
     + "repeat maxit {\n  repeat 2 {\n    s = a + s;\n  }\n  a = s * 2;\n}\n"),
    ("temp_in_condition", 11, _LOOP_HEAD + "repeat maxit until (a < tol) {\n  y(i) = x(i);\n}\n"),
    ("float_param_shape", 4, "param n = 4;\nparam h = 0.5;\nmachine M = grid(g);\ntensor x(h) @ M(i -> i);\n"),
    ("float_param_shape_temp", 4, "param n = 4;\nparam h = 0.5;\ntensor x(n);\ntemp t(n, h);\n"),
    ("float_param_grid", 2, "param h = 2.0;\nmachine M = grid(h);\ntensor x(4) @ M(i -> i);\n"),
    ("float_param_split", 12, _LOOP_HEAD + "y(i) = x(i)\n  .split(i, io, ii, tol);\n"),
    ("float_param_divide", 12, _LOOP_HEAD + "y(i) = x(i)\n  .divide(i, io, ii, tol);\n"),
    ("float_param_repeat", 11, _LOOP_HEAD + "repeat tol {\n  y(i) = x(i);\n}\n"),
    ("float_param_int_statement", 11, _LOOP_HEAD + "I(i) = I(i) * tol;\n"),
    ("float_param_int_statement_in_loop", 12, _LOOP_HEAD + "repeat maxit {\n  I(i) += tol;\n}\n"),
    ("condition_vector", 11, _LOOP_HEAD + "repeat maxit until (x < tol) {\n  y(i) = x(i);\n}\n"),
    ("condition_access", 11, _LOOP_HEAD + "repeat maxit until (x(i) < tol) {\n  y(i) = x(i);\n}\n"),
    ("condition_no_comparison", 11, _LOOP_HEAD + "repeat maxit until (s + 1) {\n  s = s / 2;\n}\n"),
    ("repeat_float_literal", 11, _LOOP_HEAD + "repeat 2.5 {\n  y(i) = x(i);\n}\n"),
    ("repeat_negative", 11, _LOOP_HEAD + "repeat -1 {\n  y(i) = x(i);\n}\n"),
    ("repeat_scalar_tensor", 11, _LOOP_HEAD + "repeat s {\n  y(i) = x(i);\n}\n"),
    ("repeat_expression", 11, _LOOP_HEAD + "repeat maxit * 2 {\n  y(i) = x(i);\n}\n"),
]


def loop_programs(long=False):
    """tests/e2e/programs/temps.dtl, temp_loop.dtl, nested_loops.dtl, float_params.dtl,
    conditions.dtl and backedge.dtl (sparse_temp.dtl is among the sparse programs): temporaries, floating
    params and loops, each run's iteration count against the oracle's; --monitor; runs
    that --load or --save a temporary (a clean failure); and programs that distalc must
    reject."""
    pr = lambda name: "tests/e2e/programs/" + name  # noqa: E731
    runs = []
    for name, sets in _LOOP_PROGRAMS:
        for k, (params, rk) in enumerate(sets):
            runs.extend(_expand("programs", pr(name), [params], RANKS if long else rk,
                                monitor=k == 1 and name != "temps.dtl"))
    runs.append(Run("programs", pr("backedge.dtl"), 3, {"n": 11, "it": 3}, compile_args=["--no-fuse"]))
    runs.append(Run("programs", pr("temps.dtl"), 2, {"n": 5, "m": 4}, error="load-temp"))
    runs.append(Run("programs", pr("temp_loop.dtl"), 3, {"n": 6, "m": 4}, error="save-temp"))
    for name, line, text in _LOOP_REJECTED:
        runs.append(Run("programs", "loop_%s.dtl" % name, None, compile_error=[line], source=text))
    return runs


# Programs that distalc must reject: precompute against its rules, as (name, the line
# of the error, the program).
# a command on the workspace's loop (only the consumer's loops may be scheduled), on line 10;
# parallelize's says precompute's rule at the parallelize, whatever the race strategy
_SCHEDULED_WORKSPACE = """# %s of the workspace's loop
param n = 7;
machine M = grid(g);
tensor B(n, n) @ M(ij -> i);
tensor x(n);
tensor y(n) @ M(i -> i);
y(i) = B(i, k) * (x(k) * 2)
  .distribute({i}, {io}, {ii}, M)
  .precompute(x(k) * 2, k, kw, w)
  .%s;
"""
_PRECOMPUTE_REJECTED = [(name, 10, _SCHEDULED_WORKSPACE % (cmd, cmd)) for name, cmd in (
    ("scheduled_workspace", "split(kw, kwo, kwi, 2)"),
    ("parallel_workspace_atomics", "parallelize(kw, cpu_thread, atomics)"),
    ("parallel_workspace_no_races", "parallelize(kw, cpu_thread, no_races)"))] + [
    ("above_communicate", 11, """# the workspace's loop would enclose the communicate point of B
param n = 7;
machine M = grid(gx, gy);
tensor B(n, n) @ M(ij -> ij);
tensor C(n, n) @ M(ij -> ij);
tensor D(n, n) @ M(ij -> *j);
tensor A(n, n) @ M(ij -> ij);
A(i, j) = B(i, k) * (C(k, j) + D(k, j))
  .distribute({i, j}, {io, jo}, {ii, ji}, M)
  .communicate(B, k)
  .precompute(C(k, j) + D(k, j), k, kw, w);
"""),
    ("sparse", 9, """# a workspace of a sparse expression
param n = 7;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor x(n);
tensor y(n) @ M(i -> i);
y(i) = A(i, j) * x(j) + 1
  .distribute({i}, {io}, {ii}, M)
  .precompute(A(i, j) * x(j), j, jw, w);
"""),
    ("replaced_loop", 9, """# precompute over a loop that split replaced
param n = 7;
machine M = grid(g);
tensor B(n, n) @ M(ij -> i);
tensor x(n);
tensor y(n) @ M(i -> i);
y(i) = B(i, k) * (x(k) * 2)
  .split(k, ko, ki, 2)
  .precompute(x(k) * 2, k, kw, w);
"""),
    ("gpu", 9, """# precompute on a gpu machine (the CUDA target)
param n = 7;
machine M = grid(g) : gpu;
tensor B(n, n) @ M(ij -> i);
tensor x(n);
tensor y(n) @ M(i -> i);
y(i) = B(i, k) * (x(k) * 2)
  .distribute({i}, {io}, {ii}, M)
  .precompute(x(k) * 2, k, kw, w);
"""),
]


def _first_line(path, text):
    """The number of the first line of the file that holds text."""
    with open(os.path.join(TOP_SRCDIR, path)) as f:
        return next(n for n, l in enumerate(f, 1) if text in l.split("#")[0])


def precompute_programs(long=False):
    """tests/e2e/programs/precompute*.dtl: workspaces computed before their consumer's
    loops, with the schedule around them; each program at two sizes whose rank counts
    together are 1, 2, 3, 4, 6 and 8 (every count at both sizes with --long).  Programs
    that break precompute's rules, and precompute for --target cuda, must be rejected
    with the error on the right line.  (sparse_precompute.dtl is among the sparse
    programs.)"""
    pr = lambda name: "tests/e2e/programs/" + name  # noqa: E731
    runs = []

    def add(name, sets):
        for params, rk in sets:
            runs.extend(_expand("programs", pr(name), [params], RANKS if long else rk))

    add("precompute.dtl", [({"n": 9, "m": 5, "p": 3, "chunk": 2}, [1, 3, 4, 8]),
                           ({"n": 4, "m": 7, "p": 6, "chunk": 4}, [2, 6])])
    add("precompute2d.dtl", [({"n": 9, "m": 5, "p": 3, "q": 2, "chunk": 2}, [2, 6, 8]),
                             ({"n": 5, "m": 7, "p": 4, "q": 3, "chunk": 3}, [1, 3, 4])])
    for name, line, text in _PRECOMPUTE_REJECTED:
        runs.append(Run("programs", "precompute_%s.dtl" % name, None, compile_error=[line],
                        source=text))
    for name in ("precompute.dtl", "precompute2d.dtl"):
        runs.append(Run("programs", pr(name), None, compile_args=["--target", "cuda"],
                        compile_error=[_first_line(pr(name), ".precompute(")]))
    return runs


# Rank counts of the sparse programs: each program runs at one of these sets (in turn),
# so that together they cover 1, 2, 3, 4, 6 and 8 ranks; --long runs every program at all.
SPARSE_RANKS = ([1, 4, 6], [2, 3, 8])

# Small programs that write sparse tensors, run end to end: a CSR matrix from a dense
# one with `=` and with `+=` (whose initial entries come from its file), and a
# replicated sparse vector.
_WRITES_SPARSE = """# a sparse result written from a dense input
param n = 7;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor B(n, n) @ M(ij -> i);
tensor y(n);
y(i) = B(i, j) * B(j, i);
A(i, j) %s B(i, j)
  .distribute(i);
"""
_WRITES_SPARSE_VECTOR = """# a sparse vector result, replicated on every rank
param n = 7;
tensor v(n) {compressed};
tensor x(n);
v(i) = x(i) * 2;
"""
# Programs that distalc must reject, as (name, the lines where the error may be, the
# program): statements with a sparse result that read it, or that run on threads or
# substitute a kernel.
_SPARSE_REJECTED = [
    ("reads_result", [6], """# a statement that reads the sparse tensor it writes
param n = 7;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor B(n, n) @ M(ij -> i);
A(i, j) = B(i, j) * A(i, j)
  .distribute(i);
"""),
    ("accumulates_result", [4], """# += that reads the sparse tensor it updates
param n = 7;
tensor v(n) {compressed};
v(i) += v(i) * 2;
"""),
    ("threads", [6, 7, 8], """# threads in a statement with a sparse result
param n = 7;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor B(n, n) @ M(ij -> i);
A(i, j) = B(i, j) * 2
  .distribute({i}, {io}, {ii}, M)
  .parallelize(ii, cpu_thread);
"""),
    ("vector", [7], """# vector lanes in a statement with a sparse result (its entries appended in order)
param n;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor W(n, n) csr @ M(ij -> i);
W(i, j) = A(i, j) * 3
  .parallelize(i, cpu_vector);
"""),
    ("vector_split", [8], """# vector lanes on the inner loop of a split, in a sparse result's statement
param n;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor W(n, n) csr @ M(ij -> i);
W(i, j) = A(i, j) * 3 + A(i, j)
  .split(j, jo, ji, 2)
  .parallelize(ji, cpu_vector, ignore_races);
"""),
    ("substitute", [7, 8, 9], """# a leaf kernel in a statement with a sparse result
param n = 7;
machine M = grid(g);
tensor G(n, n) {compressed, compressed} @ M(ij -> i);
tensor B(n, n) @ M(ij -> i);
tensor D(n, n);
G(i, j) = B(i, k) * D(k, j)
  .distribute({i}, {io}, {ii}, M)
  .substitute({ii, j, k}, gemm);
"""),
]
_GPU_SPARSE = """# sparse tensors on a gpu machine
param n = 7;
machine M = grid(g) : gpu;
tensor A(n, n) csr @ M(ij -> i);
tensor x(n);
tensor y(n) @ M(i -> i);
y(i) = A(i, j) * x(j)
  .distribute(i);
"""


def sparse_programs(long=False):
    """tests/e2e/programs/sparse_*.dtl: programs that read and write sparse tensors,
    loaded from .mtx, .tns and .npy files (sparse.py; a sparse result is saved dense and
    compared with the oracle); runs that must fail cleanly on bad files; --fill with
    --density; and programs that distalc must reject."""
    pr = lambda name: "tests/e2e/programs/" + name  # noqa: E731
    runs = []
    turn = [0]

    def add(name, param_sets, long_sets=()):
        sets = list(param_sets) + (list(long_sets) if long else [])
        rk = RANKS if long else SPARSE_RANKS[turn[0] % len(SPARSE_RANKS)]
        turn[0] += 1
        runs.extend(_expand("programs", pr(name), sets, rk))

    add("sparse_spmv.dtl", [{"n": 13, "m": 11, "chunk": 4}],
        [{"n": 7, "m": 20, "chunk": 3}, {"n": 1, "m": 6, "chunk": 2}])
    add("sparse_spmm.dtl", [{"n": 12, "m": 10, "p": 9, "chunk": 3}],
        [{"n": 17, "m": 7, "p": 5, "chunk": 4}])
    add("sparse_sddmm.dtl", [{"n": 11, "m": 9, "p": 6, "chunk": 4}],
        [{"n": 8, "m": 14, "p": 3, "chunk": 2}])
    add("sparse_elementwise.dtl", [{"n": 9, "m": 9}], [{"n": 13, "m": 6}])
    add("sparse_tensor3.dtl", [{"n": 8, "m": 7, "p": 6, "r": 3}],
        [{"n": 11, "m": 5, "p": 9, "r": 2}, {"n": 2, "m": 1, "p": 7, "r": 1}])
    add("sparse_formats.dtl", [{"n": 14, "m": 10}], [{"n": 9, "m": 9}])
    add("sparse_types.dtl", [{"n": 10, "m": 8, "p": 5}], [{"n": 7, "m": 13, "p": 4}])
    add("sparse_accumulate.dtl", [{"n": 9, "m": 8, "p": 4}], [{"n": 12, "m": 12, "p": 5}])
    add("sparse_reorder.dtl", [{"n": 10, "m": 7, "p": 5}], [{"n": 6, "m": 11, "p": 8}])
    add("sparse_schedules.dtl", [{"n": 11, "chunk": 3}], [{"n": 16, "chunk": 5}])
    add("sparse_precompute.dtl", [{"n": 10, "m": 7, "p": 4}], [{"n": 3, "m": 9, "p": 6}])
    add("owner_sparse.dtl", [{"n": 11, "m": 9}], [{"n": 6, "m": 14}])
    add("sparse_precompute.dtl", [{"n": 6, "m": 11, "p": 3}])
    add("sparse_results.dtl", [{"n": 11, "m": 9, "p": 6, "r": 3, "chunk": 3}],
        [{"n": 7, "m": 13, "p": 4, "r": 2, "chunk": 5}, {"n": 2, "m": 5, "p": 1, "r": 1, "chunk": 2}])
    add("sparse_results.dtl", [{"n": 13, "m": 10, "p": 7, "r": 2, "chunk": 4}])
    add("sparse_temp.dtl", [{"n": 11, "m": 9}], [{"n": 7, "m": 13}])
    # sparse results written at another operand's stored rows (the pass gather leaves them)
    runs.extend(_expand("programs", pr("sparse_result_rows.dtl"), [{"n": 9, "m": 7, "p": 4}, {"n": 2, "m": 5, "p": 3}],
                        [1, 2, 3, 4, 6, 8] if long else [1, 3, 4, 8]))
    runs.extend(_expand("programs", pr("sparse_result_rows.dtl"), [{"n": 11, "m": 6, "p": 5}], [1, 2, 3, 6],
                        compile_args=["--auto", "--ranks", "4"]))
    # sums of sparse operands over the union of their stored coordinates
    add("sparse_union.dtl", [{"n": 11, "m": 9, "p": 5}, {"n": 3, "m": 10, "p": 2}],
        [{"n": 7, "m": 13, "p": 3}, {"n": 2, "m": 1, "p": 4}])
    # halo exchanges (SpMV over CSR row blocks): 1 to 4 ranks along the rows, uneven sizes,
    # some ranks with one row or none; and a 2 x 2 grid (the exchange along gx, replicas along gy)
    rows = {p: {"gx": p, "gy": 1} for p in (1, 2, 3, 4)}
    runs.extend(_expand("programs", pr("sparse_halo.dtl"), [{"n": 13}, {"n": 10}, {"n": 3}], [1, 2, 3, 4],
                        grids=rows))
    runs.append(Run("programs", pr("sparse_halo.dtl"), 4, {"n": 11}, grid={"gx": 2, "gy": 2}, validate=True))
    # distalc --auto: unscheduled statements scheduled by the cost model (for the rank count
    # of the run or another: the choice never changes the results)
    runs.extend(_expand("programs", pr("auto_kernels.dtl"), [{"n": 37, "m": 29, "p": 11}], [1, 2, 3, 4, 6, 8],
                        compile_args=["--auto", "--ranks", "4"]))
    runs.extend(_expand("programs", pr("auto_kernels.dtl"), [{"n": 5, "m": 9, "p": 3}], [2, 4],
                        compile_args=["--auto", "--ranks", "4"]))
    runs.append(Run("programs", pr("auto_kernels.dtl"), 6, {"n": 13, "m": 7, "p": 17}, validate=True,
                    compile_args=["--auto", "--ranks", "6", "--mem-per-rank", "4000"]))
    # ... chosen for large sizes under a memory limit (SUMMA's panels, kernels), run small
    big = ["--set", "n=2048", "--set", "m=2048", "--set", "p=2048", "--mem-per-rank", "20000000"]
    runs.extend(_expand("programs", pr("auto_kernels.dtl"), [{"n": 300, "m": 9, "p": 260}], [1, 3, 8],
                        compile_args=["--auto", "--ranks", "4"] + big))
    # sizes known only at run time: compiled once, plan_create picks the variant for the run's
    # shape and rank count (square, tall, flat, a long summed dimension; Cannon's rotation on
    # square grids, SUMMA's panels, the summed dimension distributed)
    runs.extend(_expand("programs", pr("auto_runtime.dtl"),
                        [{"n": 23, "m": 19, "k": 17}, {"n": 130, "m": 5, "k": 7}, {"n": 4, "m": 9, "k": 300},
                         {"n": 6, "m": 140, "k": 11}], [1, 2, 3, 4, 6, 8, 9], compile_args=["--auto"]))
    # a tensor read through its transpose: the variants' cost functions take a max of two mins
    runs.extend(_expand("programs", pr("auto_transpose.dtl"), [{"n": 13}], [1, 2, 3, 4, 6, 8], compile_args=["--auto"]))
    # a fixed coordinate that some shapes of the free grid cannot hold: never chosen
    for np_ in (2, 4, 6):
        runs.extend(_expand("programs", pr("auto_fixed.dtl"), [{"n": 11}], [np_], compile_args=["--auto", "--ranks", str(np_)]))
    runs.extend(_expand("programs", pr("auto_fixed.dtl"), [{"n": 9}], [2, 4, 6, 8], compile_args=["--auto"]))
    # statements in a loop counted at each iteration up to its bound, a fetch of what the loop
    # does not write once (layouts chosen at the program's sizes, run small; the loop ends by its
    # bound or at once by its condition); with --no-fuse other layouts
    runs.extend(_expand("programs", pr("auto_loops.dtl"), [{"n": 13, "maxit": 4, "tol": 0}, {"n": 5, "maxit": 3, "tol": 1e30}],
                        [1, 2, 3, 4, 6, 8], compile_args=["--auto", "--ranks", "4"]))
    runs.extend(_expand("programs", pr("auto_loops.dtl"), [{"n": 11, "maxit": 3, "tol": 0}], [2, 3, 4],
                        compile_args=["--auto", "--ranks", "4", "--no-fuse"]))
    runs.extend(_expand("programs", pr("auto_loops.dtl"), [{"n": 7, "maxit": 2, "tol": 0}], [2, 6], compile_args=["--auto"]))
    # candidates ranked by their share of the program's run: compiled once (plan_create chooses
    # among the variants at the run's params) and for 4 ranks, at each loop bound
    runs.extend(_expand("programs", pr("auto_share.dtl"), [{"n": 13, "it": 40}, {"n": 10, "it": 1}], [1, 2, 3, 4, 6, 8],
                        compile_args=["--auto"]))
    runs.extend(_expand("programs", pr("auto_share.dtl"), [{"n": 11, "it": 3}], [2, 4], compile_args=["--auto", "--ranks", "4"]))
    # statements that read sparse tensors, their distributions searched (compiled for 4 ranks, run at others too)
    runs.extend(_expand("programs", pr("auto_sparse.dtl"), [{"n": 23, "m": 17, "k": 5}], [1, 2, 3, 4, 6, 8],
                        compile_args=["--auto", "--ranks", "4"]))
    runs.extend(_expand("programs", pr("auto_sparse.dtl"), [{"n": 3, "m": 9, "k": 2}], [4, 8], compile_args=["--auto"]))
    # statements that write sparse tensors, searched the same way
    runs.extend(_expand("programs", pr("auto_sparse_out.dtl"), [{"n": 23, "m": 17, "k": 5}], [1, 2, 3, 4, 6, 8],
                        compile_args=["--auto", "--ranks", "4"]))
    runs.extend(_expand("programs", pr("auto_sparse_out.dtl"), [{"n": 3, "m": 9, "k": 2}], [4, 8], compile_args=["--auto"]))
    runs.extend(_expand("programs", pr("auto_transpose.dtl"), [{"n": 5}], [4, 6], compile_args=["--auto", "--ranks", "4"]))
    runs.extend(_expand("programs", pr("auto_3d.dtl"), [{"n": 19, "m": 23, "r": 7}], [1, 2, 4, 6, 8],
                        compile_args=["--auto", "--ranks", "8"]))
    runs.extend(_expand("programs", pr("auto_layout.dtl"), [{"n": 41, "m": 13}], [1, 2, 4, 6],
                        compile_args=["--auto", "--ranks", "4"]))
    runs.extend(_expand("programs", pr("auto_layout.dtl"), [{"n": 3, "m": 7}], [3, 8], compile_args=["--auto", "--ranks", "4"]))
    # a machine of two levels: the search distributes onto M and M[1] (compiled for 16 ranks in
    # nodes of 4, and for 4 in nodes of 2), run on nodes of other sizes (simulated with
    # DISTAL_RANKS_PER_NODE), uneven sizes
    for np_, rpn, sizes, ca in ((1, 1, {"n": 24, "m": 20, "k": 18}, ["--ranks", "16", "--ranks-per-node", "4"]),
                                (4, 2, {"n": 24, "m": 20, "k": 18}, ["--ranks", "16", "--ranks-per-node", "4"]),
                                (8, 4, {"n": 13, "m": 7, "k": 29}, ["--ranks", "16", "--ranks-per-node", "4"]),
                                (6, 3, {"n": 24, "m": 20, "k": 18}, ["--ranks", "4", "--ranks-per-node", "2"]),
                                (3, 1, {"n": 5, "m": 11, "k": 9}, ["--ranks", "4", "--ranks-per-node", "2"]),
                                (8, 2, {"n": 24, "m": 20, "k": 18}, ["--ranks", "4", "--ranks-per-node", "2"])):
        runs.append(Run("programs", pr("auto_hier.dtl"), np_, sizes, validate=np_ == 4, compile_args=["--auto"] + ca,
                        run_env={"DISTAL_RANKS_PER_NODE": str(rpn)}, label="nodes of %d" % rpn))
    # a machine of three levels: the search distributes onto M, M[1] and M[2] (compiled for
    # 64 ranks in nodes of 8 with sizes where the GEMM takes SUMMA's panels and a kernel, and
    # for 16 in nodes of 4), run on nodes of other sizes, uneven sizes
    big3 = ["--set", "n=4096", "--set", "m=4096", "--set", "k=4096"]
    for np_, rpn, sizes, ca in ((1, 1, {"n": 26, "m": 19, "k": 17}, ["--ranks", "64", "--ranks-per-node", "8"] + big3),
                                (4, 2, {"n": 23, "m": 14, "k": 9}, ["--ranks", "64", "--ranks-per-node", "8"] + big3),
                                (8, 8, {"n": 26, "m": 19, "k": 17}, ["--ranks", "64", "--ranks-per-node", "8"] + big3),
                                (6, 3, {"n": 13, "m": 31, "k": 5}, ["--ranks", "64", "--ranks-per-node", "8"] + big3),
                                (8, 4, {"n": 26, "m": 19, "k": 17}, ["--ranks", "16", "--ranks-per-node", "4"]),
                                (3, 3, {"n": 7, "m": 5, "k": 11}, ["--ranks", "16", "--ranks-per-node", "4"])):
        runs.append(Run("programs", pr("auto_hier3.dtl"), np_, sizes, validate=np_ == 4, compile_args=["--auto"] + ca,
                        run_env={"DISTAL_RANKS_PER_NODE": str(rpn)}, label="nodes of %d" % rpn))
    # the grid's shape chosen with the layouts and schedules, at compile time (for 8 ranks, a
    # flat product: 1 x 8) and in plan_create (compiled once), uneven sizes
    runs.extend(_expand("programs", pr("auto_shape.dtl"), [{"m": 7, "n": 301}], [1, 2, 3, 4, 6, 8],
                        compile_args=["--auto", "--ranks", "8", "--set", "m=37", "--set", "n=30001"]))
    runs.extend(_expand("programs", pr("auto_shape.dtl"), [{"m": 9, "n": 205}, {"m": 31, "n": 6}], [1, 2, 4, 6, 8],
                        compile_args=["--auto"]))
    # a sparse operand that every rank along a grid dim needs: broadcast (uneven blocks, 1 x P
    # and P x 1 grids, chunks that do not divide n)
    runs.extend(_expand("programs", pr("sparse_bcast.dtl"), [{"n": 13, "chunk": 4}], [1, 2, 3, 4, 6, 8],
                        fill_args=["--density", "0.3"]))
    runs.extend(_expand("programs", pr("sparse_bcast.dtl"), [{"n": 6, "chunk": 5}], [2, 4], fill_args=["--density", "0.3"]))
    runs.append(Run("programs", pr("sparse_bcast.dtl"), 4, {"n": 9, "chunk": 2}, grid={"gx": 1, "gy": 4},
                    validate=True, fill_args=["--density", "0.4"]))
    # the rewrite overlap with a compressed row level: rows without entries (position -1), and
    # rows split into the two nests; with 64-bit index arrays too
    runs.extend(_expand("programs", pr("sparse_overlap_dcsr.dtl"), [{"n": 23}], [1, 2, 3, 4, 6]))
    runs.extend(_expand("programs", pr("sparse_overlap_dcsr.dtl"), [{"n": 5}], [2, 6]))
    runs.append(Run("programs", pr("sparse_overlap_dcsr.dtl"), 3, {"n": 17}, validate=True,
                    run_env={"DISTAL_INDEX_BITS": "64"}, label="64-bit indices"))
    # repetitions: the tensors that += updates are reset before each one
    runs.append(Run("programs", pr("sparse_accumulate.dtl"), 3, {"n": 7, "m": 10, "p": 3},
                    args=["--iters", "3", "--warmup", "1"]))
    # bad sparse files: one message, a nonzero exit, no hang
    for error, name in (("mtx-shape", "sparse_spmv.dtl"), ("tns-range", "sparse_tensor3.dtl"),
                        ("mtx-syntax", "sparse_spmm.dtl")):
        runs.append(Run("programs", pr(name), 2, {}, error=error))
    # --fill random with a density: the same tensors at any rank count, about that
    # share of the sparse tensors' elements nonzero
    runs.append(Run("programs", pr("sparse_spmv.dtl"), None, {"n": 40, "m": 30, "chunk": 7},
                    fill_ranks=[1, 3], fill_args=["--density", "0.25"]))
    runs.append(Run("programs", pr("sparse_tensor3.dtl"), None, {"n": 12, "m": 10, "p": 9, "r": 2},
                    fill_ranks=[4, 2]))
    # statements that write sparse tensors (sparse_results.dtl has more)
    runs.append(Run("programs", "writes_sparse.dtl", 3, {"n": 7}, label="=",
                    source=_WRITES_SPARSE % "="))
    runs.append(Run("programs", "writes_sparse.dtl", 2, {"n": 7}, label="+=", validate=True,
                    source=_WRITES_SPARSE % "+="))
    runs.append(Run("programs", "writes_sparse_vector.dtl", 2, {"n": 7}, validate=True,
                    source=_WRITES_SPARSE_VECTOR))
    # rejected by distalc, with the error on the statement's lines
    for name, lines, text in _SPARSE_REJECTED:
        runs.append(Run("programs", "sparse_result_%s.dtl" % name, None, compile_error=lines,
                        source=text))
    # no sparse tensors on GPUs
    runs.append(Run("programs", pr("sparse_spmv.dtl"), None, compile_error=[],
                    compile_args=["--target", "cuda"]))
    runs.append(Run("programs", "gpu_sparse.dtl", None, compile_error=[], source=_GPU_SPARSE))
    return runs


def gpu(long=False):
    """Programs of gpu machines (tests/gpu/programs): only for --target cuda.  (hier.dtl,
    whose hierarchical distributions the oracle does not read, runs with --validate in
    tests/gpu/emulated.sh and run.sh.)"""
    pr = lambda name: "tests/gpu/programs/" + name  # noqa: E731
    ranks = [1, 2, 3, 4] + ([6, 8] if long else [])
    runs = []
    runs.extend(_expand("gpu", pr("units.dtl"), [{"n": 9, "m": 7}, {"n": 13, "m": 4}], ranks))
    return runs
