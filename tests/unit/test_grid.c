/* test_grid.c -- unit tests of the grid solver (dtl_solve_grid, distal/grid.h), the one
 * function that both plan_create of generated code and distalc --emit plan call.
 *
 * Every grid of 1 to 4 dims made of the literals 1, 2, 3 and params (repeated ones too:
 * grid(a, a), grid(a, a, b), grid(a, b, a, b), ...), with every param unknown and with the
 * first param known, is solved at 1 to 512 ranks and compared with a reference written here
 * from the rule that distal/grid.h documents, by brute force: roots by trying every value,
 * prime factors by trying every divisor, the balanced factors by running the documented
 * process on a list kept sorted.  Every solution must multiply to the rank count; every
 * balanced result must be one of all the non-increasing factorizations (enumerated) and
 * within the bound the process guarantees; a failure must leave the values alone and give
 * the runtime's message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "distal/grid.h"

enum { MAXN = 512, MAXK = 4 };

/* ---- the reference ---------------------------------------------------------------------- */

static bool is_prime(int64_t d) {
  if (d < 2) return false;
  for (int64_t e = 2; e < d; e++)
    if (d % e == 0) return false;
  return true;
}

/* v^m, or -1 past limit */
static int64_t power(int64_t v, int m, int64_t limit) {
  int64_t p = 1;
  for (int i = 0; i < m; i++) {
    p *= v;
    if (p > limit) return -1;
  }
  return p;
}

/* The largest v with v^m dividing n: every v from 1 to n tried. */
static int64_t ref_root_dividing(int64_t n, int m) {
  int64_t best = 1;
  for (int64_t v = 1; v <= n; v++) {
    int64_t p = power(v, m, n);
    if (p < 0) break;
    if (n % p == 0) best = v;
  }
  return best;
}

/* The documented process: the prime factors of n (every d from n down to 2 tried, as often
 * as it divides), largest first, each multiplying the smallest factor so far, on a list
 * kept non-increasing, so the smallest is always the last. */
static void ref_balanced(int64_t n, int k, int64_t *out) {
  for (int i = 0; i < k; i++) out[i] = 1;
  int64_t left = n;
  for (int64_t d = n; d >= 2; d--) {
    if (!is_prime(d)) continue;
    while (left % d == 0) {
      left /= d;
      out[k - 1] *= d;
      for (int i = k - 1; i > 0 && out[i] > out[i - 1]; i--) {
        int64_t t = out[i];
        out[i] = out[i - 1];
        out[i - 1] = t;
      }
    }
  }
}

/* Every non-increasing factorization of n into k factors (brute force), counted; *found
 * set when want is one of them. */
static int factorizations(int64_t n, int k, int64_t cap, const int64_t *want, bool match, bool *found) {
  if (k == 1) {
    if (n > cap) return 0;
    if (match && want[0] == n) *found = true;
    return 1;
  }
  int count = 0;
  for (int64_t f = 1; f <= n && f <= cap; f++)
    if (n % f == 0) count += factorizations(n / f, k - 1, f, want + 1, match && want[0] == f, found);
  return count;
}

static int64_t largest_prime(int64_t n) {
  int64_t best = 1;
  for (int64_t d = 2; d <= n; d++)
    if (n % d == 0 && is_prime(d)) best = d;
  return best;
}

/* The reference tables: roots[n][m] and balanced[n][k] for n <= MAXN. */
static int64_t roots[MAXN + 1][MAXK + 1];
static int64_t balanced[MAXN + 1][MAXK + 1][MAXK];

static int setup_tables(void **state) {
  (void)state;
  for (int64_t n = 1; n <= MAXN; n++)
    for (int m = 1; m <= MAXK; m++) {
      roots[n][m] = ref_root_dividing(n, m);
      ref_balanced(n, m, balanced[n][m]);
    }
  return 0;
}

static const char *const NAMES[] = {"a", "b", "c", "d"};

/* The reference solution of the whole grid: 0 and the values, or 1 and the reason that
 * follows "P ranks cannot form grid(...): ". */
static int ref_solve(int64_t nranks, int nd, const int *param, const int64_t *lit, int64_t *values, char *why,
                     size_t whylen) {
  int64_t known = 1;
  int uses[4] = {0}, order[4], nu = 0; /* unknown params in order of first use */
  for (int d = 0; d < nd; d++) {
    if (param[d] >= 0 && values[param[d]] == -1) {
      if (uses[param[d]]++ == 0) order[nu++] = param[d];
    } else {
      known *= param[d] < 0 ? lit[d] : values[param[d]];
    }
  }
  if (known > nranks || nranks % known || (nu == 0 && known != nranks)) {
    if (nu == 0 || known > nranks) snprintf(why, whylen, "the grid has %lld processors", (long long)known);
    else snprintf(why, whylen, "%lld is not a multiple of %lld", (long long)nranks, (long long)known);
    return 1;
  }
  int64_t rest = nranks / known, v[4] = {0};
  if (nu == 1 && uses[order[0]] > 1) {
    int m = uses[order[0]];
    int64_t r = 0;
    for (int64_t x = 1; x <= rest && !r; x++)
      if (power(x, m, rest) == rest) r = x;
    if (!r) {
      snprintf(why, whylen, "%lld is not a %s", (long long)rest, m == 2 ? "square" : m == 3 ? "cube" : "4th power");
      return 1;
    }
    v[order[0]] = r;
  } else {
    int single[4], ns = 0;
    for (int i = 0; i < nu; i++) {
      int p = order[i];
      if (uses[p] == 1) {
        single[ns++] = p;
        continue;
      }
      v[p] = roots[rest][uses[p]];
      rest /= power(v[p], uses[p], rest);
    }
    if (ns == 0 && rest != 1) {
      snprintf(why, whylen, "no integer values fit");
      return 1;
    }
    for (int i = 0; i < ns; i++) v[single[i]] = balanced[rest][ns][i];
  }
  for (int i = 0; i < nu; i++) values[order[i]] = v[order[i]];
  return 0;
}

static void grid_text(char *buf, size_t len, int nd, const int *param, const int64_t *lit) {
  size_t at = (size_t)snprintf(buf, len, "grid(");
  for (int d = 0; d < nd; d++)
    at += param[d] < 0 ? (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "", (long long)lit[d])
                       : (size_t)snprintf(buf + at, len - at, "%s%s", d ? ", " : "", NAMES[param[d]]);
  snprintf(buf + at, len - at, ")");
}

/* ---- tests ---------------------------------------------------------------------------- */

/* The reference's balanced factors are factorizations, within the bound of the process
 * (the largest at most the smallest times the largest prime factor), and known cases. */
static void test_reference(void **state) {
  (void)state;
  for (int64_t n = 1; n <= MAXN; n++)
    for (int k = 1; k <= MAXK; k++) {
      const int64_t *b = balanced[n][k];
      bool found = false;
      int count = factorizations(n, k, n, b, true, &found);
      assert_true(count >= 1);
      if (!found) fail_msg("%lld over %d dims: the reference's factors are no factorization", (long long)n, k);
      if (b[0] > b[k - 1] * largest_prime(n))
        fail_msg("%lld over %d dims: %lld > %lld * %lld", (long long)n, k, (long long)b[0], (long long)b[k - 1],
                 (long long)largest_prime(n));
    }
  /* what Open MPI's MPI_Dims_create returns for these (72 over 2 dims: 12 x 6, not 9 x 8) */
  static const struct {
    int64_t n;
    int k;
    int64_t f[4];
  } known[] = {
      {1, 4, {1, 1, 1, 1}}, {7, 2, {7, 1}},   {12, 3, {3, 2, 2}},    {16, 3, {4, 2, 2}},   {30, 3, {5, 3, 2}},
      {36, 2, {6, 6}},      {72, 2, {12, 6}}, {180, 2, {18, 10}},    {64, 4, {4, 4, 2, 2}}, {360, 3, {10, 6, 6}},
      {512, 2, {32, 16}},   {210, 2, {15, 14}}, {96, 3, {6, 4, 4}},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    for (int d = 0; d < known[i].k; d++)
      if (balanced[known[i].n][known[i].k][d] != known[i].f[d])
        fail_msg("%lld over %d dims: dim %d is %lld, expected %lld", (long long)known[i].n, known[i].k, d,
                 (long long)balanced[known[i].n][known[i].k][d], (long long)known[i].f[d]);
}

/* The solver against the reference over every grid of the table at 1..MAXN ranks. */
static void test_table(void **state) {
  (void)state;
  /* each dim: a literal 1, 2 or 3 (choice 0..2), or a param (choice 3 + index), params
   * numbered in order of first appearance so that each shape occurs once */
  long grids = 0, solved = 0, failed = 0;
  for (int nd = 1; nd <= 4; nd++) {
    int choice[4] = {0};
    for (;;) {
      int param[4], maxp = -1;
      int64_t lit[4];
      bool canonical = true;
      for (int d = 0; d < nd; d++) {
        if (choice[d] < 3) {
          param[d] = -1;
          lit[d] = choice[d] + 1;
        } else {
          param[d] = choice[d] - 3;
          lit[d] = 0;
          if (param[d] > maxp + 1) canonical = false;
          if (param[d] > maxp) maxp = param[d];
        }
      }
      /* variants: every param unknown; the first param known (2); known as 3 */
      for (int variant = 0; canonical && variant < (maxp >= 0 ? 3 : 1); variant++) {
        grids++;
        char text[64], label[96];
        grid_text(text, sizeof text, nd, param, lit);
        snprintf(label, sizeof label, "%s%s", text, variant == 1 ? " with a = 2" : variant == 2 ? " with a = 3" : "");
        for (int64_t p = 1; p <= MAXN; p++) {
          int64_t got[4] = {-1, -1, -1, -1}, want[4] = {-1, -1, -1, -1};
          if (variant) got[0] = want[0] = variant + 1;
          char err[256] = "", why[128] = "";
          int rc = dtl_solve_grid(p, nd, param, lit, got, NAMES, err, sizeof err);
          int rrc = ref_solve(p, nd, param, lit, want, why, sizeof why);
          if (rc != rrc)
            fail_msg("%s at %lld ranks: solver %s, reference %s", label, (long long)p, rc ? err : "solves",
                     rrc ? why : "solves");
          if (rc) {
            char msg[256];
            snprintf(msg, sizeof msg, "%lld %s cannot form %s: %s", (long long)p, p == 1 ? "rank" : "ranks", text, why);
            if (strcmp(err, msg)) fail_msg("message '%s', expected '%s'", err, msg);
            for (int i = 0; i < 4; i++)
              if (got[i] != want[i]) fail_msg("%s at %lld ranks: a failure changed value %d", label, (long long)p, i);
            failed++;
            continue;
          }
          int64_t prod = 1;
          for (int d = 0; d < nd; d++) prod *= param[d] < 0 ? lit[d] : got[param[d]];
          if (prod != p) fail_msg("%s at %lld ranks: the dims multiply to %lld", label, (long long)p, (long long)prod);
          for (int i = 0; i < 4; i++)
            if (got[i] != want[i])
              fail_msg("%s at %lld ranks: %s is %lld, the reference says %lld", label, (long long)p, NAMES[i],
                       (long long)got[i], (long long)want[i]);
          solved++;
        }
      }
      int d = nd - 1; /* next choice vector */
      while (d >= 0 && ++choice[d] == 3 + nd) choice[d--] = 0;
      if (d < 0) break;
    }
  }
  /* the table is what it claims: many grids, both outcomes */
  assert_true(grids > 1000);
  assert_true(solved > 50000 && failed > 50000);
}

/* Cases the table does not reach: more dims, a param used four times, messages. */
static void test_cases(void **state) {
  (void)state;
  char err[256];
  int prm[8] = {0, 0, 0, 0, 1, 2, 3, 0};
  int64_t lit[8] = {0};
  int64_t v[4] = {-1, -1, -1, -1};
  assert_int_equal(dtl_solve_grid(81, 4, prm, lit, v, NAMES, err, sizeof err), 0);
  assert_int_equal(v[0], 3);
  v[0] = -1;
  assert_int_not_equal(dtl_solve_grid(8, 4, prm, lit, v, NAMES, err, sizeof err), 0);
  assert_string_equal(err, "8 ranks cannot form grid(a, a, a, a): 8 is not a 4th power");
  assert_int_equal(v[0], -1);
  int all[8] = {0, 1, 2, 3, 0, 1, 2, 3}; /* grid(a, b, c, d, a, b, c, d) */
  assert_int_equal(dtl_solve_grid(1296, 8, all, lit, v, NAMES, err, sizeof err), 0);
  assert_true(v[0] == 36 && v[1] == 1 && v[2] == 1 && v[3] == 1); /* a takes every factor first */
  int nine[9] = {0};
  assert_int_not_equal(dtl_solve_grid(1, 9, nine, lit, v, NAMES, err, sizeof err), 0);
  assert_string_equal(err, "a grid has 1 to 8 dims, not 9");
  /* a rank count past what an int holds still factors: 2^40 ranks, 2^20 x 2^20 */
  int two[2] = {0, 1};
  int64_t w[2] = {-1, -1};
  assert_int_equal(dtl_solve_grid(INT64_C(1) << 40, 2, two, lit, w, NAMES, err, sizeof err), 0);
  assert_true(w[0] == INT64_C(1) << 20 && w[1] == INT64_C(1) << 20);
}

/* A machine of two levels, grid(a, b) of nodes over grid(c) or grid(2, c) of ranks: the inner
 * dims over a node's ranks, level 0 over the nodes; flat machines as dtl_solve_grid; and the
 * messages of each part. */
static void test_machine(void **state) {
  (void)state;
  static const char *const names[] = {"a", "b", "c"};
  char err[600];
  for (int64_t nodes = 1; nodes <= 12; nodes++)
    for (int64_t per = 1; per <= 8; per++) {
      int param[3] = {0, 1, 2};
      int64_t lit[3] = {0, 0, 0}, v[3] = {-1, -1, -1}, w[3] = {-1, -1, -1};
      assert_int_equal(dtl_solve_machine(nodes * per, per, 3, 1, param, lit, v, names, err, sizeof err), 0);
      assert_int_equal(v[2], per);
      assert_int_equal(v[0] * v[1], nodes);
      assert_int_equal(dtl_solve_grid(nodes, 2, param, lit, w, names, err, sizeof err), 0);
      assert_int_equal(v[0], w[0]);
      assert_int_equal(v[1], w[1]);
      /* flat: the same as dtl_solve_grid over every rank */
      int64_t f[3] = {-1, -1, -1}, g[3] = {-1, -1, -1};
      int rf = dtl_solve_machine(nodes * per, nodes * per, 3, 0, param, lit, f, names, err, sizeof err);
      int rg = dtl_solve_grid(nodes * per, 3, param, lit, g, names, err, sizeof err);
      assert_int_equal(rf, rg);
      for (int k = 0; k < 3; k++) assert_int_equal(f[k], g[k]);
      /* a literal inner level needs exactly its ranks per node */
      int p2[3] = {0, 1, -1};
      int64_t l2[3] = {0, 0, 2}, x[3] = {-1, -1, -1};
      int r = dtl_solve_machine(nodes * per, per, 3, 1, p2, l2, x, names, err, sizeof err);
      if (per == 2) {
        assert_int_equal(r, 0);
        assert_int_equal(x[0] * x[1], nodes);
      } else {
        assert_int_not_equal(r, 0);
        assert_non_null(strstr(err, "the inner levels of the machine need 2 ranks per node"));
      }
    }
  int param[2] = {0, -1};
  int64_t lit[2] = {0, 3}, v[3] = {-1, -1, -1};
  assert_int_not_equal(dtl_solve_machine(8, 3, 2, 1, param, lit, v, names, err, sizeof err), 0);
  assert_non_null(strstr(err, "8 ranks do not split into nodes of 3 ranks"));
  int pq[3] = {0, 0, 2};
  int64_t lq[3] = {0, 0, 0}, q[3] = {-1, -1, -1};
  assert_int_not_equal(dtl_solve_machine(12, 4, 3, 1, pq, lq, q, names, err, sizeof err), 0);
  assert_non_null(strstr(err, "the nodes do not fit level 0 (counting nodes, not ranks): 3 nodes cannot form"));
  assert_int_equal(q[0], -1);
}

/* The shapes --auto chooses among (dtl_grid_shapes): shape 0 the solver's, then every other
 * assignment of the params used once, each product right, none twice, for 1..64 ranks over
 * grid(a, b), grid(a, b, c), grid(a, 2, b) and grid(q, q, a, b) (q solved first, a and b
 * sharing the rest); one shape where fewer than two params are free, none where the ranks
 * do not form the grid, at most `max`. */
static void test_shapes(void **state) {
  (void)state;
  static int64_t out[4096 * 4];
  const int grids[4][4] = {{0, 1}, {0, 1, 2}, {0, -1, 1}, {0, 0, 1, 2}};
  const int nd[4] = {2, 3, 3, 4}, nfree[4] = {2, 3, 2, 2};
  const int64_t lit[4] = {0, 2, 0, 0};
  for (int g = 0; g < 4; g++)
    for (int64_t p = 1; p <= 64; p++) {
      int64_t v[4] = {-1, -1, -1, -1}, solved[4] = {-1, -1, -1, -1};
      int64_t l2[4] = {0, g == 2 ? lit[1] : 0, 0, 0};
      char err[256];
      int ok = dtl_solve_grid(p, nd[g], grids[g], l2, solved, NAMES, err, sizeof err) == 0;
      int n = dtl_grid_shapes(p, nd[g], grids[g], l2, v, 4, out, 4096);
      assert_int_equal(v[0], -1); /* not changed */
      if (!ok) {
        assert_int_equal(n, 0);
        continue;
      }
      assert_true(n >= 1);
      for (int q = 0; q < 4; q++) assert_int_equal(out[q], solved[q]);
      /* the free params' product: what the solver gave them together */
      int first = g == 3 ? 1 : 0;
      int64_t rest = 1, want = 0;
      for (int q = first; q < first + nfree[g]; q++) rest *= solved[q];
      for (int64_t d = 1; d <= rest; d++) /* count the ordered tuples */
        if (nfree[g] == 2) want += rest % d == 0;
        else if (rest % d == 0)
          for (int64_t e = 1; e <= rest / d; e++) want += (rest / d) % e == 0;
      assert_int_equal(n, want);
      for (int k = 0; k < n; k++) {
        const int64_t *o = out + 4 * k;
        int64_t prod = 1;
        for (int q = first; q < first + nfree[g]; q++) prod *= o[q];
        assert_int_equal(prod, rest);
        if (g == 3) assert_int_equal(o[0], solved[0]);
        for (int j = 0; j < k; j++) assert_memory_not_equal(o, out + 4 * j, 4 * sizeof *o);
      }
    }
  /* one free param: one shape; the given value stays */
  int prm[2] = {0, 1};
  int64_t lit2[2] = {0, 0}, v[2] = {4, -1};
  assert_int_equal(dtl_grid_shapes(12, 2, prm, lit2, v, 2, out, 100), 1);
  assert_true(out[0] == 4 && out[1] == 3);
  /* at most max */
  int64_t w[2] = {-1, -1};
  assert_int_equal(dtl_grid_shapes(64, 2, prm, lit2, w, 2, out, 3), 3);
  assert_true(out[0] == 8 && out[1] == 8 && out[2] == 1 && out[3] == 64 && out[4] == 2 && out[5] == 32);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_machine),
      cmocka_unit_test(test_shapes),
  };
  return cmocka_run_group_tests(tests, setup_tables, NULL);
}
