/* test_gpu_assign.c -- unit tests of dtl_gpu_assign (distal/cuda.h), the matching of a
 * node's ranks to its GPUs behind dtl_cuda_select_device: locality first, collisions
 * resolved in local-rank order, fallback to any free GPU, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <distal/cuda.h>

#define MAXG 16

/* near matrix from rows of '0'/'1' characters, one string per rank */
static void parse_near(int nranks, int ngpus, const char *const *rows, unsigned char *near) {
  for (int r = 0; r < nranks; r++) {
    assert_int_equal((int)strlen(rows[r]), ngpus);
    for (int g = 0; g < ngpus; g++)
      near[r * ngpus + g] = rows[r][g] == '1';
  }
}

static void expect_assign(int nranks, int ngpus, const char *const *rows, const int *want) {
  unsigned char near[MAXG * MAXG];
  int out[MAXG];
  if (rows)
    parse_near(nranks, ngpus, rows, near);
  assert_int_equal(dtl_gpu_assign(nranks, ngpus, rows ? near : NULL, out), 0);
  for (int r = 0; r < nranks; r++)
    assert_int_equal(out[r], want[r]);
}

/* No locality information: ranks take the GPUs in order. */
static void test_in_order(void **state) {
  (void)state;
  const int want[] = {0, 1, 2, 3};
  expect_assign(4, 4, NULL, want);
  const char *const none[] = {"0000", "0000", "0000", "0000"};
  expect_assign(4, 4, none, want);
  /* every GPU near every rank (an unbound process): the same */
  const char *const all[] = {"1111", "1111", "1111", "1111"};
  expect_assign(4, 4, all, want);
}

/* Two sockets, two GPUs each; ranks bound to the far socket first. */
static void test_locality(void **state) {
  (void)state;
  const char *const rows[] = {"0011", "0011", "1100", "1100"};
  const int want[] = {2, 3, 0, 1};
  expect_assign(4, 4, rows, want);
  /* one rank per socket on a 4-GPU node: the first GPU of its own socket */
  const char *const two[] = {"0011", "1100"};
  const int want2[] = {2, 0};
  expect_assign(2, 4, two, want2);
}

/* Ranks that all want the same GPU: the first gets it, the others the lowest free. */
static void test_collisions(void **state) {
  (void)state;
  const char *const rows[] = {"0100", "0100", "0100", "0100"};
  const int want[] = {1, 0, 2, 3};
  expect_assign(4, 4, rows, want);
  /* near GPUs taken by earlier ranks: the next near one, else the lowest free */
  const char *const rows2[] = {"0110", "0100", "0110", "0000"};
  const int want2[] = {1, 0, 2, 3};
  expect_assign(4, 4, rows2, want2);
}

/* A near GPU that is free beats a lower-numbered free one that is not near. */
static void test_near_beats_lower(void **state) {
  (void)state;
  const char *const rows[] = {"00000001", "00000011", "00001111"};
  const int want[] = {7, 6, 4};
  expect_assign(3, 8, rows, want);
}

/* Fewer ranks than GPUs: GPUs are left over, none is shared. */
static void test_fewer_ranks(void **state) {
  (void)state;
  const char *const rows[] = {"00001111", "00001111"};
  const int want[] = {4, 5};
  expect_assign(2, 8, rows, want);
  const int one[] = {0};
  expect_assign(1, 8, NULL, one);
  expect_assign(1, 1, NULL, one);
  /* no ranks: nothing to do */
  int out[1] = {-7};
  assert_int_equal(dtl_gpu_assign(0, 2, NULL, out), 0);
  assert_int_equal(out[0], -7);
}

static void test_errors(void **state) {
  (void)state;
  int out[MAXG];
  unsigned char near[MAXG * MAXG] = {0};
  /* more ranks than GPUs (NCCL needs one GPU per rank) */
  assert_int_not_equal(dtl_gpu_assign(3, 2, near, out), 0);
  assert_int_not_equal(dtl_gpu_assign(5, 4, NULL, out), 0);
  /* one GPU, many ranks */
  assert_int_not_equal(dtl_gpu_assign(2, 1, NULL, out), 0);
  assert_int_not_equal(dtl_gpu_assign(8, 1, near, out), 0);
  /* no GPU at all */
  assert_int_not_equal(dtl_gpu_assign(1, 0, NULL, out), 0);
  assert_int_not_equal(dtl_gpu_assign(0, 0, NULL, out), 0);
  assert_int_not_equal(dtl_gpu_assign(1, -1, NULL, out), 0);
  /* a negative rank count */
  assert_int_not_equal(dtl_gpu_assign(-1, 2, NULL, out), 0);
}

/* Properties over many pseudo-random near matrices: the GPUs are distinct and in range,
 * and each rank in turn got the lowest free near GPU when one was free, else the lowest free
 * GPU (the documented rule, replayed independently). */
static void test_random(void **state) {
  (void)state;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int trial = 0; trial < 2000; trial++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int ngpus = 1 + (int)(x % MAXG), nranks = (int)((x >> 8) % (uint64_t)(ngpus + 1));
    unsigned char near[MAXG * MAXG];
    for (int i = 0; i < nranks * ngpus; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      near[i] = (x & 3) == 0;
    }
    int out[MAXG];
    assert_int_equal(dtl_gpu_assign(nranks, ngpus, near, out), 0);
    bool used[MAXG] = {false};
    for (int r = 0; r < nranks; r++) {
      int expect = -1;
      for (int g = 0; g < ngpus && expect < 0; g++)
        if (near[r * ngpus + g] && !used[g])
          expect = g;
      for (int g = 0; g < ngpus && expect < 0; g++)
        if (!used[g])
          expect = g;
      assert_int_equal(out[r], expect);
      assert_true(out[r] >= 0 && out[r] < ngpus);
      assert_false(used[out[r]]);
      used[out[r]] = true;
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_in_order),       cmocka_unit_test(test_locality),
      cmocka_unit_test(test_collisions),     cmocka_unit_test(test_near_beats_lower),
      cmocka_unit_test(test_fewer_ranks),    cmocka_unit_test(test_errors),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
