/* pdgemm_errors.c -- distal_pdgemm with bad arguments: each call returns on every process
 * with a message (distal_pdgemm_error) that names the problem and leaves C as it was, and a
 * good call afterwards still multiplies correctly.  Exit status 1 otherwise.
 *
 *   mpirun -np P ./pdgemm_errors */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "distal/scalapack.h"
#include "scalapack.h"

static int failures;

/* C = 2 + its coordinates everywhere (the sentinel a failed call must leave). */
static void reset(test_matrix *C, const test_grid *g) { TEST_FOR_LOCAL(C, g, gi, gj, e, *e = 2 + gi + gj;) }

static void expect(const char *what, const char *needle, const test_matrix *C, const test_grid *g) {
  const char *msg = distal_pdgemm_error();
  int bad = !strstr(msg, needle);
  TEST_FOR_LOCAL(C, g, gi, gj, e, bad |= *e != 2 + gi + gj;)
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any) {
    failures++;
    fprintf(stderr, "%s: message \"%s\", expected \"%s\" and C unchanged\n", what, msg, needle);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, dims[2] = {0, 0};
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Dims_create(size, 2, dims);
  test_grid g;
  Cblacs_get(-1, 0, &g.ctxt);
  Cblacs_gridinit(&g.ctxt, "Row", dims[0], dims[1]);
  Cblacs_gridinfo(g.ctxt, &g.nprow, &g.npcol, &g.myrow, &g.mycol);
  const int m = 13, n = 11, k = 7, one = 1, two = 2;
  const double alpha = 1, beta = 0;
  test_matrix A, B, C;
  if (test_matrix_make(&A, &g, m, k, 3, 2, 0, 0) || test_matrix_make(&B, &g, k, n, 2, 3, 0, 0) ||
      test_matrix_make(&C, &g, m, n, 4, 4, 0, 0))
    MPI_Abort(MPI_COMM_WORLD, 1);
  TEST_FOR_LOCAL(&A, &g, gi, gj, e, *e = test_fn(1, gi, gj);)
  TEST_FOR_LOCAL(&B, &g, gi, gj, e, *e = test_fn(2, gi, gj);)
  reset(&C, &g);
  distal_pdgemm("X", "N", &m, &n, &k, &alpha, A.a, &one, &one, A.desc, B.a, &one, &one, B.desc, &beta, C.a, &one,
                &one, C.desc);
  expect("transa X", "transa", &C, &g);
  distal_pdgemm("N", "N", &m, &n, &k, &alpha, A.a, &two, &one, A.desc, B.a, &one, &one, B.desc, &beta, C.a, &one,
                &one, C.desc);
  expect("A's submatrix past its end", "A: import_scalapack: the 13 x 7 submatrix at (2, 1) does not fit", &C, &g);
  int saved = B.desc[8];
  if (g.myrow == 0 && g.mycol == 0) B.desc[8] = 0;
  distal_pdgemm("N", "N", &m, &n, &k, &alpha, A.a, &one, &one, A.desc, B.a, &one, &one, B.desc, &beta, C.a, &one,
                &one, C.desc);
  expect("B's LLD 0 on one process", "B: import_scalapack: LLD = 0", &C, &g);
  B.desc[8] = saved;
  B.desc[0] = 7;
  distal_pdgemm("N", "N", &m, &n, &k, &alpha, A.a, &one, &one, A.desc, B.a, &one, &one, B.desc, &beta, C.a, &one,
                &one, C.desc);
  expect("B's descriptor type 7", "B: import_scalapack: descriptor type 7", &C, &g);
  B.desc[0] = 1;
  B.desc[1] = g.ctxt + 1;
  distal_pdgemm("N", "N", &m, &n, &k, &alpha, A.a, &one, &one, A.desc, B.a, &one, &one, B.desc, &beta, C.a, &one,
                &one, C.desc);
  expect("B in another context", "contexts", &C, &g);
  B.desc[1] = g.ctxt;
  /* and a good call still works */
  distal_pdgemm("N", "N", &m, &n, &k, &alpha, A.a, &one, &one, A.desc, B.a, &one, &one, B.desc, &beta, C.a, &one,
                &one, C.desc);
  int bad = distal_pdgemm_error()[0] != '\0';
  TEST_FOR_LOCAL(&C, &g, gi, gj, e, {
    double s = 0;
    for (int l = 0; l < k; l++) s += test_fn(1, gi, l) * test_fn(2, l, gj);
    bad |= *e != s;
  })
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any) failures++, fprintf(stderr, "the good call after the bad ones: wrong product or message\n");
  if (!rank) printf("pdgemm_errors: %d ranks: %s\n", size, failures ? "FAIL" : "ok");
  distal_pdgemm_free();
  test_matrix_free(&A), test_matrix_free(&B), test_matrix_free(&C);
  Cblacs_gridexit(g.ctxt);
  MPI_Finalize();
  return failures ? 1 : 0;
}
