"""distal: kernels of distal-mpi from Python.

``compile`` turns a ``.dtl`` program into a shared library (distalc's library form, built
with the MPI compiler wrapper and cached) and loads it; the library's ``plan`` makes a Plan
over an mpi4py communicator, whose block queries, import, export and compute take NumPy
arrays::

    from mpi4py import MPI
    import numpy as np
    import distal

    summa = distal.compile("summa.dtl")              # collective over MPI.COMM_WORLD
    with summa.plan(MPI.COMM_WORLD, n=1000, chunk=100) as plan:
        B = plan.block_of("B", B_global)             # this rank's block of a global array
        C = plan.block_of("C", C_global)
        A = plan.zeros("A")
        plan.compute(A, B, C)

What the library holds (params, tensors, types) comes from ``distalc --emit api``.
"""

from ._build import CompileError, compile
from ._plan import DistalError, Library, Plan, SparseBlock

__all__ = ["compile", "CompileError", "DistalError", "Library", "Plan", "SparseBlock"]
