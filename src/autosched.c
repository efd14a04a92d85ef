/* autosched.c -- distalc --auto and --emit schedule (autosched.h). */
#include "autosched.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A rank of a cluster node: about 5 GB/s received, 2 us per message, 0.4 ns per loop
 * iteration (a fused multiply-add at a few GFLOP/s), 10 GB/s from its memory and 100 ns per
 * stored entry of a sparse box it receives (sorted into its piece: a CSR matrix's redistribution
 * measured 110 to 120 ns per received entry on 2 and 4 ranks of one node), in the proportions
 * that decide between schedules (the absolute values only scale the predictions). */
const dc_machine_model dc_default_model = {
    .bandwidth = 5e9, .latency = 2e-6, .point_time = 4e-10, .memory_bandwidth = 1e10, .threads = 1, .sparse_entry_time = 1e-7};

/* A rank of a GPU machine (the CUDA target): about 25 GB/s received through NCCL (a
 * 200 Gb/s network; NVLink within a node is faster), 10 us per message (NCCL's launch and
 * synchronization), and 0.01 ns per iteration of a generated kernel (a GPU's thousands of
 * threads at its memory bandwidth): communication weighs 40 times more against the local
 * work than on a CPU rank, so the search prefers the schedules that move less; 2 TB/s from the
 * GPU's memory. */
const dc_machine_model dc_gpu_model = {
    .bandwidth = 2.5e10, .latency = 1e-5, .point_time = 1e-11, .memory_bandwidth = 2e12, .threads = 1, .sparse_entry_time = 1e-7};

const dc_machine_model *dc_target_model(const dc_unit *u) { return u->cuda ? &dc_gpu_model : &dc_default_model; }

bool dc_read_model(const char *path, dc_machine_model *m, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: error: cannot read the machine model: %s", path, strerror(errno));
    return false;
  }
  char line[512];
  bool seen[8] = {false};
  for (int ln = 1; fgets(line, sizeof line, f); ln++) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char name[64], extra[8];
    double v;
    int n = sscanf(line, "%63s %lf %7s", name, &v, extra);
    if (n <= 0) continue; /* blank */
    static const char *names[] = {"bandwidth",      "latency",      "point_time",  "threads", "memory_bandwidth",
                                  "node_bandwidth", "node_latency", "sparse_entry_time"};
    int k = -1;
    for (int q = 0; q < 8; q++)
      if (!strcmp(name, names[q])) k = q;
    const char *why = k < 0 ? "unknown name (bandwidth, latency, point_time, memory_bandwidth, threads, node_bandwidth, node_latency "
                              "or sparse_entry_time)"
                      : n != 2 ? "expected NAME VALUE"
                      : !(isfinite(v) && v > 0) ? "the value must be a positive number"
                      : k == 3 && (v != floor(v) || v > 4096) ? "threads must be a whole number up to 4096"
                      : seen[k] ? "given twice" : NULL;
    if (why) {
      snprintf(err, errlen, "%s:%d: error: %s: %s", path, ln, why, k < 0 ? name : names[k]);
      fclose(f);
      return false;
    }
    seen[k] = true;
    if (k == 0) m->bandwidth = v;
    else if (k == 1) m->latency = v;
    else if (k == 2) m->point_time = v;
    else if (k == 4) m->memory_bandwidth = v;
    else if (k == 5) m->node_bandwidth = v;
    else if (k == 6) m->node_latency = v;
    else if (k == 7) m->sparse_entry_time = v;
    else m->threads = v;
  }
  /* a read error (a directory opens but does not read) is not an empty model */
  bool bad = ferror(f);
  int e = errno;
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "%s: error: cannot read the machine model: %s", path, strerror(e));
    return false;
  }
  return true;
}

double dc_comm_latency(const dc_machine_model *m, const lw_cost *c) {
  double nl = m->node_latency > 0 ? m->node_latency : m->latency;
  return (c->wire_msgs - c->node_msgs) * m->latency + c->node_msgs * nl;
}

double dc_comm_transfer(const dc_machine_model *m, const lw_cost *c) {
  double nb = m->node_bandwidth > 0 ? m->node_bandwidth : m->bandwidth;
  return (c->wire_bytes - c->node_bytes) / m->bandwidth + c->node_bytes / nb;
}

const char dc_calibrate_source[] =
    "/* distalc --calibrate: the machine model of distal-mpi's --auto, measured on this machine. */\n"
    "#include <mpi.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    "/* rank 0 and peer (the others wait): the least round trip of 8 bytes / 2, the best rate of 8 MB\n"
    " * messages; peer < 0: nothing */\n"
    "static void pingpong(int rank, int peer, char *buf, int big, double *lat, double *bw) {\n"
    "  *lat = 1e30, *bw = 0;\n"
    "  for (int rep = 0; rep < 5 && peer > 0; rep++) {\n"
    "    MPI_Barrier(MPI_COMM_WORLD);\n    double t = MPI_Wtime();\n"
    "    for (int i = 0; i < 200 && (rank == 0 || rank == peer); i++) {\n"
    "      if (rank == 0) { MPI_Send(buf, 8, MPI_CHAR, peer, 0, MPI_COMM_WORLD); MPI_Recv(buf, 8, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }\n"
    "      else { MPI_Recv(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD); }\n"
    "    }\n"
    "    t = (MPI_Wtime() - t) / 400;\n    if (t < *lat) *lat = t;\n"
    "    MPI_Barrier(MPI_COMM_WORLD);\n    t = MPI_Wtime();\n"
    "    for (int i = 0; i < 4 && (rank == 0 || rank == peer); i++) {\n"
    "      if (rank == 0) { MPI_Send(buf, big, MPI_CHAR, peer, 1, MPI_COMM_WORLD); MPI_Recv(buf, 1, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }\n"
    "      else { MPI_Recv(buf, big, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(buf, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD); }\n"
    "    }\n"
    "    t = MPI_Wtime() - t;\n    if (4.0 * big / t > *bw) *bw = 4.0 * big / t;\n"
    "  }\n"
    "}\n"
    "int main(int argc, char **argv) {\n"
    "  MPI_Init(&argc, &argv);\n"
    "  int rank, size;\n  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n  MPI_Comm_size(MPI_COMM_WORLD, &size);\n"
    "  if (size < 2) { if (!rank) fprintf(stderr, \"calibrate: needs 2 ranks\\n\"); MPI_Abort(MPI_COMM_WORLD, 2); }\n"
    "  /* the first rank on rank 0's node and the first on another node (-1: none) */\n"
    "  MPI_Comm nc;\n  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &nc);\n"
    "  int leader = rank, *leaders = malloc(sizeof(int) * (size_t)size), near = -1, far = -1;\n"
    "  MPI_Bcast(&leader, 1, MPI_INT, 0, nc);\n  MPI_Comm_free(&nc);\n"
    "  MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, MPI_COMM_WORLD);\n"
    "  for (int r = size - 1; r > 0; r--) {\n    if (leaders[r] == leaders[0]) near = r;\n    else far = r;\n  }\n"
    "  const int big = 1 << 23; /* 8 MB messages: bandwidth */\n"
    "  char *buf = calloc(big, 1);\n"
    "  double lat, bw, nlat, nbw;\n"
    "  pingpong(rank, far, buf, big, &lat, &bw);\n  pingpong(rank, near, buf, big, &nlat, &nbw);\n"
    "  /* an iteration of generated loops: a naive matrix product's inner loop, 256^3 */\n"
    "  const int n = 256;\n"
    "  double *a = calloc((size_t)n * n, 8), *b = malloc((size_t)n * n * 8), *c = malloc((size_t)n * n * 8), pt = 1e30;\n"
    "  for (int i = 0; i < n * n; i++) b[i] = 1.0 + i % 7, c[i] = 2.0 - i % 5;\n"
    "  for (int rep = 0; rep < 3; rep++) {\n"
    "    double t = MPI_Wtime();\n"
    "    for (int i = 0; i < n; i++)\n      for (int j = 0; j < n; j++)\n        for (int k = 0; k < n; k++)\n"
    "          a[i * n + j] += b[i * n + k] * c[k * n + j];\n"
    "    t = (MPI_Wtime() - t) / ((double)n * n * n);\n    if (t < pt) pt = t;\n"
    "  }\n"
    "  /* the memory's bandwidth of a rank while every rank streams: a triad over 32 MB arrays */\n"
    "  const long m = 1L << 22;\n"
    "  double *x = malloc((size_t)m * 8), *y = malloc((size_t)m * 8), *z = malloc((size_t)m * 8), mb = 0;\n"
    "  for (long i = 0; i < m; i++) x[i] = 0, y[i] = 1.0 + i % 3, z[i] = 2.0 - i % 7;\n"
    "  for (int rep = 0; rep < 5; rep++) {\n"
    "    MPI_Barrier(MPI_COMM_WORLD);\n    double t = MPI_Wtime();\n"
    "    for (long i = 0; i < m; i++) x[i] = y[i] + 0.5 * z[i];\n"
    "    t = MPI_Wtime() - t;\n    if (24.0 * m / t > mb) mb = 24.0 * m / t;\n"
    "  }\n"
    "  double mbmin = mb;\n"
    "  MPI_Reduce(&mb, &mbmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);\n"
    "  if (rank == 0) {\n"
    "    printf(\"# machine model for distalc --auto (distalc --calibrate; checksum %g)\\npoint_time %.6g\\nmemory_bandwidth %.6g\\n\",\n"
    "           a[n + 1] + x[m / 2], pt, mbmin);\n"
    "    /* the network between nodes where a rank is on another node, else the node's rates stand for it */\n"
    "    if (far > 0) printf(\"bandwidth %.6g\\nlatency %.6g\\n\", bw, lat);\n"
    "    else printf(\"# every rank on one node: the network's rates are the node's (calibrate on two nodes to measure them)\\n\"\n"
    "                \"bandwidth %.6g\\nlatency %.6g\\n\", nbw, nlat);\n"
    "    if (near > 0) printf(\"node_bandwidth %.6g\\nnode_latency %.6g\\n\", nbw, nlat);\n"
    "  }\n"
    "  free(buf), free(leaders), free(a), free(b), free(c), free(x), free(y), free(z);\n"
    "  MPI_Finalize();\n  return 0;\n}\n";

/* ---- building commands ------------------------------------------------------------------- */
enum { MAX_SEARCH_LEVELS = 4 }; /* the machine levels the search distributes onto */
typedef struct {
  fe_command cmds[10]; /* MAX_SEARCH_LEVELS distributes and 6 other commands at most */
  int n;
  char text[1024];
  double speedup; /* of the leaf: a catalogue kernel's over the generated loops (1: none) */
  bool parallel;  /* a loop runs on the rank's threads (parallelize) */
  bool overflow;  /* the text did not fit (very long names): not a candidate */
} cmdlist;

/* The catalogue's kernels (LANGUAGE.md section 5, substitute) and how much faster than the
 * generated loops the model takes each to be per iteration: BLAS-3 far faster, the streaming
 * ones a little (vectorized, unrolled); ttm is one dgemm. */
static const struct {
  const char *name;
  double speedup;
} kernels[] = {{"gemm", 16}, {"ttm", 16}, {"mttkrp", 4}, {"gemv", 2}, {"ttv", 2}, {"dot", 2}, {"innerprod", 2}, {"axpy", 1.5}};

static fe_arg a_ident(const char *s) { return (fe_arg){.kind = FE_ARG_IDENT, .name = ir_strdup(s)}; }
static fe_arg a_int(int64_t v) { return (fe_arg){.kind = FE_ARG_INT, .ival = v}; }
static fe_arg a_level(const char *machine, int level) { return (fe_arg){.kind = FE_ARG_LEVEL, .name = ir_strdup(machine), .ival = level}; }
static fe_arg a_list(int n, char *const *names) {
  fe_arg a = {.kind = FE_ARG_LIST, .nitems = n, .items = ir_alloc((size_t)(n + 1) * sizeof(fe_arg))};
  for (int k = 0; k < n; k++) a.items[k] = a_ident(names[k]);
  return a;
}

static void add_cmd(cmdlist *c, const char *name, int nargs, ...) {
  fe_command *m = &c->cmds[c->n++];
  m->name = ir_strdup(name);
  m->nargs = nargs;
  m->args = ir_alloc((size_t)(nargs + 1) * sizeof *m->args);
  va_list ap;
  va_start(ap, nargs);
  for (int k = 0; k < nargs; k++) m->args[k] = va_arg(ap, fe_arg);
  va_end(ap);
  /* the text, as a user writes it (built apart, appended only where it fits) */
  char *t = NULL;
  size_t tl = 0;
  FILE *f = open_memstream(&t, &tl);
  if (!f) {
    c->overflow = true;
    return;
  }
  fprintf(f, "%s.%s(", c->text[0] ? "\n  " : "", name);
  for (int k = 0; k < nargs; k++) {
    const fe_arg *a = &m->args[k];
    if (k) fputs(", ", f);
    if (a->kind == FE_ARG_IDENT) fputs(a->name, f);
    else if (a->kind == FE_ARG_INT) fprintf(f, "%lld", (long long)a->ival);
    else if (a->kind == FE_ARG_LEVEL) fprintf(f, "%s[%lld]", a->name, (long long)a->ival);
    else {
      fputc('{', f);
      for (int q = 0; q < a->nitems; q++) fprintf(f, "%s%s", q ? ", " : "", a->items[q].name);
      fputc('}', f);
    }
  }
  fputc(')', f);
  fclose(f);
  size_t len = strlen(c->text);
  if (t && len + tl + 1 <= sizeof c->text) memcpy(c->text + len, t, tl + 1);
  else c->overflow = true;
  free(t);
}

/* ---- names ------------------------------------------------------------------------------- */
static bool name_used(const ir_stmt *s, const fe_program *p, char *const *taken, int ntaken, const char *n) {
  for (int v = 0; v < s->nvars; v++)
    if (!strcmp(s->vars[v].name, n)) return true;
  for (int t = 0; t < p->ntensors; t++)
    if (!strcmp(p->tensors[t].name, n)) return true;
  for (int q = 0; q < p->nparams; q++)
    if (!strcmp(p->params[q].name, n)) return true;
  for (int m = 0; m < p->nmachines; m++)
    if (!strcmp(p->machines[m].name, n)) return true;
  for (int k = 0; k < ntaken; k++)
    if (!strcmp(taken[k], n)) return true;
  return false;
}

/* base + suffix, made unique in the statement (a digit appended where needed) */
static char *fresh(const ir_stmt *s, const fe_program *p, char **taken, int *ntaken, const char *base, const char *suffix) {
  char b[256];
  snprintf(b, sizeof b, "%s%s", base, suffix);
  for (int k = 2; name_used(s, p, taken, *ntaken, b) && k < 1000; k++) snprintf(b, sizeof b, "%s%s%d", base, suffix, k);
  char *r = ir_strdup(b);
  taken[(*ntaken)++] = r;
  return r;
}

/* ---- the search ------------------------------------------------------------------------ */
/* Where a statement runs in the program's loops (LANGUAGE.md section 9), for its share of the
 * program's time: each iteration of its loops runs it, up to their bounds (a loop's `until` may
 * end it sooner; the model takes the bound), and the SPMD rewrite `invariant` fetches a tensor
 * that its innermost loop does not write once per entry of that loop. */
typedef struct {
  double entries;  /* entries of its innermost loop: the product of the bounds of the loops
                    * around that one (1: in none) */
  double bound;    /* iterations of its innermost loop per entry, its bound (1: in no loop) */
  bool *unwritten; /* the tensors no statement of that loop writes (NULL: in no loop, or the
                    * program is not fused: --no-fuse runs no SPMD rewrite) */
  int number;      /* that loop's (0: in none) */
} stmt_loop;

typedef struct {
  dc_unit *u;
  const int64_t *params;
  int64_t mem_limit;
  const dc_machine_model *m;
  int ncand, capcand;
  dc_auto_cand *cand;
  fe_command **cmds; /* per candidate */
  int *ncmds;
  /* dominance by bound: the least predicted time of a candidate that fits so far, and the
   * candidates not costed because a bound on their time exceeds it */
  double best;
  int pruned;
  bool exhaustive;   /* DISTAL_AUTO_EXHAUSTIVE set: cost every candidate */
  /* a time the caller only compares the program's against (dc_program_seconds; HUGE_VAL:
   * none): the search of a dense statement starts with it as its best */
  double cutoff;
  /* the owners of the unit's tensors, the same in every candidate (lw_lower_stmt; NULL: each
   * candidate builds its own) */
  const lw_owner *owners;
  /* where each statement runs in the program's loops (stmt_loops; NULL: as if in none) */
  const stmt_loop *loops;
} search;

/* A candidate's predicted share of the program's run is at least its messages' latency plus
 * its bytes' time, counted as its share counts them (the model of try_cand: the overlapped
 * steps only hide the loops' time): the same bytes and messages as cand k (a catalogue kernel
 * or threads change neither) give this bound. */
static double comm_bound(const search *S, const dc_auto_cand *k) {
  (void)S;
  return k->run_comm;
}

/* Precondition: every candidate that the bound covers is predicted at least `bound`.  Rule:
 * skip them (count n) where the bound exceeds the best candidate so far that fits by more
 * than the 2% within which cmp_cand's ties by bytes could still rank them first. */
static bool dominated(search *S, double bound, int n) {
  if (S->exhaustive || !(bound > 1.02 * S->best)) return false;
  S->pruned += n;
  return true;
}

static void quiet(void *ctx, const fe_diag *d) { (void)ctx, (void)d; }

/* u's diagnostics silenced while the search builds programs it may reject, and given back
 * with its error count as before */
typedef struct {
  fe_sink sink;
  int nerrors;
} hushed;

static hushed hush(dc_unit *u) {
  hushed h = {u->src->sink, u->src->nerrors};
  u->src->sink = (fe_sink){quiet, NULL};
  return h;
}

static void unhush(dc_unit *u, hushed h) { u->src->sink = h.sink, u->src->nerrors = h.nerrors; }

/* the model's time of a statement's cost for candidate c; *loops: its loops' part alone */
static double cost_seconds(const search *S, const cmdlist *c, const lw_cost *cost, double *loops) {
  /* communication in s steps overlaps the computation of the previous step (the SPMD
   * rewrite pipeline posts the next step's broadcast before this one computes): the first
   * step's data arrives alone, the rest while the loops run */
  double comm = dc_comm_transfer(S->m, cost), steps = cost->steps > 1 ? (double)cost->steps : 1;
  /* a kernel's speedup shrinks with its shortest loop below 128 (a thin panel) or a small call */
  double sp = lw_kernel_speed(c->speedup, cost->kernel_min, cost->kernel_points);
  /* a catalogue kernel (BLAS) and a parallelized loop run on the rank's threads */
  *loops = (double)cost->points * S->m->point_time / sp / (c->speedup > 1 || c->parallel ? S->m->threads : 1);
  /* ... and take at least the time of the bytes they touch at the memory's bandwidth */
  double work = fmax(*loops, cost->mem_bytes / S->m->memory_bandwidth);
  return dc_comm_latency(S->m, cost) + comm / steps + fmax(comm * (steps - 1) / steps, work) +
         cost->sparse_entries * S->m->sparse_entry_time; /* a sparse box's entries sorted in */
}

/* the seconds of a cost's messages and bytes */
static double comm_of(const search *S, const lw_cost *cost) {
  return dc_comm_latency(S->m, cost) + dc_comm_transfer(S->m, cost);
}

/* lower and cost one candidate for statement i (try_cand) */
static bool try_cand_in(search *S, int i, const cmdlist *c, dc_auto_cand *out) {
  dc_unit *u = S->u;
  ir_program *ir = NULL;
  lw_program *lp = NULL;
  bool ok = dc_clone(u, u->ir, &ir) == DC_OK && (c->n == 0 || dc_schedule(u, ir, i, c->cmds, c->n) == DC_OK) &&
            dc_lower_stmt(u, ir, i, S->owners, &lp) == DC_OK && lp;
  /* the ranks of lw_sample: the slowest */
  if (!ok) return false;
  out->seconds = -1, out->run_seconds = -1, out->run_comm = -1;
  const stmt_loop *L = S->loops ? &S->loops[i] : NULL;
  int64_t maxbuf = 0;
  for (int at = 0; at < lw_nsamples(lp); at++) {
    lw_cost cost;
    int64_t coords[LW_MAX_DIMS] = {0};
    bool repeat;
    if (!lw_sample(lp, S->params, at, coords, &repeat)) return false;
    if (repeat) continue;
    if (!lw_stmt_cost_at(lp, i, S->params, coords, S->m->ranks_per_node, &cost)) return false;
    double loops, sec = cost_seconds(S, c, &cost, &loops);
    if (sec > out->seconds) out->seconds = sec, out->cost = cost, out->work = loops;
    if (cost.buffer > maxbuf) maxbuf = cost.buffer;
    /* its share of the program's run: in a loop, each iteration without the loop's invariant
     * fetches, and those once per entry of the loop */
    double run = sec, run_comm = comm_of(S, &cost);
    if (L && L->unwritten) {
      lw_cost it, once;
      double unused;
      if (!lw_stmt_cost_part(lp, i, S->params, coords, S->m->ranks_per_node, L->unwritten, LW_PART_ITERATION, &it) ||
          !lw_stmt_cost_part(lp, i, S->params, coords, S->m->ranks_per_node, L->unwritten, LW_PART_ONCE, &once))
        return false;
      run = L->bound * cost_seconds(S, c, &it, &unused) + comm_of(S, &once) + once.sparse_entries * S->m->sparse_entry_time;
      run_comm = L->bound * comm_of(S, &it) + comm_of(S, &once);
    } else if (L)
      run = L->bound * sec, run_comm *= L->bound;
    if (L) run *= L->entries, run_comm *= L->entries;
    if (run > out->run_seconds) out->run_seconds = run;
    if (run_comm > out->run_comm) out->run_comm = run_comm;
  }
  out->cost.buffer = maxbuf;
  out->fits = S->mem_limit <= 0 || out->cost.buffer <= S->mem_limit;
  out->speedup = c->speedup > 0 ? c->speedup : 1;
  out->threads = c->speedup > 1 || c->parallel ? S->m->threads : 1;
  return true;
}

/* schedule, lower and cost one candidate for statement i; false when the compiler rejects it */
static bool try_cand(search *S, int i, const cmdlist *c, dc_auto_cand *out) {
  dc_unit *u = S->u;
  hushed h = hush(u);
  /* the candidate's program is built, costed and dropped: only numbers are kept */
  ir_mark mark = ir_arena_mark(u->arena);
  bool res = try_cand_in(S, i, c, out);
  ir_arena_release(u->arena, mark);
  unhush(u, h);
  if (res) out->text = ir_strdup(c->text);
  return res;
}

static void keep(search *S, const cmdlist *c, const dc_auto_cand *k) {
  if (S->ncand == S->capcand) {
    int cap = 2 * S->capcand + 16;
    dc_auto_cand *nc = ir_alloc((size_t)cap * sizeof *nc);
    fe_command **cm = ir_alloc((size_t)cap * sizeof *cm);
    int *nn = ir_alloc((size_t)cap * sizeof *nn);
    if (S->ncand) {
      memcpy(nc, S->cand, (size_t)S->ncand * sizeof *nc);
      memcpy(cm, S->cmds, (size_t)S->ncand * sizeof *cm);
      memcpy(nn, S->ncmds, (size_t)S->ncand * sizeof *nn);
    }
    S->cand = nc, S->cmds = cm, S->ncmds = nn, S->capcand = cap;
  }
  S->cand[S->ncand] = *k;
  S->cmds[S->ncand] = ir_alloc((size_t)(c->n + 1) * sizeof(fe_command));
  if (c->n) memcpy(S->cmds[S->ncand], c->cmds, (size_t)c->n * sizeof(fe_command));
  S->ncmds[S->ncand++] = c->n;
}

/* the candidate's index among those kept, -1 where the compiler rejects it */
static int consider(search *S, int i, const cmdlist *c) {
  dc_auto_cand k;
  if (c->overflow || !try_cand(S, i, c, &k)) return -1;
  keep(S, c, &k);
  if (k.fits && k.run_seconds < S->best) S->best = k.run_seconds;
  return S->ncand - 1;
}

/* c, and c with its innermost loops (`inner`, in loop order, walking the original variables
 * `orig`) replaced by each catalogue kernel that the compiler accepts for them; where the rank
 * has several threads, also c with the first of those loops that no sum runs over (`par`,
 * NULL: none) run on them.  These move what c moves: none is costed where c's communication
 * alone is slower than the best.  A kernel whose form the statement does not have with these
 * loops (ir_kernel_fits: it depends on the statement and orig only) is not built: substitute
 * would reject it. */
static void consider_kernels(search *S, int i, const cmdlist *c, int ninner, char **inner, const int *orig, const char *par) {
  const int nk = (int)(sizeof kernels / sizeof kernels[0]);
  bool fits[sizeof kernels / sizeof kernels[0]] = {false};
  int nfit = 0;
  const ir_stmt *s = &S->u->ir->stmts[i];
  const cin_node *asg = cin_assign((s->before_owner ? s->before_owner : s)->root);
  bool known = !S->exhaustive;
  for (int q = 0; q < ninner; q++) known &= orig[q] >= 0;
  for (int q = 0; q < nk && ninner > 0; q++)
    nfit += fits[q] = !known || ir_kernel_fits(S->u->ir, asg, kc_lookup(kernels[q].name), orig, ninner) == IR_FITS;
  int at = consider(S, i, c);
  int more = (par && S->m->threads > 1) + nfit;
  if (at >= 0 && dominated(S, comm_bound(S, &S->cand[at]), more)) return;
  if (par && S->m->threads > 1) {
    cmdlist t = *c;
    add_cmd(&t, "parallelize", 2, a_ident(par), a_ident("cpu_thread"));
    t.parallel = true;
    consider(S, i, &t);
  }
  for (int q = 0; q < nk && ninner > 0; q++) {
    if (!fits[q]) continue;
    cmdlist k = *c;
    add_cmd(&k, "substitute", 2, a_list(ninner, inner), a_ident(kernels[q].name));
    k.speedup = kernels[q].speedup;
    consider(S, i, &k);
  }
}

/* why statement i is not searched (NULL: it is) */
static const char *not_searched(const dc_unit *u, const ir_stmt *s) {
  const fe_program *p = u->ast;
  const ir_program *ir = u->ir;
  if (s->ast->ncmds) return "it has schedule commands";
  if (ir->machine < 0) return "the program has no machine";
  const fe_machine *M = &p->machines[ir->machine];
  if (M->nlevels > MAX_SEARCH_LEVELS) return "the machine has more than four levels (the owner-computes default applies)";
  for (int l = 1; l < M->nlevels; l++)
    if (M->levels[l].ndims > M->levels[l - 1].ndims)
      return "an inner level of the machine has more dims than the level around it (the owner-computes default applies)";
  return NULL;
}

/* what a candidate of a sparse statement moves, in bytes: those it receives and its sparse
 * entries' sorting time at the bandwidth */
static double moved(const search *S, const dc_auto_cand *c) {
  return (double)c->cost.bytes + c->cost.sparse_entries * S->m->sparse_entry_time * S->m->bandwidth;
}

static bool reads_sparse_expr(const fe_program *p, const fe_expr *e) {
  if (!e) return false;
  if (e->kind == FE_E_ACCESS) {
    int t = fe_find_tensor(p, e->acc.tname);
    if (t >= 0 && lw_sparse(p, t)) return true;
  }
  return reads_sparse_expr(p, e->a) || reads_sparse_expr(p, e->b);
}

static void read_tensors(const fe_program *p, const fe_expr *e, char **names, int *n) {
  if (!e) return;
  if (e->kind == FE_E_ACCESS && e->acc.nidx > 0) {
    bool seen = false;
    for (int k = 0; k < *n; k++) seen |= !strcmp(names[k], e->acc.tname);
    if (!seen && *n < 16) names[(*n)++] = e->acc.tname;
  }
  (void)p;
  read_tensors(p, e->a, names, n);
  read_tensors(p, e->b, names, n);
}

/* those that fit the memory limit first, then by predicted time; among times within 1% (the
 * model's comm hidden under equal work, say) the one that receives fewer bytes, then the one
 * whose loops alone are predicted faster (where the memory's bandwidth bounds both: a
 * catalogue kernel or threads over the generated loops), then the smaller buffers */
static int cmp_cand(const void *a, const void *b) {
  const dc_auto_cand *p = a, *q = b;
  if (p->fits != q->fits) return p->fits ? -1 : 1;
  if (fabs(p->run_seconds - q->run_seconds) > 1e-2 * fmax(p->run_seconds, q->run_seconds))
    return p->run_seconds < q->run_seconds ? -1 : 1;
  /* the default is never put after a candidate predicted slower than it */
  if (!*p->text != !*q->text && p->run_seconds != q->run_seconds) {
    const dc_auto_cand *d = *p->text ? q : p, *o = *p->text ? p : q;
    if (d->run_seconds < o->run_seconds) return d == p ? -1 : 1;
  }
  if (p->cost.bytes != q->cost.bytes) return p->cost.bytes < q->cost.bytes ? -1 : 1;
  if (fabs(p->work - q->work) > 1e-2 * fmax(p->work, q->work)) return p->work < q->work ? -1 : 1;
  return p->cost.buffer < q->cost.buffer ? -1 : p->cost.buffer > q->cost.buffer;
}

/* choice number `code` (0 .. n^k - 1) of k of n things, in order: pick[q] = digit q of code in
 * base n; false where two repeat (not a choice of distinct things) */
static bool ordered_choice(int64_t code, int n, int k, int *pick) {
  bool distinct = true;
  for (int q = 0; q < k; q++) {
    pick[q] = (int)(code % n), code /= n;
    for (int r = 0; r < q; r++) distinct &= pick[r] != pick[q];
  }
  return distinct;
}

/* the owners of u's tensors for the search's candidates (NULL where lw_lower would fail: the
 * candidates then fail as they did) */
static const lw_owner *search_owners(dc_unit *u) {
  hushed h = hush(u);
  const lw_owner *o = lw_owners(u->ir, u->cuda);
  unhush(u, h);
  return o;
}

static void search_stmt(search *S, int i, dc_auto_stmt *st) {
  dc_unit *u = S->u;
  if (!S->owners) S->owners = search_owners(u);
  const fe_program *p = u->ast;
  const ir_stmt *s = &u->ir->stmts[i];
  const ir_stmt *base = s->before_owner ? s->before_owner : s;
  const fe_machine *M = &p->machines[u->ir->machine];
  const int k = M->levels[0].ndims, L = M->nlevels;
  S->ncand = 0;
  S->best = HUGE_VAL, S->pruned = 0;
  /* the default first: ties keep it */
  cmdlist none = {0};
  consider(S, i, &none);
  if (!S->ncand) {
    st->why_not = "the compiler could not cost its default schedule (more steps than the search evaluates)";
    return;
  }
  /* a statement that reads a sparse tensor: its distributions only, no panels.  The plan counts
   * a sparse box's entries and its loops' iterations by the model's estimate (lw_density), not
   * the real ones; the panels' overlap needs a step's real time, and the default's broadcast of
   * a vector becomes a halo exchange (an SPMD rewrite) only where the loops are not split: among
   * equals the default */
  const int lhs_t = s->ast->lhs.tname ? fe_find_tensor(p, s->ast->lhs.tname) : -1;
  const bool sparse = reads_sparse_expr(p, s->ast->rhs) || (lhs_t >= 0 && lw_sparse(p, lhs_t));
  /* Precondition: the caller needs this statement's time only where the program's is below
   * S->cutoff (every other statement's time is >= 0), and a dense statement's choice is the
   * fastest candidate that fits (ties within 2% by bytes).  Rule: start the dominance bound
   * at the cutoff.  A candidate then skipped is predicted above 1.02 x the cutoff: where the
   * best is below the cutoff it could not have been chosen, and where the best is above it,
   * so is the program, whatever is chosen.  Not for a sparse statement, whose choice weighs
   * bytes against the default's. */
  if (!sparse && S->cutoff < S->best) S->best = S->cutoff;
  /* the loop variables (the statement's index variables) */
  const cin_node *loops[64];
  int nl = cin_loops(base->root, loops, 64);
  if (nl > 8) nl = 8;
  int vars[8];
  bool summed[8];
  const cin_node *asg = cin_assign(base->root);
  for (int q = 0; q < nl; q++) {
    vars[q] = loops[q]->var;
    summed[q] = true;
    for (int x = 0; x < asg->nlhs; x++) summed[q] &= asg->lhs_vars[x] != vars[q];
  }
  char *reads[16];
  int nreads = 0;
  read_tensors(p, s->ast->rhs, reads, &nreads);
  /* every ordered choice of k distinct variables for the k grid dims */
  int pick[FE_MAX_DIMS];
  int64_t total = 1;
  for (int q = 0; q < k; q++) total *= nl;
  for (int64_t code = 0; code < total && k <= nl; code++) {
    if (!ordered_choice(code, nl, k, pick)) continue;
    char *taken[64], *outer[FE_MAX_DIMS], *inner0[FE_MAX_DIMS], *targ[FE_MAX_DIMS];
    int ntaken0 = 0;
    for (int q = 0; q < k; q++) {
      targ[q] = (char *)s->vars[vars[pick[q]]].name;
      outer[q] = fresh(s, p, taken, &ntaken0, targ[q], "o");
      inner0[q] = fresh(s, p, taken, &ntaken0, targ[q], "i");
    }
    cmdlist d0 = {0};
    add_cmd(&d0, "distribute", 4, a_list(k, targ), a_list(k, outer), a_list(k, inner0), a_ident(M->name));
    /* a machine of several levels: for each inner level l, every ordered choice of its k_l
     * dims' loops among the inner loops of the k_(l-1) loops that level l-1 distributed,
     * distributed onto M[l] by another compound distribute (their inner loops then stand for
     * them below, as in examples/hier_summa.dtl); choice number code1 holds one digit of
     * base k_(l-1) per dim of each inner level */
    int64_t ncode1 = 1;
    for (int l = 1; l < L; l++)
      for (int q = 0; q < M->levels[l].ndims; q++) ncode1 *= M->levels[l - 1].ndims;
    for (int64_t code1 = 0; code1 < ncode1; code1++) {
      char *inner[FE_MAX_DIMS];
      memcpy(inner, inner0, sizeof inner);
      int ntaken = ntaken0;
      cmdlist d = d0;
      int prev[FE_MAX_DIMS], nprev = k; /* the level-0 positions the level above distributed */
      for (int q = 0; q < k; q++) prev[q] = q;
      int64_t rest = code1;
      bool distinct = true;
      for (int l = 1; l < L && distinct; l++) {
        const int kl = M->levels[l].ndims;
        int64_t radix = 1;
        for (int q = 0; q < kl; q++) radix *= nprev;
        int pk[FE_MAX_DIMS], pos[FE_MAX_DIMS];
        if (!(distinct = ordered_choice(rest % radix, nprev, kl, pk))) break;
        rest /= radix;
        char *t1[FE_MAX_DIMS], *o1[FE_MAX_DIMS], *i1[FE_MAX_DIMS];
        for (int q = 0; q < kl; q++) {
          pos[q] = prev[pk[q]];
          t1[q] = inner[pos[q]];
          o1[q] = fresh(s, p, taken, &ntaken, t1[q], "o");
          i1[q] = fresh(s, p, taken, &ntaken, t1[q], "i");
          inner[pos[q]] = i1[q];
        }
        add_cmd(&d, "distribute", 4, a_list(kl, t1), a_list(kl, o1), a_list(kl, i1), a_level(M->name, l));
        memcpy(prev, pos, sizeof pos);
        nprev = kl;
      }
      if (!distinct) continue;
      /* the loops under the distributed ones: the variables in their order, the distributed
       * ones by their inner loops */
      char *under[16];
      int nunder = 0, uorig[16];
      /* a loop of an index variable, or the inner loop of a distributed one, that no sum runs
       * over: what the rank's threads may split */
      const char *par = NULL;
      for (int q = 0; q < nl; q++) {
        int at = -1;
        for (int x = 0; x < k; x++)
          if (pick[x] == q) at = x;
        uorig[nunder] = vars[q];
        under[nunder++] = at >= 0 ? inner[at] : (char *)s->vars[vars[q]].name;
        if (!par && !summed[q]) par = under[nunder - 1];
      }
      int at_d = S->ncand;
      consider_kernels(S, i, &d, nunder, under, uorig, par);
      /* what the distribution alone receives: its panels (below) receive the same bytes in
       * more messages, at every run (a panel is fetched at each step, never once per loop) */
      const stmt_loop *Li = S->loops ? &S->loops[i] : NULL;
      double bytes_bound = at_d < S->ncand && !strcmp(S->cand[at_d].text, d.text)
                               ? dc_comm_transfer(S->m, &S->cand[at_d].cost) * (Li ? Li->entries * Li->bound : 1)
                               : -1;
      /* a summed variable left: panels along it, received by every rank of the grid (SUMMA) */
      for (int r = 0; r < nl; r++) {
        bool used = false;
        for (int q = 0; q < k; q++) used |= pick[q] == r;
        if (used || !summed[r] || !nreads || sparse) continue;
        int64_t E;
        sym_env env = {.params = S->params};
        if (!sym_eval(s->vars[vars[r]].extent, &env, &E) || E < 256) continue;
        /* panels of a half, a quarter, ... a 64th (COSMA's sequential steps: more steps hide
         * more of the communication under the loops and hold smaller buffers, at more
         * messages), at least 128 wide: a leaf kernel over a thinner panel runs far below its
         * rate; and (w == NW) as many panels as grid dim 0 has ranks, rotated along the grid
         * so that each step's panel is a neighbour's (Cannon: shifts instead of broadcasts
         * where the grid is square) */
        enum { NW = 6 };
        int64_t widths[NW];
        for (int w = 0; w < NW; w++) widths[w] = (E + (2 << w) - 1) / (2 << w);
        const fe_size *g0 = &M->levels[0].dims[0];
        for (int w = 0; w <= NW; w++) {
          if (w < NW && ((w && widths[w] == widths[w - 1]) || widths[w] < 128)) continue;
          if (w < NW && bytes_bound >= 0 &&
              dominated(S, bytes_bound, 1 + (S->m->threads > 1) + (int)(sizeof kernels / sizeof kernels[0])))
            continue;
          char *t2[64];
          int nt2 = ntaken;
          memcpy(t2, taken, (size_t)ntaken * sizeof *t2);
          const char *rn = s->vars[vars[r]].name;
          char *ro = fresh(s, p, t2, &nt2, rn, "o"), *ri = fresh(s, p, t2, &nt2, rn, "i");
          char *order[FE_MAX_DIMS + 2];
          int no = 0;
          order[no++] = ro;
          for (int q = 0; q < k; q++) order[no++] = inner[q];
          order[no++] = ri;
          cmdlist ds = d;
          if (w < NW) {
            add_cmd(&ds, "split", 4, a_ident(rn), a_ident(ro), a_ident(ri), a_int(widths[w]));
            add_cmd(&ds, "reorder", 1, a_list(no, order));
            add_cmd(&ds, "communicate", 2, a_list(nreads, reads), a_ident(ro));
          } else {
            char *rs = fresh(s, p, t2, &nt2, rn, "s");
            add_cmd(&ds, "divide", 4, a_ident(rn), a_ident(ro), a_ident(ri),
                    g0->is_param ? a_ident(p->params[g0->param].name) : a_int(g0->value));
            add_cmd(&ds, "reorder", 1, a_list(no, order));
            add_cmd(&ds, "rotate", 3, a_ident(ro), a_list(k, outer), a_ident(rs));
            add_cmd(&ds, "communicate", 2, a_list(nreads, reads), a_ident(rs));
          }
          /* the loops under ro: the reorder puts ro, the inner loops and ri, in that order, at
           * the places of those loops among the others */
          char *loopv[16], *inside[16];
          int nlv = 0, ni = 0, slot = 0;
          for (int q = 0; q < nl; q++) {
            int at = -1;
            for (int x = 0; x < k; x++)
              if (pick[x] == q) at = x;
            if (q == r) {
              loopv[nlv++] = ro;
              loopv[nlv++] = ri;
            } else
              loopv[nlv++] = at >= 0 ? inner[at] : (char *)s->vars[vars[q]].name;
          }
          for (int q = 0; q < nlv; q++) {
            bool listed = false;
            for (int x = 0; x < no; x++) listed |= !strcmp(loopv[q], order[x]);
            if (listed) loopv[q] = order[slot++];
          }
          /* the original variable each loop under ro walks: ri r's, a distributed loop's
           * inner loop its variable's, the others their own */
          int iorig[16];
          bool after = false;
          for (int q = 0; q < nlv; q++) {
            if (after) {
              iorig[ni] = loopv[q] == ri ? vars[r] : -1;
              for (int x = 0; x < k; x++)
                if (loopv[q] == inner[x]) iorig[ni] = vars[pick[x]];
              for (int x = 0; x < nl && iorig[ni] < 0; x++)
                if (!strcmp(loopv[q], s->vars[vars[x]].name)) iorig[ni] = vars[x];
              inside[ni++] = loopv[q];
            }
            after |= loopv[q] == ro;
          }
          /* the first loop under the panels that no sum runs over */
          const char *ppar = NULL;
          for (int q = 0; q < ni && !ppar; q++) {
            for (int x = 0; x < nl; x++) {
              int at = -1;
              for (int y = 0; y < k; y++)
                if (pick[y] == x) at = y;
              const char *nm = at >= 0 ? inner[at] : s->vars[vars[x]].name;
              if (!strcmp(nm, inside[q]) && !summed[x]) ppar = inside[q];
            }
          }
          consider_kernels(S, i, &ds, ni, inside, iorig, ppar);
        }
      }
    }
  }
  /* the best first; the default keeps its place among equals (a stable choice) */
  int *idx = ir_alloc((size_t)S->ncand * sizeof *idx);
  for (int q = 0; q < S->ncand; q++) idx[q] = q;
  /* insertion sort by time, stable */
  for (int q = 1; q < S->ncand; q++)
    for (int r = q; r > 0 && cmp_cand(&S->cand[idx[r]], &S->cand[idx[r - 1]]) < 0; r--) {
      int t = idx[r];
      idx[r] = idx[r - 1], idx[r - 1] = t;
    }
  if (sparse) {
    /* Precondition: the plan's bytes of a sparse box are an estimate (lw_density), the
     * default's broadcast of a vector becomes a halo exchange that moves less than the plan
     * counts, and an exchange's messages count its steps, not its peers.  Rule: a candidate
     * replaces the default only where it moves less (its bytes, and its sparse entries at the
     * bandwidth's worth of their sorting time), the fastest of those; else the default. */
    int def = -1;
    for (int q = 0; q < S->ncand; q++)
      if (!*S->cand[idx[q]].text) def = q;
    int at = def;
    for (int q = 0; q < def && at == def; q++)
      if (S->cand[idx[q]].fits && moved(S, &S->cand[idx[q]]) < moved(S, &S->cand[idx[def]])) at = q;
    if (at == def && def > 0)
      st->why_not = "it reads or writes a sparse tensor and no faster candidate receives fewer bytes: the default";
    for (int t = idx[at]; at > 0; at--) idx[at] = idx[at - 1], idx[at - 1] = t;
  }
  st->ncand = S->ncand;
  st->npruned = S->pruned;
  st->cand = ir_alloc((size_t)S->ncand * sizeof *st->cand);
  for (int q = 0; q < S->ncand; q++) st->cand[q] = S->cand[idx[q]];
  st->chosen = 0;
  st->cmds = S->cmds[idx[0]], st->ncmds = S->ncmds[idx[0]];
  if (!st->cand[0].fits) { /* nothing fits: the default */
    for (int q = 0; q < S->ncand; q++)
      if (!*st->cand[q].text) {
        dc_auto_cand t = st->cand[q];
        memmove(st->cand + 1, st->cand, (size_t)q * sizeof *st->cand);
        st->cand[0] = t;
      }
    st->cmds = NULL, st->ncmds = 0;
    st->why_not = "no candidate fits the memory limit: the default";
  }
}

/* ---- the run-time variants ---------------------------------------------------------------- */
/* what a report chose, per statement: the commands' text ("": the default or as written) */
static const char *chosen_text(const dc_auto_stmt *st) { return st->chosen == 0 && st->ncmds ? st->cand[0].text : ""; }
static double chosen_speedup(const dc_auto_stmt *st) { return st->chosen == 0 && st->ncmds ? st->cand[0].speedup : 1; }
static double chosen_threads(const dc_auto_stmt *st) { return st->chosen == 0 && st->ncmds ? st->cand[0].threads : 1; }

typedef struct {
  char *key;           /* the chosen texts, one line per statement */
  ir_program *ir;
  double *speedup, *threads;
  const char **schedule;
  char label[256];
  int wins;
} variant_acc;

static char *report_key(const dc_auto_report *r) {
  size_t n = 1;
  for (int i = 0; i < r->nstmts; i++) n += strlen(chosen_text(&r->stmts[i])) + 1;
  char *k = ir_alloc(n);
  for (int i = 0; i < r->nstmts; i++) strcat(strcat(k, chosen_text(&r->stmts[i])), "\n");
  return k;
}

static void variant_from(variant_acc *a, const dc_auto_report *r, ir_program *ir) {
  a->key = report_key(r);
  a->ir = ir;
  a->speedup = ir_alloc((size_t)(r->nstmts + 1) * sizeof *a->speedup);
  a->threads = ir_alloc((size_t)(r->nstmts + 1) * sizeof *a->threads);
  a->schedule = ir_alloc((size_t)(r->nstmts + 1) * sizeof *a->schedule);
  for (int i = 0; i < r->nstmts; i++)
    a->speedup[i] = chosen_speedup(&r->stmts[i]), a->threads[i] = chosen_threads(&r->stmts[i]), a->schedule[i] = chosen_text(&r->stmts[i]);
}

static void scenario_label(char *b, size_t n, const fe_program *p, int64_t ranks, const int64_t *vals, bool grid) {
  int w = snprintf(b, n, "%lld rank%s", (long long)ranks, ranks == 1 ? "" : "s");
  for (int q = 0, k = 0; grid && q < p->nparams && w > 0 && (size_t)w < n; q++) /* a free shape: its grid params */
    if (p->params[q].is_grid) w += snprintf(b + w, n - (size_t)w, "%s%s=%lld", k++ ? " " : " on ", p->params[q].name, (long long)vals[q]);
  for (int q = 0; q < p->nparams && w > 0 && (size_t)w < n; q++)
    if (!p->params[q].is_grid && !p->params[q].is_float)
      w += snprintf(b + w, n - (size_t)w, "%s%s=%lld", q ? " " : ", ", p->params[q].name, (long long)vals[q]);
}

typedef struct {
  dc_unit *u;
  lw_program *lp;
  const dc_auto_report *rep;
  const int64_t *params;
  int64_t ranks, mem_limit;
  const dc_machine_model *m;
  dc_grid_fn grid;
  void *grid_ctx;
  int maxv;
} variants_args;

/* a param's value at the compile: given, else 1024 (as dc_auto costs it); grid params as
 * given (solved for each rank count unless given) */
static int64_t compiled_value(const fe_program *p, const int64_t *params, int q) {
  return params[q] > 0 || p->params[q].is_grid ? params[q] : 1024;
}

/* The search at one scenario (params v, grid solved, at `ranks` ranks): its choice counted
 * among the distinct ones found so far in acc (a new one added while there is room). */
static void count_scenario(const variants_args *A, variant_acc *acc, int *nacc, int cap, const int64_t *v, int64_t ranks) {
  dc_unit *u = A->u;
  dc_auto_report r = {0};
  ir_program *ir = NULL;
  hushed h = hush(u);
  int st = dc_auto(u, v, ranks, A->mem_limit, A->m, &ir, &r);
  unhush(u, h);
  if (st != DC_OK || !ir) return;
  char *key = report_key(&r);
  int at = -1;
  for (int k = 0; k < *nacc && at < 0; k++)
    if (!strcmp(acc[k].key, key)) at = k;
  if (at < 0 && *nacc < cap) {
    at = (*nacc)++;
    variant_from(&acc[at], &r, ir);
    scenario_label(acc[at].label, sizeof acc[at].label, u->ast, ranks, v, u->shape_free);
  }
  if (at >= 0) acc[at].wins++;
}

/* dc_auto_variants inside its scope */
static int variants_in(const variants_args *A) {
  dc_unit *u = A->u;
  const fe_program *p = u->ast;
  const int64_t *params = A->params;
  int np = p->nparams;
  int cap = 64, nacc = 1;
  variant_acc *acc = ir_alloc((size_t)cap * sizeof *acc);
  variant_from(&acc[0], A->rep, A->lp->ir);
  {
    int64_t *v0 = ir_alloc((size_t)(np + 1) * sizeof *v0);
    for (int q = 0; q < np; q++) v0[q] = compiled_value(p, params, q);
    bool ok = A->grid(A->grid_ctx, v0, A->ranks, 0);
    for (int q = 0; q < np && A->rep->grid; q++) /* the shape the compile chose */
      if (p->params[q].is_grid) v0[q] = A->rep->grid[q];
    if (ok) scenario_label(acc[0].label, sizeof acc[0].label, p, A->ranks, v0, u->shape_free);
  }
  /* the shapes: as compiled, all sizes x16, each size alone x16 and /16 */
  int nsize = 0;
  for (int q = 0; q < np; q++) nsize += !p->params[q].is_grid && !p->params[q].is_float;
  int nshapes = 2 + 2 * nsize;
  static const int64_t rank_counts[] = {64, 16, 8, 4, 2};
  /* where the grid's shape is free (u->shape_free), the sizes as compiled on every shape of
   * the grid at each rank count, the other sizes on the solver's shape */
  for (int rc = 0; rc < (int)(sizeof rank_counts / sizeof *rank_counts); rc++) {
    for (int sh = 0; sh < nshapes; sh++) {
      for (int gs = 0; gs == 0 || (sh == 0 && u->shape_free); gs++) {
        int64_t *v = ir_alloc((size_t)(np + 1) * sizeof *v);
        int which = sh >= 2 ? (sh - 2) / 2 : -1, seen = 0;
        for (int q = 0; q < np; q++) {
          v[q] = compiled_value(p, params, q);
          if (p->params[q].is_grid || p->params[q].is_float) continue;
          if (sh == 1 || seen == which) v[q] = (sh >= 2 && sh % 2) ? (v[q] / 16 > 0 ? v[q] / 16 : 1) : v[q] * 16;
          seen++;
        }
        if (!A->grid(A->grid_ctx, v, rank_counts[rc], gs)) break; /* not a grid, or past the last shape */
        count_scenario(A, acc, &nacc, cap, v, rank_counts[rc]);
      }
    }
  }
  /* the compile's choice, then the most often chosen (the first found among equals) */
  int *pick = ir_alloc((size_t)(nacc + 1) * sizeof *pick), npick = 1;
  pick[0] = 0;
  while (npick < A->maxv && npick < nacc) {
    int best = -1;
    for (int k = 1; k < nacc; k++) {
      bool taken = false;
      for (int q = 0; q < npick; q++) taken |= pick[q] == k;
      if (!taken && (best < 0 || acc[k].wins > acc[best].wins)) best = k;
    }
    pick[npick++] = best;
  }
  if (npick < (u->shape_free ? 1 : 2)) return DC_OK;
  u->variants = ir_alloc((size_t)(npick + 1) * sizeof *u->variants);
  for (int q = 0; q < npick; q++) {
    variant_acc *a = &acc[pick[q]];
    lw_program *vl = A->lp;
    int rc;
    if (q && ((rc = dc_lower(u, a->ir, &vl)) != DC_OK || !vl)) return rc == DC_NOMEM ? DC_NOMEM : DC_OK; /* (it lowered before) */
    u->variants[q] = (dc_variant){vl, a->speedup, a->threads, ir_strdup(a->label[0] ? a->label : "the compile's params"), a->schedule};
    u->nvariants = q + 1;
  }
  return DC_OK;
}

static int variants_scoped(const variants_args *A) {
  dc_unit *u = A->u;
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) {
    fe_error(u->src, (fe_loc){0, 0}, "out of memory");
    u->nvariants = 0;
    return DC_NOMEM;
  }
  int rc = variants_in(A);
  if (u->nvariants < (u->shape_free ? 1 : 2)) u->nvariants = 0;
  ir_scope_leave(&sc);
  return rc;
}

int dc_auto_variants(dc_unit *u, lw_program *lp, const dc_auto_report *rep, const int64_t *params, int64_t ranks,
                     int64_t mem_limit, const dc_machine_model *m, dc_grid_fn grid, void *grid_ctx, int maxv) {
  const variants_args A = {u, lp, rep, params, ranks, mem_limit, m ? m : dc_target_model(u), grid, grid_ctx, maxv};
  bool searched = false;
  for (int i = 0; i < rep->nstmts; i++) searched |= rep->stmts[i].chosen == 0;
  u->model[0] = A.m->bandwidth, u->model[1] = A.m->latency, u->model[2] = A.m->point_time, u->model[3] = A.m->memory_bandwidth;
  u->model[4] = A.m->node_bandwidth > 0 ? A.m->node_bandwidth : A.m->bandwidth;
  u->model[5] = A.m->node_latency > 0 ? A.m->node_latency : A.m->latency;
  u->model[6] = (double)A.m->ranks_per_node;
  u->mem_limit = mem_limit;
  u->nvariants = 0;
  bool sparse = false; /* sparse pieces and halo caches are per buffer slot: no variants */
  for (int t = 0; t < u->ast->ntensors; t++) sparse |= lw_sparse(u->ast, t);
  if ((!searched && !u->shape_free) || maxv < 2 || sparse) return DC_OK;
  return variants_scoped(&A);
}

/* The params the costs are evaluated at, in u's arena: a param without a value (given at
 * run time) at a nominal 1024. */
static const int64_t *nominal(const dc_unit *u, const int64_t *params) {
  int np = u->ast->nparams;
  int64_t *vals = ir_alloc((size_t)(np + 1) * sizeof *vals);
  for (int q = 0; q < np; q++) vals[q] = params[q] > 0 ? params[q] : 1024;
  return vals;
}

/* the bound of loop item L at the search's params (at least 1) */
static double loop_bound(const fe_item *L, const int64_t *params) {
  int64_t e = L->bound.is_param ? params[L->bound.param] : L->bound.value;
  return e > 1 ? (double)e : 1;
}

static void list_lhs(const fe_program *p, const fe_item *items, int n, bool *written) {
  for (int k = 0; k < n; k++)
    if (items[k].kind == FE_ITEM_LOOP) list_lhs(p, items[k].items, items[k].nitems, written);
    else if (items[k].stmt >= 0 && items[k].stmt < p->nstmts) {
      int t = p->stmts[items[k].stmt].lhs.tensor;
      if (t >= 0 && t < p->ntensors) written[t] = true;
    }
}

static void walk_loops(const dc_unit *u, const int64_t *params, const fe_item *items, int n, double entries, const fe_item *L,
                       stmt_loop *out) {
  const fe_program *p = u->ast;
  bool *unwritten = NULL;
  for (int k = 0; k < n; k++) {
    const fe_item *it = &items[k];
    if (it->kind == FE_ITEM_LOOP) {
      walk_loops(u, params, it->items, it->nitems, L ? entries * loop_bound(L, params) : 1, it, out);
      continue;
    }
    if (it->stmt < 0 || it->stmt >= u->ir->nstmts || !L) continue;
    if (!unwritten && !u->no_fuse) { /* the tensors the loop L writes, once */
      unwritten = ir_alloc((size_t)(p->ntensors + 1) * sizeof *unwritten);
      list_lhs(p, L->items, L->nitems, unwritten);
      for (int t = 0; t < p->ntensors; t++) unwritten[t] = !unwritten[t];
    }
    out[it->stmt] = (stmt_loop){entries, loop_bound(L, params), unwritten, L->number};
  }
}

/* where each of u's statements runs in its loops (stmt_loop), in u's arena */
static const stmt_loop *stmt_loops(const dc_unit *u, const int64_t *params) {
  stmt_loop *out = ir_alloc((size_t)(u->ir->nstmts + 1) * sizeof *out);
  for (int i = 0; i < u->ir->nstmts; i++) out[i] = (stmt_loop){1, 1, NULL, 0};
  walk_loops(u, params, u->ast->items, u->ast->nitems, 1, NULL, out);
  return out;
}

/* ... as formulas of the params, for the run-time choice (spmd_variants): a loop's bound is its
 * param's value or literal, at least 1 */
static const sym *bound_sym(const fe_item *L) {
  return L->bound.is_param ? sym_max(NULL, sym_param(L->bound.param), sym_const(1)) : sym_const(L->bound.value > 1 ? L->bound.value : 1);
}

static void walk_runs(const dc_unit *u, const fe_item *items, int n, const sym *entries, const fe_item *L, sp_stmt_runs *out) {
  const fe_program *p = u->ast;
  bool *unwritten = NULL;
  for (int k = 0; k < n; k++) {
    const fe_item *it = &items[k];
    if (it->kind == FE_ITEM_LOOP) {
      walk_runs(u, it->items, it->nitems, L ? sym_mul(entries, bound_sym(L)) : sym_const(1), it, out);
      continue;
    }
    if (it->stmt < 0 || it->stmt >= u->ir->nstmts || !L) continue;
    if (!unwritten && !u->no_fuse) { /* the tensors the loop L writes, once (as walk_loops) */
      unwritten = ir_alloc((size_t)(p->ntensors + 1) * sizeof *unwritten);
      list_lhs(p, L->items, L->nitems, unwritten);
      for (int t = 0; t < p->ntensors; t++) unwritten[t] = !unwritten[t];
    }
    out[it->stmt] = (sp_stmt_runs){entries, bound_sym(L), unwritten};
  }
}

const sp_stmt_runs *dc_stmt_runs(const dc_unit *u) {
  sp_stmt_runs *out = ir_alloc((size_t)(u->ir->nstmts + 1) * sizeof *out);
  for (int i = 0; i < u->ir->nstmts; i++) out[i] = (sp_stmt_runs){NULL, NULL, NULL};
  walk_runs(u, u->ast->items, u->ast->nitems, sym_const(1), NULL, out);
  return out;
}

/* Which statements the program as written (every unscheduled statement at its default) runs
 * fused with a neighbour (the SPMD rewrites' statement fusion; none with --no-fuse). */
static const bool *fused_by_default(dc_unit *u) {
  int n = u->ir->nstmts;
  bool *fused = ir_alloc((size_t)(n + 1) * sizeof *fused);
  if (u->no_fuse || n < 2) return fused;
  hushed h = hush(u);
  lw_program *lp = NULL;
  sp_program *sp = NULL;
  if (dc_lower(u, u->ir, &lp) == DC_OK && lp && dc_spmd(u, lp, &sp) == DC_OK && sp)
    for (int i = 0; i < sp->nfuncs && i < n; i++) {
      int into = sp->funcs[i].fused_into;
      if (into >= 0) fused[i] = true;
      if (into >= 0 && into < n) fused[into] = true;
    }
  unhush(u, h);
  return fused;
}

/* A statement that runs fused by default keeps its default unless some candidate receives
 * fewer bytes: the model prices each statement alone and does not see the passes over memory
 * that fusion saves (a streaming kernel's speedup would otherwise undo the fusion of CG's
 * vector updates and dot products). */
static void keep_fusion(dc_auto_stmt *st) {
  if (!st->ncand || !*st->cand[0].text) return;
  int def = -1;
  for (int q = 0; q < st->ncand; q++)
    if (!*st->cand[q].text) def = q;
  if (def < 0 || st->cand[0].cost.bytes < st->cand[def].cost.bytes || !st->cand[def].fits) return;
  dc_auto_cand t = st->cand[def];
  memmove(st->cand + 1, st->cand, (size_t)def * sizeof *st->cand);
  st->cand[0] = t;
  st->cmds = NULL, st->ncmds = 0;
  st->why_not = "it runs fused with its neighbours by default and no candidate receives fewer bytes: the default";
}

static int auto_below(dc_unit *u, const int64_t *params, int64_t ranks, int64_t mem_limit, const dc_machine_model *m,
                      double cutoff, ir_program **out, dc_auto_report *rep);
int dc_auto(dc_unit *u, const int64_t *params, int64_t ranks, int64_t mem_limit, const dc_machine_model *m,
            ir_program **out, dc_auto_report *rep) {
  return auto_below(u, params, ranks, mem_limit, m, HUGE_VAL, out, rep);
}

/* dc_auto, each dense statement's search bounded by `cutoff` (search.cutoff) */
static int auto_below(dc_unit *u, const int64_t *params, int64_t ranks, int64_t mem_limit, const dc_machine_model *m,
                      double cutoff, ir_program **out, dc_auto_report *rep) {
  ir_scope sc;
  ir_scope_enter(&sc, u->arena);
  if (setjmp(sc.oom)) {
    fe_error(u->src, (fe_loc){0, 0}, "out of memory");
    return DC_NOMEM;
  }
  const char *ex = getenv("DISTAL_AUTO_EXHAUSTIVE");
  search S = {.u = u, .params = nominal(u, params), .mem_limit = mem_limit, .m = m ? m : dc_target_model(u),
              .exhaustive = ex && *ex && strcmp(ex, "0"), .cutoff = cutoff};
  S.loops = stmt_loops(u, S.params);
  rep->ranks = ranks;
  rep->gpu = u->cuda;
  rep->m = *S.m;
  rep->nstmts = u->ir->nstmts;
  rep->stmts = ir_alloc((size_t)(u->ir->nstmts + 1) * sizeof *rep->stmts);
  const bool *fused = fused_by_default(u);
  for (int i = 0; i < u->ir->nstmts; i++) {
    dc_auto_stmt *st = &rep->stmts[i];
    st->stmt = i, st->chosen = -1;
    st->loop = S.loops[i].number, st->runs = S.loops[i].entries * S.loops[i].bound;
    st->why_not = not_searched(u, &u->ir->stmts[i]);
    if (!st->why_not) search_stmt(&S, i, st);
    if (!st->why_not && fused[i]) keep_fusion(st);
  }
  ir_scope_leave(&sc);
  /* the chosen schedules, applied to one copy */
  ir_program *ir = NULL;
  int rc = dc_clone(u, u->ir, &ir);
  for (int i = 0; i < rep->nstmts && rc == DC_OK; i++) {
    const dc_auto_stmt *st = &rep->stmts[i];
    if (st->chosen == 0 && st->ncmds) rc = dc_schedule(u, ir, i, st->cmds, st->ncmds);
  }
  *out = rc == DC_OK ? ir : NULL;
  return rc;
}

/* ---- printing ------------------------------------------------------------------------------ */
/* byte offset of a 1-based line and column */
static size_t offset_of(const fe_source *src, fe_loc loc) {
  size_t at = 0;
  for (int line = 1; line < loc.line && at < src->len; at++)
    if (src->text[at] == '\n') line++;
  return at + (size_t)(loc.col > 0 ? loc.col - 1 : 0);
}

/* the ';' that ends the statement starting at `at` (comments skipped, parentheses balanced) */
static size_t stmt_end(const fe_source *src, size_t at) {
  int depth = 0;
  for (; at < src->len; at++) {
    char c = src->text[at];
    if (c == '#' || (c == '/' && at + 1 < src->len && src->text[at + 1] == '/')) {
      while (at < src->len && src->text[at] != '\n') at++;
      continue;
    }
    if (c == '(' || c == '{') depth++;
    else if (c == ')' || c == '}') depth--;
    else if (c == ';' && depth <= 0) return at;
  }
  return src->len;
}

typedef struct {
  size_t at, skip; /* replace `skip` bytes at `at` */
  char *text;
} edit;

static int cmp_edit(const void *a, const void *b) {
  size_t x = ((const edit *)a)->at, y = ((const edit *)b)->at;
  return x != y ? (x < y ? -1 : 1) : strcmp(((const edit *)a)->text, ((const edit *)b)->text);
}

void dc_print_schedule(FILE *f, const dc_unit *u, const dc_auto_report *rep) {
  const fe_source *src = u->src;
  const fe_program *p = u->ast;
  edit *ed = calloc((size_t)(p->nstmts + p->ntensors + p->nparams + 1), sizeof *ed);
  int ne = 0;
  if (!ed) return;
  /* a grid shape --auto chose other than the solver's: the free grid params' values written,
   * `param NAME = V;` before the machine for a param that grid(...) declares, ` = V` in an
   * explicit declaration */
  for (int q = 0; rep && rep->grid && rep->given && q < p->nparams; q++) {
    const fe_param *pr = &p->params[q];
    if (!pr->is_grid || rep->given[q] > 0) continue;
    char *t = malloc(strlen(pr->name) + 64);
    if (!t) continue;
    if (pr->implicit) {
      size_t at = 0;
      for (int mi = 0; mi < p->nmachines; mi++) {
        size_t m = offset_of(src, p->machines[mi].loc);
        while (m > 0 && src->text[m - 1] != '\n') m--;
        if (mi == 0 || m < at) at = m;
      }
      sprintf(t, "param %s = %lld; # the grid's shape --auto chose\n", pr->name, (long long)rep->grid[q]);
      ed[ne++] = (edit){at, 0, t};
    } else {
      sprintf(t, " = %lld", (long long)rep->grid[q]);
      ed[ne++] = (edit){stmt_end(src, offset_of(src, pr->loc)), 0, t};
    }
  }
  for (int i = 0; rep && i < rep->nstmts && i < p->nstmts; i++) {
    const dc_auto_stmt *st = &rep->stmts[i];
    if (st->chosen == 0 && !st->ncmds) {
      /* the model chose the owner-computes default: no commands to write, the choice said */
      static const char note[] = " # --auto: the owner-computes default (no schedule commands)";
      char *t = malloc(sizeof note);
      if (!t) continue;
      memcpy(t, note, sizeof note);
      size_t semi = stmt_end(src, offset_of(src, p->stmts[i].loc));
      ed[ne++] = (edit){semi < src->len ? semi + 1 : semi, 0, t};
      continue;
    }
    if (st->chosen != 0 || !st->ncmds) continue;
    size_t end = stmt_end(src, offset_of(src, p->stmts[i].loc));
    size_t n = strlen(st->cand[0].text) + 8;
    char *t = malloc(n);
    if (!t) continue;
    snprintf(t, n, "\n  %s", st->cand[0].text);
    ed[ne++] = (edit){end, 0, t};
  }
  for (int q = 0; q < p->ntensors; q++) {
    const fe_tensor *t = &p->tensors[q];
    if (!t->has_dist || !t->dist.chosen || !t->dist.nlevels) continue;
    char *b = NULL;
    size_t bl = 0;
    FILE *m = open_memstream(&b, &bl);
    if (!m) continue;
    fprintf(m, "%s(", t->dist.machine_name);
    for (int l = 0; l < t->dist.nlevels; l++) {
      const fe_dist_level *lv = &t->dist.levels[l];
      fputs(l ? "; " : "", m);
      /* in the compact form, the declared dims named a, b, c, ... (a mode order stores
       * them permuted: storage dim j is declared dim mode[j]) */
      for (int x = 0; x < lv->nx; x++) fputc('a' + x, m);
      fputs(" -> ", m);
      for (int y = 0; y < lv->ny; y++) {
        const fe_ydim *Y = &lv->y[y];
        if (Y->kind == FE_Y_NAME) {
          int j = 0;
          for (int x = 0; x < lv->nx; x++)
            if (!strcmp(lv->x[x], Y->name)) j = x;
          fputc('a' + (t->mode ? t->mode[j] : j), m);
        } else if (Y->kind == FE_Y_FIXED && Y->fixed >= 0 && Y->fixed <= 9)
          fprintf(m, "%lld", (long long)Y->fixed);
        else
          fputc('*', m);
      }
    }
    fputc(')', m);
    fclose(m);
    ed[ne++] = (edit){offset_of(src, t->dist.loc), strlen(t->dist.machine_name), b};
  }
  qsort(ed, (size_t)ne, sizeof *ed, cmp_edit);
  fprintf(f, "# %s with every schedule the compiler chose written out (distalc --emit schedule%s)\n", src->path,
          rep ? " --auto" : "");
  if (rep && rep->grid)
    fprintf(f, "# the grid's params are written with the shape chosen for %lld ranks: remove them to let the rank count decide\n",
            (long long)rep->ranks);
  size_t at = 0;
  for (int k = 0; k < ne; k++) {
    fwrite(src->text + at, 1, ed[k].at - at, f);
    fputs(ed[k].text, f);
    at = ed[k].at + ed[k].skip;
    free(ed[k].text);
  }
  fwrite(src->text + at, 1, src->len - at, f);
  free(ed);
}

void dc_print_auto(FILE *f, const dc_auto_report *rep) {
  fprintf(f, "auto-scheduling (distalc --auto; predicted for %lld ranks and these params, a param without a value at 1024, "
             "by %s%s):\n",
          (long long)rep->ranks,
          rep->model ? "the machine model " : rep->gpu ? "the default machine model of a GPU rank" : "the default machine model",
          rep->model ? rep->model : "");
  const dc_machine_model *m = &rep->m;
  if (m->node_bandwidth > 0 || m->node_latency > 0) { /* node rates: which collectives stay within a node */
    char nodes[96] = "one node";
    if (m->ranks_per_node > 0) snprintf(nodes, sizeof nodes, "nodes of %lld consecutive ranks", (long long)m->ranks_per_node);
    fprintf(f, "  collectives within one node at %.3g B/s and %.3g s a message, the others at %.3g B/s and %.3g s; the ranks on %s\n",
            m->node_bandwidth > 0 ? m->node_bandwidth : m->bandwidth, m->node_latency > 0 ? m->node_latency : m->latency, m->bandwidth,
            m->latency, nodes);
  }
  if (rep->shape) fprintf(f, "  the grid's shape (its params are free; shapes and layouts chosen together):\n%s", rep->shape);
  if (rep->layouts) fprintf(f, "  layouts of the tensors declared `@ M` with no mapping:\n%s", rep->layouts);
  for (int i = 0; i < rep->nstmts; i++) {
    const dc_auto_stmt *st = &rep->stmts[i];
    if (st->chosen < 0) {
      fprintf(f, "  statement %d: kept: %s\n", i + 1, st->why_not ? st->why_not : "not searched");
      continue;
    }
    fprintf(f, "  statement %d: %d candidates", i + 1, st->ncand);
    if (st->npruned)
      fprintf(f, " (%d more schedules not tried: their communication alone is predicted slower than a candidate's whole time)", st->npruned);
    fprintf(f, "%s%s", st->why_not ? "; " : "", st->why_not ? st->why_not : "");
    if (st->loop && st->ncand) /* the program's model: a run per iteration, a loop's invariant fetches once */
      fprintf(f, "; in loop %d: %.4g run%s (its loops' bounds), the chosen one's share of the program %.3g s", st->loop, st->runs,
              st->runs == 1 ? "" : "s", st->cand[0].run_seconds);
    fputc('\n', f);
    int shown = 0;
    for (int q = 0; q < st->ncand; q++) {
      const dc_auto_cand *c = &st->cand[q];
      bool def = !*c->text;
      if (shown >= 4 && !def) continue; /* the best four, and the default wherever it ranks */
      shown++;
      char sp[64] = "";
      if (c->cost.sparse_entries > 0) snprintf(sp, sizeof sp, ", %.4g sparse entries sorted in", c->cost.sparse_entries);
      char share[64] = ""; /* in a loop: what the candidates are ranked by */
      if (st->loop) snprintf(share, sizeof share, " a run, %.3g s of the program", c->run_seconds);
      fprintf(f, "    %s %.3g s%s (received %lld bytes in %lld messages%s, buffers %lld bytes%s, %lld iterations, %.4g bytes from memory): ",
              q == 0 ? "chosen" : "then  ", c->seconds, share, (long long)c->cost.bytes, (long long)c->cost.msgs, sp,
              (long long)c->cost.buffer, c->fits ? "" : ", over the limit", (long long)c->cost.points, c->cost.mem_bytes);
      if (def) fputs("the owner-computes default", f);
      for (const char *x = c->text; *x; x++) /* one line */
        if (*x == '\n') {
          fputc(' ', f);
          while (x[1] == ' ') x++;
        } else
          fputc(*x, f);
      fputc('\n', f);
    }
  }
}

/* ---- layouts -------------------------------------------------------------------------------- */
/* the bytes the model gives one position of tensor q: its element, or for a sparse tensor its
 * share of a stored entry (lw_density), the value and 8 bytes per coordinate */
static double position_bytes(const fe_program *p, int q, const int64_t *params) {
  const fe_tensor *t = &p->tensors[q];
  double es = t->type == FE_FLOAT || t->type == FE_INT32 ? 4 : 8, dens = lw_density(p, q, params);
  return dens < 1 ? (es + 8 * t->order) * dens : es;
}

/* dc_program_seconds' charge for the replicas of the program's data (0 on a machine of several
 * levels or where a grid dim is not known) */
static double replica_seconds(const dc_unit *u, const int64_t *params, const dc_machine_model *m) {
  const fe_program *p = u->ast;
  if (u->ir->machine < 0 || p->machines[u->ir->machine].nlevels != 1) return 0;
  const fe_grid *G = &p->machines[u->ir->machine].levels[0];
  int64_t ranks = 1;
  for (int g = 0; g < G->ndims; g++) {
    int64_t d = G->dims[g].is_param ? params[G->dims[g].param] : G->dims[g].value;
    if (d <= 0) return 0;
    ranks *= d;
  }
  double bytes = 0;
  for (int q = 0; q < p->ntensors; q++) {
    const fe_tensor *t = &p->tensors[q];
    bool written = false;
    for (int i = 0; i < p->nstmts && !written; i++) written = p->stmts[i].lhs.tensor == q;
    if (written || !t->has_dist || t->dist.nlevels < 1) continue;
    /* its copies: the product of the '*' dims (a fixed coordinate: one copy along its dim) */
    double copies = 1, whole = position_bytes(p, q, params);
    const fe_dist_level *L = &t->dist.levels[0];
    for (int k = 0; k < L->ny && k < G->ndims; k++)
      if (L->y[k].kind == FE_Y_STAR)
        copies *= (double)(G->dims[k].is_param ? params[G->dims[k].param] : G->dims[k].value);
    for (int x = 0; x < t->order; x++) {
      const fe_size *sz = &t->dims[x];
      whole *= (double)(sz->is_param ? (params[sz->param] > 0 ? params[sz->param] : 1024) : sz->value);
    }
    bytes += whole * (copies - 1) / (double)ranks;
  }
  return bytes / m->bandwidth;
}

/* A statement's share of dc_program_seconds, kept for the layouts tried next (dc_auto_layouts):
 * the statement's time depends on its own tensors' layouts and on whether it runs fused by
 * default, which `key` names, and on what else is fixed within one dc_auto_layouts call (the
 * program's text outside the layouts, params, memory limit, machine model).  A time above the
 * cutoff it was searched with is a bound, not the time: it answers only a cutoff no higher. */
typedef struct {
  char *key;
  double sec, cutoff;
  bool ok;
} stmt_memo_entry;

typedef struct {
  int n, cap;
  stmt_memo_entry *e;
} stmt_memo;

static void memo_free(stmt_memo *mm) {
  for (int q = 0; q < mm->n; q++) free(mm->e[q].key);
  free(mm->e);
}

static stmt_memo_entry *memo_find(stmt_memo *mm, const char *key) {
  for (int q = 0; q < mm->n; q++)
    if (!strcmp(mm->e[q].key, key)) return &mm->e[q];
  return NULL;
}

static void memo_put(stmt_memo *mm, const char *key, double sec, double cutoff, bool ok) {
  stmt_memo_entry *e = memo_find(mm, key);
  if (!e) {
    if (mm->n == mm->cap) {
      int cap = 2 * mm->cap + 16;
      stmt_memo_entry *ne = realloc(mm->e, (size_t)cap * sizeof *ne);
      if (!ne) return;
      mm->e = ne, mm->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return;
    e = &mm->e[mm->n++];
    e->key = k;
  }
  e->sec = sec, e->cutoff = cutoff, e->ok = ok;
}

/* dc_program_seconds, statement i's time looked up in memo under keys[i] and the statement's
 * fused flag (memo NULL or keys[i] NULL: searched) */
static bool program_seconds(dc_unit *v, const int64_t *params, int64_t mem_limit, const dc_machine_model *m, double cutoff,
                            stmt_memo *memo, char *const *keys, double *out) {
  ir_scope sc;
  ir_scope_enter(&sc, v->arena);
  if (setjmp(sc.oom)) return false;
  const char *ex = getenv("DISTAL_AUTO_EXHAUSTIVE");
  search S = {.u = v, .params = nominal(v, params), .mem_limit = mem_limit, .m = m ? m : dc_target_model(v),
              .exhaustive = ex && *ex && strcmp(ex, "0"), .cutoff = cutoff};
  S.loops = stmt_loops(v, S.params);
  const bool *fused = fused_by_default(v);
  double total = 0;
  bool ok = true;
  for (int i = 0; i < v->ir->nstmts && ok; i++) {
    char key[4096];
    bool keyed = memo && keys && keys[i] && snprintf(key, sizeof key, "%d %d %s", i, fused[i], keys[i]) < (int)sizeof key;
    stmt_memo_entry *e = keyed ? memo_find(memo, key) : NULL;
    if (e && (e->sec <= e->cutoff || cutoff <= e->cutoff)) {
      ok = e->ok, total += e->sec;
      continue;
    }
    /* as dc_auto: the statement's search, then its chosen candidate's time or its default's */
    dc_auto_stmt st = {.stmt = i, .chosen = -1};
    st.why_not = not_searched(v, &v->ir->stmts[i]);
    if (!st.why_not) search_stmt(&S, i, &st);
    if (!st.why_not && fused[i]) keep_fusion(&st);
    double sec = 0;
    dc_auto_cand c;
    cmdlist none = {0};
    if (st.chosen == 0 && st.ncand) sec = st.cand[0].run_seconds;
    else if (try_cand(&S, i, &none, &c)) sec = c.run_seconds;
    else ok = false;
    if (keyed) memo_put(memo, key, sec, cutoff, ok);
    total += sec;
  }
  ir_scope_leave(&sc);
  *out = total + replica_seconds(v, params, S.m);
  return ok;
}

/* (autosched.h) */
bool dc_program_seconds(dc_unit *v, const int64_t *params, int64_t mem_limit, const dc_machine_model *m, double cutoff,
                        double *out) {
  return program_seconds(v, params, mem_limit, m, cutoff, NULL, NULL, out);
}

typedef struct {
  size_t at, len; /* the machine name after '@' */
  const fe_tensor *t;
  char *map;      /* the mapping text chosen so far */
} layout_slot;

static char *layout_text(const fe_source *src, const layout_slot *sl, int n) {
  size_t len = src->len + 1;
  for (int k = 0; k < n; k++) len += strlen(sl[k].map) + 1;
  char *b = malloc(len), *w = b;
  if (!b) return NULL;
  size_t at = 0;
  for (int k = 0; k < n; k++) { /* slots are in source order */
    memcpy(w, src->text + at, sl[k].at - at), w += sl[k].at - at;
    w += sprintf(w, "%s", sl[k].map);
    at = sl[k].at + sl[k].len;
  }
  memcpy(w, src->text + at, src->len - at), w += src->len - at;
  *w = 0;
  return b;
}

static void expr_tensors(const ir_expr *e, bool *acc, int nt) {
  if (!e) return;
  if (e->kind == IR_ACCESS && e->tensor >= 0 && e->tensor < nt) acc[e->tensor] = true;
  expr_tensors(e->a, acc, nt);
  expr_tensors(e->b, acc, nt);
}

/* program_seconds' key of statement i of v under the layouts sl[0..n) (slot k holds tensor
 * tix[k]): the layouts of the tensors it accesses, and of those these are `balanced by`
 * (malloc'ed; NULL: no key, the statement is searched) */
static char *stmt_layout_key(const dc_unit *v, int i, const layout_slot *sl, const int *tix, int n) {
  const fe_program *p = v->ast;
  const ir_stmt *s = &v->ir->stmts[i];
  const cin_node *asg = cin_assign((s->before_owner ? s->before_owner : s)->root);
  bool *acc = calloc((size_t)p->ntensors + 1, sizeof *acc);
  if (!asg || !acc) return free(acc), NULL;
  if (asg->lhs_tensor >= 0 && asg->lhs_tensor < p->ntensors) acc[asg->lhs_tensor] = true;
  expr_tensors(asg->rhs, acc, p->ntensors);
  for (int t = 0; t < p->ntensors; t++)
    if (acc[t] && p->tensors[t].balance > 0 && p->tensors[t].balance - 1 < p->ntensors) acc[p->tensors[t].balance - 1] = true;
  char *key = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&key, &len);
  if (f) {
    for (int k = 0; k < n; k++)
      if (acc[tix[k]]) fprintf(f, "%d=%s;", tix[k], sl[k].map);
    fclose(f);
  }
  free(acc);
  return key;
}

/* mapping number `code` of tensor t over a level of k dims: grid dim q gets tensor dim
 * (code / (r+1)^q) % (r+1), r meaning '*'; NULL where a tensor dim repeats.  Written in the
 * compact form, the dims named a, b, c, ... (`M(ab -> a*)`). */
static char *mapping(const fe_tensor *t, const char *machine, int k, int64_t code) {
  int r = t->order, used[64] = {0};
  char b[512];
  int w = snprintf(b, sizeof b, "%s(", machine);
  for (int x = 0; x < r && w < (int)sizeof b; x++) w += snprintf(b + w, sizeof b - (size_t)w, "%c", 'a' + x);
  w += snprintf(b + w, sizeof b - (size_t)w, " -> ");
  for (int q = 0; q < k && w < (int)sizeof b; q++) {
    int d = (int)(code % (r + 1));
    code /= r + 1;
    if (d < r && used[d]++) return NULL;
    if (d < r) w += snprintf(b + w, sizeof b - (size_t)w, "%c", 'a' + d);
    else w += snprintf(b + w, sizeof b - (size_t)w, "*");
  }
  if (w >= (int)sizeof b - 2) return NULL;
  snprintf(b + w, sizeof b - (size_t)w, ")");
  return strdup(b);
}

/* bytes of t's block per rank under mapping `code` (grid dims' sizes from params); -1 unknown */
static int64_t block_bytes(const fe_program *p, const fe_tensor *t, const fe_machine *M, const int64_t *params, int64_t code) {
  int r = t->order, k = M->levels[0].ndims;
  int64_t ext[64];
  for (int x = 0; x < r; x++) {
    const fe_size *sz = &t->dims[x];
    ext[x] = sz->is_param ? (params[sz->param] > 0 ? params[sz->param] : 1024) : sz->value;
  }
  for (int q = 0; q < k; q++) {
    int d = (int)(code % (r + 1));
    code /= r + 1;
    const fe_size *g = &M->levels[0].dims[q];
    int64_t G = g->is_param ? params[g->param] : g->value;
    if (G <= 0) return -1;
    if (d < r) ext[d] = (ext[d] + G - 1) / G;
  }
  double b = position_bytes(p, (int)(t - p->tensors), params);
  for (int x = 0; x < r; x++) b *= (double)ext[x];
  return b >= 9.2e18 ? INT64_MAX : (int64_t)ceil(b);
}

char *dc_auto_layouts(dc_unit *u, const int64_t *params, int64_t mem_limit, const dc_machine_model *m, char **report) {
  const fe_program *p = u->ast;
  const fe_source *src = u->src;
  *report = NULL;
  if (u->ir->machine < 0 || p->machines[u->ir->machine].nlevels != 1) return NULL;
  const fe_machine *M = &p->machines[u->ir->machine];
  const int k = M->levels[0].ndims;
  layout_slot sl[64];
  int n = 0, tix[64];
  char *log = NULL;
  size_t loglen = 0;
  FILE *lf = open_memstream(&log, &loglen);
  for (int q = 0; q < p->ntensors && n < 64; q++) {
    const fe_tensor *t = &p->tensors[q];
    if (!t->has_dist || !t->dist.chosen || t->order < 1 || strcmp(t->dist.machine_name, M->name)) continue;
    if (t->order > 8 || t->mode) { /* kept as sema wrote it; the listing says so */
      if (lf)
        fprintf(lf, "  tensor %s: the default mapping (not searched: %s)\n", t->name,
                t->mode ? "its format stores its dims in another order" : "more than 8 dims");
      continue;
    }
    /* the default mapping: leading dims over the grid dims, as sema wrote it */
    int64_t code = 0, mul = 1;
    for (int g = 0; g < k; g++, mul *= t->order + 1) code += (g < t->order ? g : t->order) * mul;
    tix[n] = q;
    sl[n] = (layout_slot){offset_of(src, t->dist.loc), strlen(t->dist.machine_name), t, mapping(t, M->name, k, code)};
    if (!sl[n].map) {
      for (int s = 0; s < n; s++) free(sl[s].map);
      if (lf) fclose(lf);
      free(log);
      return NULL;
    }
    n++;
  }
  if (!n) { /* nothing to choose: the report names the tensors kept */
    if (lf) fclose(lf);
    if (log && *log) *report = log;
    else free(log);
    return NULL;
  }
  /* the memory a rank may give a tensor's block: --mem-per-rank, else this machine's memory
   * shared by its cores */
  int64_t limit = mem_limit;
  if (limit <= 0) {
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE), cores = sysconf(_SC_NPROCESSORS_ONLN);
    limit = pages > 0 && psize > 0 ? (int64_t)pages * psize / (cores > 0 ? cores : 1) : INT64_MAX;
  }
  /* the predicted time of the program with the layouts chosen so far (< 0: not known) */
  double cur_sec = -1;
  /* Precondition: within this call only the layouts in sl change between the programs tried,
   * and a statement's time depends only on the layouts of the tensors it accesses and on
   * whether it runs fused (program_seconds' key).  Rule: a statement whose key was costed
   * before is not searched again. */
  stmt_memo memo = {0};
  for (int s = 0; s < n; s++) {
    int64_t count = 1;
    for (int g = 0; g < k; g++) count *= sl[s].t->order + 1;
    /* the current layouts first (the default, then the choices so far): a layout must be
     * predicted faster to replace them; after the first tensor the program is the one the
     * previous tensor's choice costed */
    char *best = cur_sec >= 0 ? strdup(sl[s].map) : NULL;
    double best_sec = best ? cur_sec : -1;
    int tried = 0;
    for (int64_t code = best ? 0 : -1; code < count && code < 4096; code++) {
      char *map = code < 0 ? strdup(sl[s].map) : mapping(sl[s].t, M->name, k, code);
      if (!map) continue;
      /* a layout whose block does not fit the memory per rank is not a candidate */
      int64_t bb = code < 0 ? 0 : block_bytes(p, sl[s].t, M, params, code);
      if (code >= 0 && (bb < 0 || bb > limit)) {
        free(map);
        continue;
      }
      if (code >= 0 && !strcmp(map, sl[s].map)) { /* the current layout: costed already */
        tried += best != NULL;
        free(map);
        continue;
      }
      char *saved = sl[s].map;
      sl[s].map = map;
      char *text = layout_text(src, sl, n);
      sl[s].map = saved;
      dc_unit *v = NULL;
      double sec = 0;
      /* only a layout faster than the best so far matters: the search is bounded by it (each
       * choice compares exact times: a layout predicted at or above the bound is not chosen,
       * whatever its time) */
      bool ok = text && dc_compile(src->path, text, strlen(text),
                                   &(dc_options){.sink = {quiet, NULL}, .no_lower = true, .target = DC_TARGET_CPU}, &v) == DC_OK;
      if (ok) v->no_fuse = u->no_fuse; /* fusion decides what runs fused and what a loop fetches once */
      char **keys = ok ? calloc((size_t)v->ir->nstmts + 1, sizeof *keys) : NULL;
      if (keys) {
        /* the layout now tried, for the keys */
        sl[s].map = map;
        for (int i = 0; i < v->ir->nstmts; i++) keys[i] = stmt_layout_key(v, i, sl, tix, n);
        sl[s].map = saved;
      }
      ok = ok && program_seconds(v, params, mem_limit, m, best ? best_sec : HUGE_VAL, &memo, keys, &sec);
      for (int i = 0; keys && i < v->ir->nstmts; i++) free(keys[i]);
      free(keys);
      if (v) dc_unit_free(v);
      free(text);
      tried += ok && code >= 0;
      if (ok && (!best || sec < best_sec * (1 - 1e-9))) {
        free(best);
        best = map, best_sec = sec;
      } else
        free(map);
    }
    cur_sec = best ? best_sec : -1;
    if (!best) continue; /* nothing could be costed: the default stays */
    if (lf) fprintf(lf, "  tensor %s: %s (of %d layouts; the program predicted at %.3g s)\n", sl[s].t->name, best, tried, best_sec);
    free(sl[s].map);
    sl[s].map = best;
  }
  memo_free(&memo);
  if (lf) fclose(lf);
  *report = log;
  char *text = layout_text(src, sl, n);
  for (int s = 0; s < n; s++) free(sl[s].map);
  return text;
}
