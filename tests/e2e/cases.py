"""cases.py -- the table of end-to-end cases run by run_e2e.py.

examples(long) covers every program in examples/ at 1, 2, 3, 4, 6 and 8 ranks where its
machine allows, at sizes that divide evenly over the grid and sizes that do not;
programs(long) covers tests/e2e/programs/, plus runs that must fail cleanly and runs
that check --fill; gpu(long) covers tests/gpu/programs/ (gpu machines and GPU units,
compiled for the CUDA target).  The default is sized for `make check`; --long adds sizes
and rank counts.
"""

import os

import dtl
from run_e2e import TOP_SRCDIR, Run, grid_fit

RANKS = [1, 2, 3, 4, 6, 8]


def _expand(suite, file, param_sets, ranks, validate_at=None, grids=None):
    """Runs of file for every param set at every rank count that fits its machine.
    grids: rank count -> grid params to pass explicitly (else worked out by grid_fit).
    The run at validate_at (default: the middle rank count that fits) adds --validate."""
    prog = dtl.parse_file(os.path.join(TOP_SRCDIR, file))
    runs = []
    for params in param_sets:
        values = prog.param_values(params)
        fitting = [p for p in ranks if (grids and p in grids) or grid_fit(prog, p, values) is not None]
        vat = validate_at if validate_at is not None else (fitting[len(fitting) // 2] if fitting else None)
        for p in fitting:
            grid = grids.get(p) if grids else None
            runs.append(Run(suite, file, p, params, grid=grid, validate=(p == vat)))
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
    add("scalars.dtl", [{"n": 6, "m": 5}], [{"n": 11, "m": 3}])
    add("replicated.dtl", [{"n": 7, "m": 6, "p": 5}], [{"n": 4, "m": 9, "p": 12}])
    add("communicate.dtl", [{"n": 6, "m": 5, "p": 7, "chunk": 3}], [{"n": 9, "m": 8, "p": 4, "chunk": 2}])
    add("schedules.dtl", [{"n": 9, "m": 8, "p": 6, "chunk": 4}], [{"n": 5, "m": 12, "p": 7, "chunk": 3}])
    add("partial_dist.dtl", [{"n": 7, "m": 5}], [{"n": 12, "m": 4}])
    add("nested.dtl", [{"n": 6, "m": 7, "p": 8}], [{"n": 9, "m": 4, "p": 3}])
    add("literal_grid.dtl", [{"n": 7}], [{"n": 12}], rk=[2, 4, 6, 8] if long else [2, 4])
    add("required.dtl", [{"n": 5}])
    add("kernels.dtl", [{"n": 6, "m": 5, "p": 4, "r": 3}], [{"n": 9, "m": 2, "p": 7, "r": 5}])
    # runs that must fail cleanly: one message, a nonzero exit, no hang
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


def gpu(long=False):
    """Programs of gpu machines (tests/gpu/programs): only for --target cuda.  (hier.dtl,
    whose hierarchical distributions the oracle does not read, runs with --validate in
    tests/gpu/emulated.sh and run.sh.)"""
    pr = lambda name: "tests/gpu/programs/" + name  # noqa: E731
    ranks = [1, 2, 3, 4] + ([6, 8] if long else [])
    runs = []
    runs.extend(_expand("gpu", pr("units.dtl"), [{"n": 9, "m": 7}, {"n": 13, "m": 4}], ranks))
    return runs
