#!/bin/sh
# Install the dependencies, build distal-mpi, and run a real example: the SUMMA matrix
# multiply of examples/summa.dtl under mpirun on 4 ranks, validated against a serial
# recomputation.  This is the README's example command.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
autoreconf -fi
rm -rf build && mkdir build && cd build
../configure --prefix="$PWD/inst"
make -j"$(nproc 2>/dev/null || echo 2)"
make install
./inst/bin/distalc ../examples/summa.dtl --exe -o summa
mpirun -np 4 --oversubscribe ./summa -n 2048 --chunk 256 --iters 3 --validate
