/* catalogue.c -- the table of leaf kernels and the two questions asked of it: does a
 * statement have a kernel's form (kc_match), and which arguments does the kernel's entry
 * point take for it (kc_describe_call). */
#include "kernels/catalogue.h"

#include <stdio.h>
#include <string.h>

/* The forms are the paper's (DISTAL, section 5; TTV, TTM, MTTKRP and the inner product as
 * in CTF).  Every entry point accumulates into its output; the storing ones (host_store)
 * overwrite it. */
static const kc_info table[KERNEL_COUNT] = {
  [KERNEL_GEMM] = {.name = "gemm", .noperands = 3, .assign = "=",
                   .op = {{'A', "ij", KC_TENSOR}, {'B', "ik", KC_TRANSPOSABLE}, {'C', "kj", KC_TRANSPOSABLE}},
                   .call = "BCA", .ld = KC_LD_LEADING, .host = "dtl_gemm", .host_store = "dtl_gemm_store", .device = "dtl_cu_gemm",
                   .flops = 2, .blas = true},
  [KERNEL_GEMV] = {.name = "gemv", .noperands = 3, .assign = "=",
                   .op = {{'a', "i", KC_TENSOR}, {'B', "ij", KC_TRANSPOSABLE}, {'c', "j", KC_TENSOR}},
                   .call = "Bca", .ld = KC_LD_LEADING, .host = "dtl_gemv", .device = "dtl_cu_gemv",
                   .flops = 2, .blas = true},
  [KERNEL_DOT] = {.name = "dot", .noperands = 3, .assign = "=",
                  .op = {{'a', "", KC_TENSOR}, {'b', "i", KC_TENSOR}, {'c', "i", KC_TENSOR}},
                  .call = "bca", .ld = KC_LD_LEADING, .host = "dtl_dot", .device = "dtl_cu_dot",
                  .flops = 2, .blas = true},
  [KERNEL_AXPY] = {.name = "axpy", .noperands = 3, .assign = "+=",
                   .op = {{'y', "i", KC_TENSOR}, {'a', "", KC_SCALAR}, {'x', "i", KC_TENSOR}},
                   .call = "axy", .ld = KC_LD_LEADING, .host = "dtl_axpy", .device = "dtl_cu_axpy",
                   .flops = 2, .blas = true},
  [KERNEL_TTV] = {.name = "ttv", .noperands = 3, .assign = "=",
                  .op = {{'A', "ij", KC_TENSOR}, {'B', "ijk", KC_TENSOR}, {'c', "k", KC_TENSOR}},
                  .call = "BcA", .ld = KC_LD_EVERY, .host = "dtl_ttv", .device = "dtl_cu_ttv",
                  .flops = 2},
  [KERNEL_TTM] = {.name = "ttm", .noperands = 3, .assign = "=",
                  .op = {{'A', "ijl", KC_TENSOR}, {'B', "ijk", KC_TENSOR}, {'C', "kl", KC_TENSOR}},
                  .call = "BCA", .ld = KC_LD_EVERY, .host = "dtl_ttm", .host_store = "dtl_ttm_store", .device = "dtl_cu_ttm",
                  .flops = 2},
  /* the Khatri-Rao product is formed in memory, which may run out; two multiplies and an
   * add per point */
  [KERNEL_MTTKRP] = {.name = "mttkrp", .noperands = 4, .assign = "=",
                     .op = {{'A', "il", KC_TENSOR}, {'B', "ijk", KC_TENSOR}, {'C', "jl", KC_TENSOR},
                            {'D', "kl", KC_TENSOR}},
                     .call = "BCDA", .ld = KC_LD_EVERY, .host = "dtl_mttkrp", .host_store = "dtl_mttkrp_store", .device = "dtl_cu_mttkrp",
                     .host_fails = "out of memory in mttkrp", .flops = 3},
  [KERNEL_INNERPROD] = {.name = "innerprod", .noperands = 3, .assign = "=",
                        .op = {{'a', "", KC_TENSOR}, {'B', "ijk", KC_TENSOR}, {'C', "ijk", KC_TENSOR}},
                        .call = "BCa", .ld = KC_LD_EVERY, .host = "dtl_innerprod", .device = "dtl_cu_innerprod",
                        .flops = 2},
};

const kc_info *kc_get(kc_kernel k) {
  return k > KERNEL_NONE && k < KERNEL_COUNT ? &table[k] : NULL;
}

kc_kernel kc_lookup(const char *name) {
  for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++)
    if (!strcmp(name, table[k].name)) return (kc_kernel)k;
  return KERNEL_NONE;
}

int kc_nletters(kc_kernel k) {
  const kc_info *in = kc_get(k);
  int n = 0;
  for (int o = 0; in && o < in->noperands; o++)
    for (const char *x = in->op[o].letters; *x; x++)
      if (*x - 'i' + 1 > n) n = *x - 'i' + 1;
  return n;
}

/* snprintf into what is left of buf after *used characters (which may exceed n) */
#define ADD(buf, n, used, ...)                                                                     \
  (*(used) += snprintf(*(used) < (int)(n) ? (buf) + *(used) : NULL,                              \
                       *(used) < (int)(n) ? (n) - (size_t)*(used) : 0, __VA_ARGS__))

int kc_names(char *buf, size_t n) {
  int used = 0;
  if (n) buf[0] = 0;
  for (int k = KERNEL_NONE + 1; k < KERNEL_COUNT; k++)
    ADD(buf, n, &used, "%s%s", k > KERNEL_NONE + 1 ? ", " : "", table[k].name);
  return used;
}

int kc_form(kc_kernel k, char *buf, size_t n) {
  const kc_info *in = kc_get(k);
  int used = 0;
  if (n) buf[0] = 0;
  if (!in) return 0;
  for (int o = 0; o < in->noperands; o++) {
    const kc_operand *op = &in->op[o];
    if (o == 1) ADD(buf, n, &used, " %s ", in->assign);
    else if (o > 1) ADD(buf, n, &used, " * ");
    ADD(buf, n, &used, "%c", op->name);
    for (const char *x = op->letters; *x; x++) ADD(buf, n, &used, "%c%c", x == op->letters ? '(' : ',', *x);
    if (*op->letters) ADD(buf, n, &used, ")");
  }
  if (!in->blas) return used;
  /* a BLAS form names its loops, and what its scalar may be */
  static const char *count[] = {"", "one loop", "two loops", "three loops", "four loops"};
  int nl = kc_nletters(k);
  ADD(buf, n, &used, " over %s", count[nl]);
  for (int L = 0; L < nl; L++) ADD(buf, n, &used, "%s%c", L ? ", " : " ", 'i' + L);
  for (int o = 0; o < in->noperands; o++)
    if (in->op[o].role == KC_SCALAR) ADD(buf, n, &used, " (%c a scalar or a constant)", in->op[o].name);
  return used;
}

double kc_flops(kc_kernel k, const int64_t *extent) {
  const kc_info *in = kc_get(k);
  if (!in) return 0;
  double f = in->flops;
  for (int L = 0; L < kc_nletters(k); L++) f *= (double)extent[L];
  return f;
}

/* ---- matching ------------------------------------------------------------------------------- */
/* Bind letters (in storage order, or reversed) to the kernel dimensions of an access, in
 * storage order; a letter already bound must see its dimension again, a new one a
 * dimension no other letter has. */
static bool fit(const kc_access *a, const char *letters, bool reversed, int *letter) {
  int kd[KC_MAX_POS], nk = 0, len = (int)strlen(letters);
  for (int p = 0; p < a->nidx; p++)
    if (a->dim[p] >= 0) kd[nk++] = a->dim[p];
  if (nk != len) return false;
  for (int x = 0; x < nk; x++) {
    int L = letters[reversed ? len - 1 - x : x] - 'i';
    if (letter[L] < 0) {
      for (int m = 0; m < KC_MAX_LETTERS; m++)
        if (letter[m] == kd[x]) return false;
      letter[L] = kd[x];
    } else if (letter[L] != kd[x]) {
      return false;
    }
  }
  return true;
}

static bool fit_operand(const kc_access *a, const kc_operand *op, int *letter, bool *transposed) {
  *transposed = false;
  if (a->number) return op->role == KC_SCALAR;
  for (int rev = 0; rev < (op->role == KC_TRANSPOSABLE ? 2 : 1); rev++) {
    int try[KC_MAX_LETTERS];
    memcpy(try, letter, sizeof try);
    if (fit(a, op->letters, rev, try)) {
      memcpy(letter, try, sizeof try);
      *transposed = rev;
      return true;
    }
  }
  return false;
}

bool kc_match(kc_kernel k, int ndims, int nops, const kc_access *ops, kc_binding *b) {
  const kc_info *in = kc_get(k);
  if (!in || nops != in->noperands || ndims != kc_nletters(k)) return false;
  /* the factors of the statement in every order (lexicographic; the first fit wins) */
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  int nf = nops - 1;
  for (int pi = 0; pi < 6; pi++) {
    bool valid = true;
    for (int q = 0; q < 3; q++) valid &= q < nf ? perms[pi][q] < nf : perms[pi][q] == q;
    if (!valid) continue;
    kc_binding t;
    for (int L = 0; L < KC_MAX_LETTERS; L++) t.letter[L] = -1;
    t.operand[0] = 0;
    bool fits = fit_operand(&ops[0], &in->op[0], t.letter, &t.transposed[0]);
    for (int s = 1; s <= nf && fits; s++) {
      t.operand[s] = 1 + perms[pi][s - 1];
      fits = fit_operand(&ops[t.operand[s]], &in->op[s], t.letter, &t.transposed[s]);
    }
    if (!fits) continue;
    if (b) *b = t;
    return true;
  }
  return false;
}

/* ---- the call --------------------------------------------------------------------------------- */
static void push(kc_call *c, kc_arg_kind kind, int value, int operand, int pos) {
  if (c->nargs < KC_MAX_ARGS) c->arg[c->nargs++] = (kc_arg){kind, value, operand, pos};
}

static int slot_named(const kc_info *in, char name) {
  for (int s = 0; s < in->noperands; s++)
    if (in->op[s].name == name) return s;
  return 0;
}

/* the storage position of an access that walks kernel dimension d (-1: none) */
static int position_of(const kc_access *a, int d) {
  for (int p = 0; p < a->nidx; p++)
    if (a->dim[p] == d) return p;
  return -1;
}

bool kc_describe_call(kc_kernel k, int ndims, int nops, const kc_access *ops, kc_call *call) {
  kc_binding b;
  if (!kc_match(k, ndims, nops, ops, &b)) return false;
  const kc_info *in = kc_get(k);
  call->kernel = in;
  call->nargs = 0;
  push(call, KC_ARG_TYPE, 0, -1, -1);
  for (const char *c = in->call; *c; c++) {
    int s = slot_named(in, *c);
    if (in->op[s].role == KC_TRANSPOSABLE) push(call, KC_ARG_FLAG, b.transposed[s], b.operand[s], -1);
  }
  for (int L = 0; L < kc_nletters(k); L++) push(call, KC_ARG_EXTENT, b.letter[L], -1, -1);
  for (const char *c = in->call; *c; c++) {
    int s = slot_named(in, *c), o = b.operand[s];
    const kc_operand *op = &in->op[s];
    if (op->role == KC_SCALAR) {
      push(call, KC_ARG_SCALAR, 0, o, -1);
      continue;
    }
    push(call, KC_ARG_POINTER, 0, o, -1);
    if (in->ld == KC_LD_LEADING) {
      /* row-major: the leading dimension is the stride of the first stored letter */
      int first = -1;
      for (int p = 0; p < ops[o].nidx && first < 0; p++)
        if (ops[o].dim[p] >= 0) first = p;
      if (*op->letters) push(call, KC_ARG_STRIDE, 0, o, first);
    } else {
      for (const char *x = op->letters; *x; x++) push(call, KC_ARG_STRIDE, 0, o, position_of(&ops[o], b.letter[*x - 'i']));
    }
  }
  return true;
}
