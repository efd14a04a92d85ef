/* poisson.h -- shared by the PETSc references of bench/: the 2-D 5-point Poisson matrix
 * and distal's blocked partition of rows. */
#ifndef BENCH_POISSON_H
#define BENCH_POISSON_H
#include <petscsys.h>

/* distal's blocked partition: rows of rank r out of P. */
static inline void block_rows(PetscInt n, int P, int r, PetscInt *lo, PetscInt *hi) {
  PetscInt s = (n + P - 1) / P;
  *lo = PetscMin(n, (PetscInt)r * s);
  *hi = PetscMin(n, (PetscInt)(r + 1) * s);
}

/* The columns and values of row i of the m x m 5-point Laplacian, in ascending order. */
static inline int poisson_row(PetscInt m, PetscInt i, PetscInt *cols, double *vals) {
  PetscInt gi = i / m, gj = i % m;
  int k = 0;
  if (gi > 0) cols[k] = i - m, vals[k++] = -1.0;
  if (gj > 0) cols[k] = i - 1, vals[k++] = -1.0;
  cols[k] = i, vals[k++] = 4.0;
  if (gj < m - 1) cols[k] = i + 1, vals[k++] = -1.0;
  if (gi < m - 1) cols[k] = i + m, vals[k++] = -1.0;
  return k;
}

#endif
