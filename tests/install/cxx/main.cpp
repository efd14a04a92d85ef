// A = B C through the generated SUMMA kernel (examples/summa.dtl), from C++: each rank gives
// its rows of B and C, gets its rows of A back, and compares them with a plain triple loop over the whole
// matrices (which every rank can compute: they are formulas of the coordinates).
#include <mpi.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "summa.h"

static double b_of(int64_t i, int64_t k) { return (double)((i * 7 + k) % 11) - 5; }
static double c_of(int64_t k, int64_t j) { return (double)((k + 3 * j) % 5) * 0.5; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t n = 13, rows = (n + size - 1) / size;
  const int64_t r0 = std::min(n, rank * rows), r1 = std::min(n, r0 + rows);
  std::vector<double> A((r1 - r0) * n + 1, -1.0), B((r1 - r0) * n + 1), C((r1 - r0) * n + 1);
  for (int64_t i = r0; i < r1; i++)
    for (int64_t j = 0; j < n; j++) B[(i - r0) * n + j] = b_of(i, j), C[(i - r0) * n + j] = c_of(i, j);
  summa_params p;
  summa_params_default(&p);
  p.n = n;
  summa_plan *plan = nullptr;
  int bad = summa_plan_create(MPI_COMM_WORLD, &p, &plan);
  int64_t off[2], ext[2];
  std::vector<double> a(bad ? 1 : summa_A_block(plan, off, ext) + 1), b(bad ? 1 : summa_B_block(plan, off, ext) + 1),
      c(bad ? 1 : summa_C_block(plan, off, ext) + 1);
  const int64_t lo[2] = {r0, 0}, hi[2] = {r1, n};
  if (!bad)
    bad = summa_B_import(plan, lo, hi, B.data(), b.data()) || summa_C_import(plan, lo, hi, C.data(), c.data()) ||
          summa_compute(plan, a.data(), b.data(), c.data()) || summa_A_export(plan, a.data(), lo, hi, A.data());
  if (bad && plan) std::fprintf(stderr, "rank %d: %s\n", rank, summa_error(plan));
  double err = 0;
  for (int64_t i = r0; !bad && i < r1; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t k = 0; k < n; k++) s += b_of(i, k) * c_of(k, j);
      err = std::fmax(err, std::fabs(s - A[(i - r0) * n + j]));
    }
  double worst = 0;
  int anybad = 0;
  MPI_Reduce(&err, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  const bool ok = !anybad && worst < 1e-12;
  if (rank == 0) std::printf("%s a C++ application with distal::distal alone at %d ranks: max error %g\n", ok ? "PASS" : "FAIL", size, worst);
  if (plan) summa_plan_destroy(&plan);
  MPI_Finalize();
  return ok ? 0 : 1;
}
