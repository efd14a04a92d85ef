/* mpi_checks.h -- checks for cmocka tests that run under mpirun: every rank records its
 * first failed CHECK / CHECKF, and all_ok() (collective over MPI_COMM_WORLD) fails the test
 * on every rank when any rank failed, with rank 0 printing each failing rank's first
 * message.  Include after <cmocka.h> and <mpi.h>; set g_rank and g_size in main. */
#ifndef DISTAL_TESTS_MPI_CHECKS_H
#define DISTAL_TESTS_MPI_CHECKS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int g_rank, g_size;

/* ---- checks that agree across ranks ------------------------------------------------------ */
static int g_fail;
static char g_first[400];

static void note_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_fail(const char *file, int line, const char *fmt, ...) {
  if (g_fail++)
    return;
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(g_first, sizeof g_first, "%s:%d: %s", file, line, msg);
}

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      note_fail(__FILE__, __LINE__, "%s", #cond);                                                  \
  } while (0)
#define CHECKF(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      note_fail(__FILE__, __LINE__, __VA_ARGS__);                                                  \
  } while (0)

static void all_ok(void) {
  int f = g_fail, total = 0;
  char mine[400], *all = g_rank == 0 ? calloc((size_t)g_size, sizeof mine) : NULL;
  snprintf(mine, sizeof mine, "%s", g_fail ? g_first : "");
  MPI_Allreduce(&f, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Gather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, 0, MPI_COMM_WORLD);
  g_fail = 0;
  if (g_rank == 0 && total)
    for (int r = 0; r < g_size; r++)
      if (all[r * sizeof mine])
        print_error("  rank %d of %d: %s\n", r, g_size, all + r * sizeof mine);
  free(all);
  if (total)
    fail_msg("%d check(s) failed across %d ranks", total, g_size);
}

#endif
