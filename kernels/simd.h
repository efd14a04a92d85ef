/* simd.h -- libdistal's vector helpers shared by kernels/blas.c and kernels/tensor_kernels.c
 * (not part of the installed API). */
#ifndef DISTAL_KERNELS_SIMD_H
#define DISTAL_KERNELS_SIMD_H

#include <stdbool.h>
#include <stdint.h>

/* Whether dtl_dot4_rows may be called: the compiler and the CPU have AVX2 and FMA. */
bool dtl_dot4_available(void) __attribute__((visibility("hidden")));
/* out[q] = sum over k < n of bq[k] c[k], for the four rows b0..b3, with AVX2 and FMA (four
 * streams read at once, c's piece reused by the four). */
void dtl_dot4_rows(const double *b0, const double *b1, const double *b2, const double *b3, const double *c, int64_t n,
                   double *out) __attribute__((visibility("hidden")));

#endif
