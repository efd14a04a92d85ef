"""The installed Python package alone (tests/install/run.sh): imported from the staged
tree, it finds that tree's distalc, headers and libdistal by itself, and SUMMA on 2 ranks
gives B C.

usage: mpirun -np 2 python3 installed.py STAGE SUMMA.dtl
"""
import sys

import numpy as np
from mpi4py import MPI

import distal
from distal import _config

stage, source = sys.argv[1], sys.argv[2]
comm = MPI.COMM_WORLD
ok = distal.__file__.startswith(stage) and _config.DISTALC.startswith(stage) and _config.LIBDIR.startswith(stage)
if not ok:
    print(f"FAIL: not the staged package: {distal.__file__}, {_config.DISTALC}, {_config.LIBDIR}")
n = 29
rng = np.random.default_rng(2)
B, C = rng.standard_normal((n, n)), rng.standard_normal((n, n))
lib = distal.compile(source)
with lib.plan(comm, n=n, chunk=4) as plan:
    A = plan.zeros("A")
    plan.compute(A, plan.block_of("B", B), plan.block_of("C", C))
    err = np.abs(A - (B @ C)[plan.slices("A")]).max()
errs = comm.gather(err, root=0)
ok = comm.allreduce(ok, op=MPI.LAND)
if comm.Get_rank() == 0:
    good = ok and max(errs) < 1e-10
    print(f"{'PASS' if good else 'FAIL'} installed python package: summa at {comm.Get_size()} ranks, max error {max(errs):.2e}")
    sys.exit(0 if good else 1)
