/* pdgemm.c -- distal_pdgemm: PDGEMM's arguments, a generated SUMMA kernel's computation.
 *
 * The BLACS context of descc gives the grid and, through its system handle, the MPI
 * communicator; the generated kernel (pdgemm.dtl, compiled at build time into
 * pdgemm_kernel.c) runs on a communicator of the grid's processes.  op(sub(A)) and
 * op(sub(B)) are imported into the kernel's distribution and the product is exported into
 * sub(C) with alpha and beta, by the runtime's block-cyclic exchanges (dtl_scalapack_*),
 * so that nothing is gathered on one process. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distal/scalapack.h"
#include "pdgemm_kernel.h"

/* BLACS, from ScaLAPACK (which has no header for them) */
void Cblacs_gridinfo(int ictxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_get(int ictxt, int what, int *val);
MPI_Comm Cblacs2sys_handle(int sysctxt);
int Cblacs_pnum(int ictxt, int prow, int pcol);

/* What this process knows of its grid. */
typedef struct {
  int ctxt, nprow, npcol, myrow, mycol;
} grid_info;

/* A kept plan: the kernel for one communicator and shape, and its blocks. */
typedef struct {
  int ctxt;
  MPI_Comm comm; /* of the grid's processes; owned */
  int m, n, k;
  distal_mm_plan *plan;
  double *A, *B, *C;
  unsigned long used; /* the call that last used it */
} kept_plan;

/* Plans are kept per communicator; a new shape on a communicator that has PLANS_PER_COMM
 * replaces its least recently used one (every process of the grid makes the same choice, so
 * the collective destroy is safe). */
enum { MAX_KEPT = 32, PLANS_PER_COMM = 4 };
static kept_plan kept[MAX_KEPT];
static int nkept;
static unsigned long calls;
static char last_error[512];

const char *distal_pdgemm_error(void) { return last_error; }

static void fail(const grid_info *g, const char *fmt, const char *detail) {
  snprintf(last_error, sizeof last_error, fmt, detail);
  if (g->myrow == 0 && g->mycol == 0) fprintf(stderr, "distal_pdgemm: %s\n", last_error);
}

static void kept_release(kept_plan *p) {
  distal_mm_plan_destroy(&p->plan);
  free(p->A), free(p->B), free(p->C);
  memset(p, 0, sizeof *p);
}

/* The communicator of the grid's processes: the system communicator of the context when the
 * grid covers it, else the group of the grid's processes in it (MPI_Comm_create_group is
 * collective over the group only, as this call is). */
static int grid_comm(const grid_info *g, MPI_Comm *out) {
  int sys, size;
  Cblacs_get(g->ctxt, 10, &sys);
  MPI_Comm syscomm = Cblacs2sys_handle(sys);
  if (MPI_Comm_size(syscomm, &size) != MPI_SUCCESS) return 1;
  if (size == g->nprow * g->npcol) return MPI_Comm_dup(syscomm, out) != MPI_SUCCESS;
  int *ranks = malloc((size_t)g->nprow * g->npcol * sizeof *ranks);
  if (!ranks) return 1;
  for (int r = 0; r < g->nprow; r++)
    for (int c = 0; c < g->npcol; c++) ranks[r * g->npcol + c] = Cblacs_pnum(g->ctxt, r, c);
  MPI_Group world, grp;
  int rc = MPI_Comm_group(syscomm, &world) != MPI_SUCCESS ||
           MPI_Group_incl(world, g->nprow * g->npcol, ranks, &grp) != MPI_SUCCESS;
  free(ranks);
  if (rc) return 1;
  rc = MPI_Comm_create_group(syscomm, grp, 0x5ca1, out) != MPI_SUCCESS;
  MPI_Group_free(&grp), MPI_Group_free(&world);
  return rc;
}

static double *block_alloc(int64_t count) { return malloc((size_t)(count > 0 ? count : 1) * sizeof(double)); }

static kept_plan *plan_create(const grid_info *g, MPI_Comm comm, int m, int n, int k) {
  kept_plan p = {g->ctxt, comm, m, n, k, NULL, NULL, NULL, NULL, 0};
  distal_mm_params prm;
  distal_mm_params_default(&prm);
  prm.m = m, prm.n = n, prm.k = k;
  if (distal_mm_plan_create(comm, &prm, &p.plan)) {
    fail(g, "plan: %s", distal_mm_error(p.plan));
    distal_mm_plan_destroy(&p.plan);
    return NULL;
  }
  p.A = block_alloc(distal_mm_A_block(p.plan, NULL, NULL));
  p.B = block_alloc(distal_mm_B_block(p.plan, NULL, NULL));
  p.C = block_alloc(distal_mm_C_block(p.plan, NULL, NULL));
  int oom = !p.A || !p.B || !p.C, any = 0;
  MPI_Allreduce(&oom, &any, 1, MPI_INT, MPI_MAX, comm);
  if (any || nkept == MAX_KEPT) {
    fail(g, "%s", any ? "out of memory" : "too many communicators");
    kept_release(&p);
    return NULL;
  }
  const char *v = getenv("DISTAL_PDGEMM_VERBOSE");
  if (v && *v && strcmp(v, "0") && g->myrow == 0 && g->mycol == 0) {
    int size;
    MPI_Comm_size(comm, &size);
    fprintf(stderr, "distal_pdgemm: plan for %d x %d x %d on %d ranks\n", m, n, k, size);
  }
  kept[nkept] = p;
  return &kept[nkept++];
}

/* The plan for this grid and shape: kept, or made (and kept). */
static kept_plan *plan_for(const grid_info *g, int m, int n, int k) {
  kept_plan *lru = NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int same_comm = 0;
  for (int i = 0; i < nkept; i++) {
    if (kept[i].ctxt != g->ctxt) continue;
    if (kept[i].m == m && kept[i].n == n && kept[i].k == k) return &kept[i];
    comm = kept[i].comm, same_comm++;
    if (!lru || kept[i].used < lru->used) lru = &kept[i];
  }
  if (same_comm >= PLANS_PER_COMM) { /* reuse the slot of the least recently used */
    distal_mm_plan_destroy(&lru->plan);
    free(lru->A), free(lru->B), free(lru->C);
    *lru = kept[--nkept];
    memset(&kept[nkept], 0, sizeof kept[nkept]);
  }
  if (comm == MPI_COMM_NULL && grid_comm(g, &comm)) {
    fail(g, "%s", "cannot form the communicator of the BLACS grid");
    return NULL;
  }
  kept_plan *p = plan_create(g, comm, m, n, k);
  if (!p && !same_comm) MPI_Comm_free(&comm);
  return p;
}

void distal_pdgemm_free(void) {
  for (int i = 0; i < nkept; i++) {
    MPI_Comm comm = kept[i].comm;
    int last = 1;
    for (int j = i + 1; j < nkept; j++) last &= kept[j].comm != comm;
    kept_release(&kept[i]);
    if (last) MPI_Comm_free(&comm);
  }
  nkept = 0;
}

static int global_index(int l, int nb, int p, int src, int np) {
  return (l / nb) * nb * np + ((np + p - src) % np) * nb + l % nb;
}

/* sub(C) = beta sub(C) on this process's elements (alpha = 0 or k = 0: no product). */
static void scale_local(const grid_info *g, int m, int n, double beta, double *c, int ic, int jc,
                        const int *descc) {
  if (beta == 1) return;
  int M = descc[2], N = descc[3], mb = descc[4], nb = descc[5], lld = descc[8];
  int rows = 0, cols = 0;
  for (int l = 0; global_index(l, mb, g->myrow, descc[6], g->nprow) < M; l++) rows = l + 1;
  for (int l = 0; global_index(l, nb, g->mycol, descc[7], g->npcol) < N; l++) cols = l + 1;
  for (int lc = 0; lc < cols; lc++) {
    int gj = global_index(lc, nb, g->mycol, descc[7], g->npcol) - (jc - 1);
    if (gj < 0 || gj >= n) continue;
    for (int lr = 0; lr < rows; lr++) {
      int gi = global_index(lr, mb, g->myrow, descc[6], g->nprow) - (ic - 1);
      if (gi < 0 || gi >= m) continue;
      double *e = &c[lr + (size_t)lc * lld];
      *e = beta == 0 ? 0 : beta * *e;
    }
  }
}

static bool trans_ok(char t) { return strchr("NnTtCc", t) && t; }

/* The checks PDGEMM makes before any communication (the same on every process). */
static const char *check_args(char ta, char tb, int m, int n, int k, const int *desca,
                              const int *descb, const int *descc) {
  if (!trans_ok(ta)) return "transa is not 'N', 'T' or 'C'";
  if (!trans_ok(tb)) return "transb is not 'N', 'T' or 'C'";
  if (m < 0 || n < 0 || k < 0) return "m, n and k must not be negative";
  if (desca[1] != descc[1] || descb[1] != descc[1]) return "the descriptors belong to different contexts";
  return NULL;
}

void distal_pdgemm(const char *transa, const char *transb, const int *m, const int *n, const int *k,
                   const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
                   const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
                   double *c, const int *ic, const int *jc, const int *descc) {
  grid_info g = {descc[1], -1, -1, -1, -1};
  Cblacs_gridinfo(g.ctxt, &g.nprow, &g.npcol, &g.myrow, &g.mycol);
  last_error[0] = '\0';
  if (g.myrow < 0 || g.mycol < 0) return; /* not in the grid */
  const char *bad = check_args(*transa, *transb, *m, *n, *k, desca, descb, descc);
  if (bad) {
    fail(&g, "%s", bad);
    return;
  }
  if (*m == 0 || *n == 0) return;
  if (*k == 0 || *alpha == 0) {
    scale_local(&g, *m, *n, *beta, c, *ic, *jc, descc);
    return;
  }
  kept_plan *p = plan_for(&g, *m, *n, *k);
  if (!p) return;
  p->used = ++calls;
  distal_mm_plan *plan = p->plan;
  const char *stage = NULL;
  if (distal_mm_A_import_scalapack(plan, *transa, a, *ia, *ja, desca, g.myrow, g.mycol, p->A)) stage = "A";
  else if (distal_mm_B_import_scalapack(plan, *transb, b, *ib, *jb, descb, g.myrow, g.mycol, p->B)) stage = "B";
  else if (distal_mm_compute(plan, p->C, p->A, p->B)) stage = "multiply";
  else if (distal_mm_C_export_scalapack(plan, 'N', *alpha, p->C, *beta, c, *ic, *jc, descc, g.myrow, g.mycol))
    stage = "C";
  if (stage) {
    char msg[sizeof last_error];
    snprintf(msg, sizeof msg, "%s: %s", stage, distal_mm_error(plan));
    fail(&g, "%s", msg);
  }
}
