/* autosched.h -- distalc --auto (LANGUAGE.md section 6): a schedule for every statement that
 * has none, chosen by a cost model over candidates that the compiler builds, lowers and costs
 * as it would compile them; and distalc --emit schedule, the program with the chosen
 * schedules and the default distributions written out as .dtl.
 *
 * The search (per statement with no schedule commands, on a CPU machine of one level or two
 * (the inner one of at most as many dims), reading and writing dense tensors): the
 * owner-computes default; every assignment of the machine's k grid dims to k distinct index
 * variables (`distribute`), on a machine of two levels each with every ordered choice of k1
 * of its inner loops for the inner level's k1 dims (a second `distribute`, onto M[1]); with
 * a summed variable left undistributed, the same with that variable split into panels (a
 * half, a quarter, ... a 64th of its extent, at least 128 wide) that every rank receives
 * along the grid (`split`, `reorder`, `communicate`, as SUMMA) or divided into as many panels
 * as grid dim 0 has ranks and rotated (`divide`, `rotate`: Cannon); each of these also with a
 * loop on the rank's threads where the model gives it several (`parallelize`); and each of these with its innermost loops replaced by
 * every catalogue kernel the compiler accepts for them (`substitute`).  Each candidate is
 * scheduled on a copy of the program, lowered, and costed from the plan's formulas
 * (lw_stmt_cost) at the params and rank count given: predicted seconds = messages x latency
 * + the first step's bytes / bandwidth + the larger of the other steps' bytes / bandwidth and
 * the loops' time, itself the larger of the loop iterations x time per iteration (divided by a
 * kernel's speedup) and the bytes the loops touch / the memory bandwidth: communication in
 * steps overlaps the previous step's computation, as the pipeline rewrite makes it.  A
 * candidate that the compiler rejects is dropped; the choice is the fastest candidate whose
 * buffers fit the memory limit, else the default.  The default is always a candidate, so the
 * choice never costs more than it unless the default does not fit.  dc_auto chooses for one
 * rank count and the param values of the compile (the defaults, --set, --ranks);
 * dc_auto_variants keeps the choices at others for the generated plan_create to choose
 * among at run time. */
#ifndef DISTAL_AUTOSCHED_H
#define DISTAL_AUTOSCHED_H

#include "compiler.h"

typedef struct {
  double bandwidth;    /* bytes per second a rank receives */
  double latency;      /* seconds per message */
  double point_time;   /* seconds per iteration of a statement's loops on one rank */
  double memory_bandwidth; /* bytes per second a rank's loops stream from its memory (all its
                        * threads): a statement's loops take at least its bytes' time */
  double threads;      /* threads per rank: a catalogue kernel (BLAS) and a parallelized loop
                        * run on all of them, other loops on one (1: no parallelize candidates) */
  /* a broadcast or reduction among the ranks of one node (shared memory), and any pattern
   * where the whole grid is on one node: bytes per second and seconds per message
   * (0: bandwidth and latency) */
  double node_bandwidth, node_latency;
  /* seconds per stored entry of a sparse box a rank receives (its coordinates and value sorted
   * into the rank's piece), on top of its bytes' time */
  double sparse_entry_time;
  /* how the search places ranks: nodes of this many consecutive ranks (0: one node holds
   * them all); distalc sets it from --ranks-per-node or a hierarchical machine's inner levels */
  int64_t ranks_per_node;
} dc_machine_model;
/* The seconds of c's messages (latency) and of its bytes (bandwidth) under m: the part among
 * one node's ranks at the node's rates, the rest at the network's. */
double dc_comm_latency(const dc_machine_model *m, const lw_cost *c);
double dc_comm_transfer(const dc_machine_model *m, const lw_cost *c);
extern const dc_machine_model dc_default_model; /* a CPU rank */
extern const dc_machine_model dc_gpu_model;     /* a rank with one GPU (the CUDA target) */
/* The defaults of u's target: dc_gpu_model for the CUDA target, else dc_default_model. */
const dc_machine_model *dc_target_model(const dc_unit *u);
/* Read a machine model file (distalc --calibrate writes one): lines `bandwidth B`,
 * `latency S`, `point_time S`, `memory_bandwidth B`, `threads T`, `node_bandwidth B`,
 * `node_latency S`, `sparse_entry_time S` (positive numbers, T whole;
 * `#` starts a comment), each at most once,
 * the others keeping *m's values (the caller's defaults).  Returns false with "PATH:LINE: error: ..." in err. */
bool dc_read_model(const char *path, dc_machine_model *m, char *err, size_t errlen);
/* The source of the calibration program: an MPI C program that rank 0 and 1 run, printing
 * the model file on rank 0's stdout. */
extern const char dc_calibrate_source[];

typedef struct {
  const char *text;    /* the schedule commands as .dtl (".distribute(...)\n  .split(...)"), "" for the default */
  double seconds;      /* predicted, one run of the statement */
  double run_seconds;  /* its share of the program's run: in a loop, every iteration up to the
                        * loops' bounds, the loop's invariant fetches once per entry of the loop;
                        * what the search ranks candidates by */
  double run_comm;     /* ... of which its messages' latency and bytes' time (a bound on the share
                        * of any candidate that moves what it moves) */
  bool fits;           /* its buffers fit the memory limit */
  double speedup;      /* its leaf kernel's speedup in the model (1: none) */
  double threads;      /* the threads its loops run on in the model (1: one) */
  double work;         /* predicted seconds of its loops alone, without the memory's bound */
  lw_cost cost;
} dc_auto_cand;

typedef struct {
  int stmt;            /* statement index */
  const char *why_not; /* NULL: searched; else why the statement keeps its schedule */
  int ncand;
  dc_auto_cand *cand;  /* sorted by predicted share of the program's run; cand[0] is the choice */
  int loop;            /* the number of its innermost `repeat` loop (0: in none) */
  double runs;         /* the runs the model counts: the product of its loops' bounds (1: in none) */
  int npruned;         /* candidates not costed: a bound on their time exceeds a costed one's
                        * (DISTAL_AUTO_EXHAUSTIVE=1 costs them all; the choice is the same) */
  int chosen;          /* index of the choice in cand (0), -1 where not searched */
  const fe_command *cmds;
  int ncmds;
} dc_auto_stmt;

typedef struct {
  int nstmts;
  dc_auto_stmt *stmts;
  int64_t ranks;
  const char *model;   /* the machine model's file, NULL: the defaults */
  bool gpu;            /* the CUDA target: the defaults are dc_gpu_model */
  dc_machine_model m;  /* the model the search used */
  const char *layouts; /* dc_auto_layouts' report, NULL: no layout chosen */
  const char *shape;   /* the grid's shape chosen where it is free (distalc), NULL: not free */
  const int64_t *grid; /* the params at that shape where it is not the solver's, else NULL */
  const int64_t *given; /* the params before the grid was solved (-1: no value) */
} dc_auto_report;

/* Search every statement of u->ir without schedule commands; *out is a copy of u->ir with
 * the chosen schedules applied, *rep what was considered (both in u's arena).  A statement's
 * candidates are ranked by their share of the program's run (dc_auto_cand.run_seconds: in a
 * loop, every run and a loop's invariant fetches once), the one that fits the memory limit
 * and is predicted least chosen.  params: the
 * values the costs are evaluated at (grid params solved for `ranks`); mem_limit: bytes of
 * buffers per rank (0: none). */
int dc_auto(dc_unit *u, const int64_t *params, int64_t ranks, int64_t mem_limit, const dc_machine_model *m,
            ir_program **out, dc_auto_report *rep);

/* Solve the grid params of vals (a copy of the params) for `ranks` ranks, as shape number
 * `shape` of dtl_grid_shapes (0: the solver's); false where they do not form the machine's
 * grid or there are fewer shapes. */
typedef bool (*dc_grid_fn)(void *ctx, int64_t *vals, int64_t ranks, int shape);

/* The run-time choice (the rank count and params are known only when the program runs).
 * The search runs again at other rank counts (2, 4, 8, 16, 64: those that form the grid) and
 * shapes (every size param 16 times larger, and each alone 16 times larger and smaller; where
 * u->shape_free, the sizes as compiled also on every shape of the grid); the distinct programs
 * it chooses, lp (the choice at the params and ranks of the compile) first and then the most
 * often chosen, at most `maxv`, become u->variants, each lowered, for the generated
 * plan_create to choose among by the same model at the real rank count and params
 * (spmd_variants), and with them the grid's shape where u->shape_free.  Not for sparse
 * tensors, GPU or when nothing was searched and the shape is not free.  params: as for
 * dc_auto before the grid is solved; rep: dc_auto's report for lp.  Returns DC_OK (with
 * u->nvariants 0 where one variant is all there is and the shape is not free). */
int dc_auto_variants(dc_unit *u, lw_program *lp, const dc_auto_report *rep, const int64_t *params, int64_t ranks,
                     int64_t mem_limit, const dc_machine_model *m, dc_grid_fn grid, void *grid_ctx, int maxv);

/* Where each statement of u runs in its loops, as formulas of the params (a loop's bound: its
 * param or literal, at least 1) and the tensors its innermost loop leaves unwritten: what the
 * run-time choice weighs each statement's predicted time by (spmd_variants), as the search
 * weighs its candidates.  In u's arena. */
const sp_stmt_runs *dc_stmt_runs(const dc_unit *u);

/* The predicted time of the whole program of v at params (grid params solved), as --auto
 * compares layouts and grid shapes: each statement without schedule commands at its best
 * candidate (as dc_auto searches), the others at their schedule, and the replicas of the
 * program's data: a tensor no statement writes comes from the user in its layout, so what its
 * '*' grid dims copy beyond a rank's share (bytes x (copies - 1) / ranks) is charged as
 * received once at m's bandwidth (replicating every input is not free; a written tensor's
 * replicas cost what the program does to compute them).  False where some statement cannot
 * be costed. */
bool dc_program_seconds(dc_unit *v, const int64_t *params, int64_t mem_limit, const dc_machine_model *m, double cutoff,
                        double *out);
/* cutoff: the caller uses the result only where the program is
 * predicted below it (HUGE_VAL: always).  Candidates that cannot bring a statement below it
 * are not costed, so *out is exact where it is below the cutoff and otherwise only known to
 * be above it. */

/* --auto's layouts (LANGUAGE.md section 3, `@ M` with no mapping): each such tensor of a
 * flat CPU machine gets, one after another in declaration order (the others as chosen so
 * far, the rest at the default), the mapping of its dimensions onto the grid dims (each
 * dim at most once, `*` for the others) that minimizes the predicted time of the whole
 * program, every statement scheduled by dc_auto's search: a layout is chosen jointly with
 * the statements that read and write it, the redistributions they imply included.  Returns
 * the source with every such `@ M` written out (malloc'ed), and in *report (malloc'ed) one
 * line per tensor; NULL where no tensor is left to choose. */
char *dc_auto_layouts(dc_unit *u, const int64_t *params, int64_t mem_limit, const dc_machine_model *m, char **report);

/* --emit schedule: the source with each searched statement's chosen commands inserted before
 * its ';' and every `@ M` without mapping written out with the mapping the compiler chose.
 * rep may be NULL (no --auto: only the distributions). */
void dc_print_schedule(FILE *f, const dc_unit *u, const dc_auto_report *rep);
/* --emit plan with --auto: per statement, the choice and the best alternatives, costed. */
void dc_print_auto(FILE *f, const dc_auto_report *rep);

#endif
