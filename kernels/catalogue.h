/* catalogue.h -- the leaf kernels behind `substitute` (LANGUAGE.md section 5), described
 * once: each kernel's name, its form (the operands with their index letters), the entry
 * points that run it on the host (kernels/blas.c, kernels/tensor_kernels.c, declared in
 * distal/runtime.h) and on the device (src/cuda/device.c, distal/cuda.h), the order and
 * kinds of their arguments and the flops of one iteration point.  The schedule's matcher
 * (src/ir/schedule.c), the IR and the C printer read this catalogue; no other place lists
 * the kernels.  It is part of the compiler: it knows no IR and no MPI, only letters, storage
 * positions and names. */
#ifndef DISTAL_KERNEL_CATALOGUE_H
#define DISTAL_KERNEL_CATALOGUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { KERNEL_NONE, KERNEL_GEMM, KERNEL_GEMV, KERNEL_DOT, KERNEL_AXPY, KERNEL_TTV,
               KERNEL_TTM, KERNEL_MTTKRP, KERNEL_INNERPROD, KERNEL_COUNT } kc_kernel;

#define KC_MAX_OPERANDS 4 /* the output and at most three factors */
#define KC_MAX_LETTERS 4  /* a kernel's index letters: i, j, k, l */
#define KC_MAX_POS 8      /* storage positions of one access (the largest tensor order) */
#define KC_MAX_ARGS 24    /* arguments of one entry point */

/* How an operand of a kernel's form may stand in the statement. */
typedef enum {
  KC_TENSOR,       /* an access whose kernel dimensions are the letters, in that storage order */
  KC_TRANSPOSABLE, /* an access of two letters, in that order or the reverse (then transposed) */
  KC_SCALAR        /* a number or an access of no kernel dimension, passed by address */
} kc_role;

typedef struct {
  char name;           /* as written in the form: A, b, x, ... */
  const char *letters; /* index letters in the kernel's storage order; "" for a scalar */
  kc_role role;
} kc_operand;

/* The strides an operand passes after its pointer (strides in elements). */
typedef enum {
  KC_LD_LEADING, /* BLAS: one, the leading dimension (a vector's increment): the stride of the
                    first stored of its letters; none for an operand without letters */
  KC_LD_EVERY    /* one per letter, in the order of the operand's letters */
} kc_ld_rule;

/* Arguments of an entry point, in order: the element type; one transposition flag (0 or
 * 1) per transposable operand, in call order; the extent of every letter (i, j, k, l);
 * then each operand in call order: a scalar by address, a tensor as a pointer to its first
 * element followed by its strides (ld).  The device entry point takes the context first
 * and returns nonzero on error. */
typedef struct {
  const char *name;               /* as written in substitute(..., NAME) */
  int noperands;                  /* the output and the factors */
  kc_operand op[KC_MAX_OPERANDS]; /* the output first, then the factors of the product */
  const char *assign;             /* the form's assignment: "=" or "+=" */
  const char *call;               /* operand names in the entry points' argument order */
  kc_ld_rule ld;
  const char *host;               /* libdistal's entry point */
  const char *host_store;         /* ... storing instead of adding (the rewrite "store"); NULL:
                                     none */
  const char *host_fails;         /* the host entry point returns nonzero on this failure;
                                     NULL: it returns nothing */
  const char *device;             /* libdistal_cuda's entry point */
  int flops;                      /* per point of the iteration space (of every letter) */
  bool blas;                      /* a BLAS routine (kernels/blas.c); the form names its loops */
} kc_info;

/* The kernel's entry, NULL for KERNEL_NONE or out of range. */
const kc_info *kc_get(kc_kernel k);
/* The kernel written NAME, KERNEL_NONE if there is none. */
kc_kernel kc_lookup(const char *name);
/* Number of index letters of the kernel (its substituted loops). */
int kc_nletters(kc_kernel k);
/* The names of every kernel: "gemm, gemv, ...".  snprintf's contract. */
int kc_names(char *buf, size_t n);
/* The kernel's form as error messages quote it: "A(i,j) = B(i,k) * C(k,j) over three loops
 * i, j, k".  snprintf's contract. */
int kc_form(kc_kernel k, char *buf, size_t n);
/* Flops of one call: flops per point times the extent of every letter (extent[L] of letter
 * 'i' + L). */
double kc_flops(kc_kernel k, const int64_t *extent);

/* ---- matching a statement ---------------------------------------------------------------- */
/* An operand of the statement: the output, or a factor of its right side (a product of
 * accesses and numbers).  dim[p]: the kernel dimension (0 .. ndims-1, one per substituted
 * loop) that storage position p walks, or -1 where the position is not substituted. */
typedef struct {
  bool number; /* a numeric constant (no positions) */
  int nidx;
  int dim[KC_MAX_POS];
} kc_access;

/* What a match binds: the kernel dimension of every letter; for every operand of the form
 * the statement operand it is (0: the output, q: the q-th factor from the left) and
 * whether it is stored transposed. */
typedef struct {
  int letter[KC_MAX_LETTERS];
  int operand[KC_MAX_OPERANDS];
  bool transposed[KC_MAX_OPERANDS];
} kc_binding;

/* Does the statement (ops[0] the output, ops[1..nops) the factors left to right) over
 * ndims substituted loops have the kernel's form, up to the order of the factors and the
 * names of the loops?  The first binding found, in a fixed order of the factors, is *b
 * (b may be NULL). */
bool kc_match(kc_kernel k, int ndims, int nops, const kc_access *ops, kc_binding *b);

/* ---- the call of a matched statement ------------------------------------------------------- */
typedef enum {
  KC_ARG_TYPE,    /* the element type */
  KC_ARG_FLAG,    /* value: a transposition flag */
  KC_ARG_EXTENT,  /* value: the kernel dimension whose extent it is */
  KC_ARG_POINTER, /* operand: its element at the lower corner of the kernel's block */
  KC_ARG_STRIDE,  /* operand, pos: the stride of that storage position of the operand */
  KC_ARG_SCALAR   /* operand: the address of its value */
} kc_arg_kind;

typedef struct {
  kc_arg_kind kind;
  int value;
  int operand; /* statement operand, as in kc_access */
  int pos;
} kc_arg;

typedef struct {
  const kc_info *kernel;
  int nargs;
  kc_arg arg[KC_MAX_ARGS];
} kc_call;

/* The arguments of the entry point for a statement that matches the kernel; false if it
 * does not match. */
bool kc_describe_call(kc_kernel k, int ndims, int nops, const kc_access *ops, kc_call *call);

#endif
