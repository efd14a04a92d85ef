/* grid_solve.c -- the grid params of a machine from the rank count (distal/grid.h).
 * No MPI: libdistal and the compiler (distalc --emit plan) are built from this one file. */
#include "distal/grid.h"

#include <stdbool.h>
#include <stdio.h>

static void format_grid(char *buf, size_t len, int ndims, const int *param, const int64_t *lit,
                        const char *const *names) {
  size_t at = (size_t)snprintf(buf, len, "grid(");
  for (int d = 0; d < ndims && at < len; d++) {
    const char *sep = d ? ", " : "";
    if (param[d] < 0)
      at += (size_t)snprintf(buf + at, len - at, "%s%lld", sep, (long long)lit[d]);
    else if (names && names[param[d]])
      at += (size_t)snprintf(buf + at, len - at, "%s%s", sep, names[param[d]]);
    else
      at += (size_t)snprintf(buf + at, len - at, "%sp%d", sep, param[d]);
  }
  if (at < len)
    snprintf(buf + at, len - at, ")");
}

/* The prime factors of n >= 1 in non-decreasing order (at most 63 for an int64), by trial
 * division: quick for every rank count MPI can have (an int). */
static int prime_factors(int64_t n, int64_t *p) {
  int k = 0;
  for (int64_t d = 2; d <= n / d; d++)
    while (n % d == 0) {
      p[k++] = d;
      n /= d;
    }
  if (n > 1)
    p[k++] = n;
  return k;
}

/* The largest v with v^m dividing n (n, m >= 1): every prime power p^e of n gives p^(e/m). */
static int64_t largest_root_dividing(int64_t n, int m) {
  int64_t p[64], v = 1;
  int k = prime_factors(n, p);
  for (int i = 0, j; i < k; i = j) {
    for (j = i; j < k && p[j] == p[i]; j++)
      ;
    for (int e = (j - i) / m; e > 0; e--)
      v *= p[i];
  }
  return v;
}

/* n as a product of k balanced factors, non-increasing (distal/grid.h): the prime factors of
 * n, largest first, each multiplies the smallest factor so far. */
static void balanced_factors(int64_t n, int k, int64_t *out) {
  int64_t p[64];
  int np = prime_factors(n, p);
  for (int i = 0; i < k; i++)
    out[i] = 1;
  for (int i = np - 1; i >= 0; i--) {
    int small = 0;
    for (int j = 1; j < k; j++)
      if (out[j] < out[small])
        small = j;
    out[small] *= p[i];
  }
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && out[j - 1] < out[j]; j--) {
      int64_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
}

static const char *power_word(int m, char *buf, size_t len) {
  if (m == 2)
    return "square";
  if (m == 3)
    return "cube";
  snprintf(buf, len, "%dth power", m);
  return buf;
}

/* dtl_solve_grid, its messages counting `unit` (ranks, or a hierarchical machine's nodes at
 * level 0) */
static int solve_grid_of(const char *unit, int64_t nranks, int ndims, const int *param, const int64_t *lit, int64_t *values,
                         const char *const *names, char *err, size_t errlen) {
  char grid[256], word[32], rk[32];
  /* the distinct unknown params in order of first use, and how often each is used */
  int unknown[DTL_MAX_DIMS], uses[DTL_MAX_DIMS], nunknown = 0;
  int64_t solved[DTL_MAX_DIMS];
  if (ndims < 1 || ndims > DTL_MAX_DIMS) {
    snprintf(err, errlen, "a grid has 1 to %d dims, not %d", DTL_MAX_DIMS, ndims);
    return 1;
  }
  format_grid(grid, sizeof grid, ndims, param, lit, names);
  snprintf(rk, sizeof rk, "%s%s", unit, nranks == 1 ? "" : "s");
  int64_t known = 1; /* product of the known dims */
  bool overflow = false;
  for (int d = 0; d < ndims; d++) {
    int p = param[d];
    int64_t v = p < 0 ? lit[d] : values[p];
    if (p >= 0 && v == -1) {
      int i = 0;
      while (i < nunknown && unknown[i] != p)
        i++;
      if (i == nunknown) {
        unknown[nunknown] = p;
        uses[nunknown++] = 0;
      }
      uses[i]++;
      continue;
    }
    if (v < 1) {
      snprintf(err, errlen, "%s: dimension %d has size %lld", grid, d, (long long)v);
      return 1;
    }
    if (__builtin_mul_overflow(known, v, &known))
      overflow = true;
  }
  if (nranks < 1 || overflow || known > nranks || nranks % known != 0 ||
      (nunknown == 0 && known != nranks)) {
    if (overflow)
      snprintf(err, errlen, "%lld %s cannot form %s: the grid is far too large", (long long)nranks,
               rk, grid);
    else if (nunknown == 0 || known > nranks)
      snprintf(err, errlen, "%lld %s cannot form %s: the grid has %lld processors",
               (long long)nranks, rk, grid, (long long)known);
    else
      snprintf(err, errlen, "%lld %s cannot form %s: %lld is not a multiple of %lld",
               (long long)nranks, rk, grid, (long long)nranks, (long long)known);
    return 1;
  }
  int64_t rest = nranks / known;
  if (nunknown == 1 && uses[0] > 1) {
    /* a single param used m times: an exact m-th root */
    int64_t v = largest_root_dividing(rest, uses[0]), pw = 1;
    for (int i = 0; i < uses[0]; i++)
      pw *= v;
    if (pw != rest) {
      snprintf(err, errlen, "%lld %s cannot form %s: %lld is not a %s", (long long)nranks, rk, grid,
               (long long)rest, power_word(uses[0], word, sizeof word));
      return 1;
    }
    solved[0] = v;
  } else if (nunknown > 0) {
    /* repeated params first, each the largest value whose power divides the rest; then
     * the params used once share what is left as balanced factors */
    int single[DTL_MAX_DIMS], nsingle = 0;
    for (int i = 0; i < nunknown; i++) {
      if (uses[i] == 1) {
        single[nsingle++] = i;
        continue;
      }
      solved[i] = largest_root_dividing(rest, uses[i]);
      for (int j = 0; j < uses[i]; j++)
        rest /= solved[i];
    }
    if (nsingle == 0 && rest != 1) {
      snprintf(err, errlen, "%lld %s cannot form %s: no integer values fit", (long long)nranks, rk,
               grid);
      return 1;
    }
    int64_t f[DTL_MAX_DIMS];
    if (nsingle > 0)
      balanced_factors(rest, nsingle, f);
    for (int i = 0; i < nsingle; i++)
      solved[single[i]] = f[i];
  }
  for (int i = 0; i < nunknown; i++)
    values[unknown[i]] = solved[i];
  return 0;
}

int dtl_solve_grid(int64_t nranks, int ndims, const int *param, const int64_t *lit, int64_t *values,
                   const char *const *names, char *err, size_t errlen) {
  return solve_grid_of("rank", nranks, ndims, param, lit, values, names, err, errlen);
}

int dtl_solve_machine(int64_t nranks, int64_t per_node, int ndims, int ninner, const int *param,
                      const int64_t *lit, int64_t *values, const char *const *names, char *err,
                      size_t errlen) {
  if (ninner <= 0)
    return dtl_solve_grid(nranks, ndims, param, lit, values, names, err, errlen);
  int n0 = ndims - ninner;
  if (per_node < 1 || nranks % per_node) {
    snprintf(err, errlen, "%lld rank%s do%s not split into nodes of %lld ranks", (long long)nranks, nranks == 1 ? "" : "s",
             nranks == 1 ? "es" : "", (long long)per_node);
    return 1;
  }
  bool lit_inner = true;
  int64_t inner = 1;
  for (int d = n0; d < ndims; d++) {
    lit_inner &= param[d] < 0;
    inner *= param[d] < 0 ? lit[d] : 1;
  }
  if (lit_inner && inner != per_node) {
    snprintf(err, errlen, "the inner levels of the machine need %lld ranks per node, but nodes have %lld",
             (long long)inner, (long long)per_node);
    return 1;
  }
  char m[512];
  if (dtl_solve_grid(per_node, ninner, param + n0, lit + n0, values, names, m, sizeof m)) {
    snprintf(err, errlen, "the ranks of one node do not fit the inner levels: %.400s", m);
    return 1;
  }
  if (solve_grid_of("node", nranks / per_node, n0, param, lit, values, names, m, sizeof m)) {
    snprintf(err, errlen, "the nodes do not fit level 0 (counting nodes, not ranks): %.400s", m);
    return 1;
  }
  return 0;
}

/* The ordered tuples of s factors whose product is n, each into f[at..s) after the fixed
 * f[0..at): appended to out (nvalues per shape, from base with the params single[] set) from
 * the smallest first factor up, at most max shapes in all; the count so far is returned. */
static int tuples(int64_t n, int at, int s, int64_t *f, const int *single, const int64_t *base, int nvalues, int64_t *out,
                  int count, int max) {
  if (at == s - 1) {
    if (count >= max) return count;
    f[at] = n;
    int64_t *o = out + (size_t)count * (size_t)nvalues;
    for (int q = 0; q < nvalues; q++) o[q] = base[q];
    for (int i = 0; i < s; i++) o[single[i]] = f[i];
    return count + 1;
  }
  for (int64_t d = 1; d <= n && count < max; d++)
    if (n % d == 0) {
      f[at] = d;
      count = tuples(n / d, at + 1, s, f, single, base, nvalues, out, count, max);
    }
  return count;
}

int dtl_grid_shapes(int64_t nranks, int ndims, const int *param, const int64_t *lit, const int64_t *values, int nvalues,
                    int64_t *out, int max) {
  char err[512];
  if (max < 1 || nvalues < 1) return 0;
  for (int q = 0; q < nvalues; q++) out[q] = values[q];
  if (ndims < 1 || ndims > DTL_MAX_DIMS || dtl_solve_grid(nranks, ndims, param, lit, out, NULL, err, sizeof err)) return 0;
  /* the unknown params used once, in order of first use */
  int single[DTL_MAX_DIMS], ns = 0;
  for (int d = 0; d < ndims; d++) {
    int p = param[d], uses = 0;
    if (p < 0 || p >= nvalues || values[p] != -1) continue;
    for (int e = 0; e < ndims; e++) uses += param[e] == p;
    if (uses == 1) single[ns++] = p;
  }
  if (ns < 2) return 1;
  int64_t rest = 1, f[DTL_MAX_DIMS];
  for (int i = 0; i < ns; i++) rest *= out[single[i]];
  /* shape 0 stays the solved one; the others follow, the solved one not repeated */
  int64_t *more = out + nvalues;
  int n = 1, m = tuples(rest, 0, ns, f, single, out, nvalues, more, 0, max - 1);
  for (int k = 0; k < m; k++) {
    const int64_t *o = more + (size_t)k * (size_t)nvalues;
    bool same = true;
    for (int i = 0; i < ns; i++) same &= o[single[i]] == out[single[i]];
    if (same) continue;
    if (n != k + 1)
      for (int q = 0; q < nvalues; q++) out[(size_t)n * (size_t)nvalues + q] = o[q];
    n++;
  }
  return n;
}

int dtl_group_in_node(int64_t per_node, int ndims, const int64_t *dims, const int64_t *coords, unsigned mask) {
  if (per_node <= 0)
    return 1;
  if (!mask)
    mask = ~0u;
  /* the group's lowest rank (its masked coords 0) and highest (theirs the last): one node
   * iff both are in the same block of per_node, every rank between them too */
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < ndims; d++) {
    int64_t n = dims[d] > 0 ? dims[d] : 1, c = coords[d] >= 0 && coords[d] < n ? coords[d] : 0;
    lo = lo * n + (mask >> d & 1 ? 0 : c);
    hi = hi * n + (mask >> d & 1 ? n - 1 : c);
  }
  return lo / per_node == hi / per_node;
}
