/* distal/scalapack.h -- libdistal_scalapack: ScaLAPACK's PDGEMM computed by a matrix multiply
 * that distalc generated (src/scalapack/pdgemm.dtl), on the caller's block-cyclic matrices.
 *
 * distal_pdgemm has exactly the arguments of PDGEMM (pdgemm_, Fortran convention: every
 * argument a pointer): sub(C) = alpha op(sub(A)) op(sub(B)) + beta sub(C), op per transa and
 * transb ('N', 'T' or 'C'), sub(X) = X(ix:, jx:) with 1-based ix, jx.  It imports op(sub(A))
 * and op(sub(B)) into the kernel's distribution, multiplies, and exports the product into
 * sub(C) with alpha and beta (beta = 0: sub(C) is not read), each move one exchange.  The
 * processes of the BLACS grid of descc's context call it (others return at once, as with
 * PDGEMM); the three descriptors must share that context.  Kernel plans are made once per
 * context and shape and kept (call distal_pdgemm_free before a context's number is reused by
 * another grid); DISTAL_PDGEMM_VERBOSE=1 in the environment prints a line per plan made.  A
 * bad argument prints one message on the process at (0, 0) of the grid and leaves C as it
 * was; distal_pdgemm_error tells it.
 *
 * libdistal_pdgemm exports pdgemm_ itself, calling distal_pdgemm: link it before ScaLAPACK
 * (-ldistal_pdgemm -lscalapack-openmpi) and an unmodified ScaLAPACK application multiplies
 * with distal. */
#ifndef DISTAL_SCALAPACK_H
#define DISTAL_SCALAPACK_H

#ifdef __cplusplus
extern "C" {
#endif

void distal_pdgemm(const char *transa, const char *transb, const int *m, const int *n, const int *k,
                   const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
                   const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
                   double *c, const int *ic, const int *jc, const int *descc);

/* The message of this process's last failed call, "" after a successful one. */
const char *distal_pdgemm_error(void);

/* Release every kept plan.  Collective: every process that called distal_pdgemm calls it,
 * before MPI_Finalize (optional; the plans are otherwise kept until exit). */
void distal_pdgemm_free(void);

#ifdef __cplusplus
}
#endif
#endif
