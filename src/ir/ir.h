/* ir.h -- intermediate representations of distalc: symbolic integer expressions (sym_),
 * tensor index notation with reduction placement, concrete index notation (cin_) and the
 * scheduling transformations (ir_schedule) with their provenance graph of derived index
 * variables.  This header is the stage's whole interface. */
#ifndef DISTAL_IR_H
#define DISTAL_IR_H

#include <setjmp.h>

#include "frontend/frontend.h"
#include "kernels/catalogue.h"

/* ---- arenas: every IR object lives in an arena and is freed with it (sym.c) -------------
 * ir_alloc allocates in the current arena: the process's default one, or the arena of the
 * innermost ir_scope.  A program built in its own arena (compiler.h gives each compiled unit
 * one) is freed with it, whatever other programs the process builds meanwhile. */
typedef struct ir_arena ir_arena;
ir_arena *ir_arena_new(void); /* NULL when out of memory */
void ir_arena_delete(ir_arena *a);
/* A test hook: allocations that would take the arena past `bytes` fail (0: no limit). */
void ir_arena_set_limit(ir_arena *a, size_t bytes);
size_t ir_arena_used(const ir_arena *a); /* bytes handed out so far */

void *ir_alloc(size_t n);       /* zeroed */
char *ir_strdup(const char *s);
/* An array arr of n entries of `size` bytes with room for *cap, given room for `need`: arr, or
 * a copy in the current arena twice as large (*cap updated).  Arrays that grow entry by entry
 * copy at each doubling only: the arena frees nothing, and a copy per addition would hold the
 * square of the entries. */
void *ir_reserve(void *arr, int n, int need, int *cap, size_t size);
void ir_arena_free(void);       /* frees every object of the current arena, which stays usable */
/* A point in an arena's allocations: ir_arena_release frees every object allocated in it
 * after ir_arena_mark (a search that builds and costs a candidate program, then keeps only
 * numbers, gives its memory back); objects allocated before stay. */
typedef struct {
  const void *block;
  size_t block_used, used;
} ir_mark;
ir_mark ir_arena_mark(const ir_arena *a);
void ir_arena_release(ir_arena *a, ir_mark m);

/* Running out of memory.  ir_scope_enter makes `a` the current arena (NULL: the default one)
 * and the scope the recovery point; ir_scope_leave restores the arena and recovery point
 * before it.  When an allocation fails, ir_alloc leaves the innermost scope itself and
 * longjmps to its `oom`, where setjmp then returns 1:
 *     ir_scope sc;
 *     ir_scope_enter(&sc, arena);
 *     if (setjmp(sc.oom)) return report_out_of_memory();   (the scope is already left)
 *     ... build IR ...
 *     ir_scope_leave(&sc);
 * What was built before the failure stays in the arena until it is freed.  Every entry
 * point of compiler.h, and distalc's main through them, runs the stages inside a scope; an
 * allocation that fails outside any scope has nowhere to go and ends the process (abort),
 * which only a caller that skipped the scope can reach. */
typedef struct ir_scope {
  jmp_buf oom;
  ir_arena *arena, *prev_arena;
  struct ir_scope *prev;
} ir_scope;
void ir_scope_enter(ir_scope *sc, ir_arena *a);
void ir_scope_leave(ir_scope *sc);

/* ---- symbolic integer expressions (sym.c) --------------------------------------------- */
/* Atoms: constants, params (p.NAME), grid coordinates (coords[d]) and variables (loop
 * counters of generated code).  Operations: + * floordiv ceildiv mod min max.  Built
 * through the sym_ constructors, which simplify: sums become sorted linear combinations
 * of atoms, constants fold, and min/max/mod/div use the known ranges of atoms (params >= 1,
 * variables and coordinates >= 0) and, where given, the facts of a sym_facts. */
typedef enum {
  SYM_CONST, SYM_PARAM, SYM_COORD, SYM_VAR,
  SYM_ADD, SYM_MUL, SYM_FLOORDIV, SYM_CEILDIV, SYM_MOD, SYM_MIN, SYM_MAX,
  /* split[id][a]: the first coordinate of block a of a balanced partition (fe_split_of), known
   * only at run time; nondecreasing in a, split[id][0] = 0 and the last is the extent.  b is
   * the value of section 3's blocks (min(E, a * ceil(E/G))), what compile-time estimates use. */
  SYM_SPLIT
} sym_kind;

typedef struct sym sym;
struct sym {
  sym_kind kind;
  int64_t c; /* SYM_CONST */
  int id;    /* PARAM: param index; COORD: grid dim; VAR: variable id; SPLIT: split id */
  const sym *a, *b;
};

/* What proofs may assume beyond the ranges every atom has: the size of each grid dim
 * (0 <= coords[d] < dims[d]) and the largest value of each variable (a loop counter runs
 * over [0, var_max[id]]); NULL entries and ids past the arrays are unknown.  Variable ids
 * are per statement, so the lowering keeps one sym_facts per statement (lw_stmt.facts).
 * The functions below that decide by proof take the facts; NULL facts assume nothing more. */
typedef struct {
  int ndims;
  const sym *const *dims;
  int nvars;
  const sym **var_max;
} sym_facts;

const sym *sym_const(int64_t c);
const sym *sym_param(int id);
const sym *sym_coord(int d);
const sym *sym_var(int id);
const sym *sym_add(const sym *a, const sym *b);
const sym *sym_sub(const sym *a, const sym *b);
const sym *sym_mul(const sym *a, const sym *b);
const sym *sym_floordiv(const sym *a, const sym *b);
const sym *sym_ceildiv(const sym *a, const sym *b);
const sym *sym_mod(const sym_facts *f, const sym *a, const sym *b);
const sym *sym_min(const sym_facts *f, const sym *a, const sym *b);
const sym *sym_max(const sym_facts *f, const sym *a, const sym *b);
const sym *sym_from_size(const fe_size *s);
/* split[id][a] of a balanced partition of extent E over G blocks (SYM_SPLIT) */
const sym *sym_split(int id, const sym *a, const sym *E, const sym *G);

bool sym_equal(const sym *a, const sym *b);
int sym_compare(const sym *a, const sym *b); /* a total order, for canonical forms */
bool sym_is_const(const sym *a, int64_t *value);
/* Does the expression mention this atom? */
bool sym_uses(const sym *e, sym_kind kind, int id);
/* Does the expression contain a balanced partition's boundary (SYM_SPLIT)? */
bool sym_has_split(const sym *e);
/* Every variable id moved by off, the expression otherwise as it is (not re-simplified). */
const sym *sym_shift_vars(const sym *e, int off);
/* Replace every atom (kind, id) by `by`, re-simplifying (with the facts). */
const sym *sym_subst(const sym_facts *f, const sym *e, sym_kind kind, int id, const sym *by);
/* Can we prove a <= b from the atom ranges and the facts? false means "unknown". */
bool sym_prove_le(const sym_facts *f, const sym *a, const sym *b);
/* Every occurrence of coords[d] lies under a `mod` by m. */
bool sym_coord_only_under_mod(const sym *e, int d, const sym *m);

/* Evaluation: values of params, coords and vars; returns false if an atom is unknown. */
typedef struct {
  const int64_t *params;
  const int64_t *coords;
  const int64_t *vars;
  int nvars;
  const int64_t *const *splits; /* SYM_SPLIT: the run time's boundaries; NULL (or a NULL entry):
                                  * section 3's blocks */
} sym_env;
bool sym_eval(const sym *e, const sym_env *env, int64_t *out);
/* e with what env fixes evaluated (its params and coords, and every subexpression of them
 * alone) and its vars left: a new expression (in the current arena) that sym_eval gives the
 * same value or failure as e for every value of the vars, in far fewer steps where e repeats
 * param-only parts (a box's bounds, evaluated at every step of a communicate point).  env's
 * vars are not read. */
const sym *sym_fold(const sym *e, const sym_env *env);
/* e compiled for evaluation at many values of its atoms (a box bound at every step of a
 * communicate point): sym_run gives what sym_eval(e) gives, the same value or the same
 * failure, without walking the expression (in the current arena; e must outlive it). */
typedef struct {
  int n;
  const struct sym_op *ops;
} sym_code;
sym_code sym_compile(const sym *e);
bool sym_run(const sym_code *code, const sym_env *env, int64_t *out);

/* Printing.  The namer prints an atom; NULL namer: p.NAME-free default (p0, c0, v0). */
typedef void (*sym_namer)(FILE *f, const sym *atom, void *ctx);
void sym_print(FILE *f, const sym *e, sym_namer namer, void *ctx); /* as C */

/* ---- tensor index notation with reduction placement (cin.c) ----------------------------- */
typedef enum {
  IR_ACCESS, IR_NUM, IR_ADD, IR_SUB, IR_MUL, IR_DIV, IR_NEG,
  IR_CALL, /* an element-wise function: func of a (and b when it takes two) */
  IR_PARAM /* the value of param `param` */
} ir_expr_kind;

typedef struct ir_expr ir_expr;
struct ir_expr {
  ir_expr_kind kind;
  int tensor; /* IR_ACCESS */
  int nidx;
  int *vars; /* original index variables, one per tensor dim */
  double num;    /* IR_NUM: the nearest double */
  bool is_int;
  int64_t ival;  /* IR_NUM when is_int: the exact value */
  const char *text; /* IR_NUM as written */
  fe_func func;     /* IR_CALL */
  int param;        /* IR_PARAM: index into the program's params */
  ir_expr *a, *b;
  /* Reduction placement (TACO): this operand of a sum contributes only at the first
   * iteration of these summed variables, whose reduction encloses the sum. */
  int nguards;
  int *guards;
  fe_loc loc;
};

/* ---- concrete index notation ---------------------------------------------------------- */
typedef enum { REL_DIVIDE, REL_SPLIT, REL_FUSE, REL_ROTATE, REL_PRECOMPUTE } ir_rel_kind;

/* One provenance relation: how derived variables recover the ones they replace.
 *   divide(i, io, ii, N): i = io*ceil(E/N) + ii     split(i, io, ii, N): i = io*N + ii
 *   fuse(i, j, f): i = f / E_j, j = f mod E_j        rotate(t, I, r): t = (r + sum I) mod E_t
 *   precompute(e, i, iw, T): iw ranges like i over the workspace T. */
typedef struct {
  ir_rel_kind kind;
  int in[2];  /* replaced variables (divide/split/rotate/precompute: in[0]; fuse: i, j) */
  int out[2]; /* created variables (divide/split: outer, inner; fuse/rotate/precompute: out[0]) */
  const sym *factor; /* divide/split */
  int split;         /* divide by a grid dim: 1 + the balanced partition (fe_split_of) whose blocks
                      * it takes, i = split[io] + ii; 0: the blocks of section 3 */
  int nrot;
  int *rot; /* rotate: the variables I */
  fe_loc loc;
  const char *text; /* the command as written, for printing */
} ir_rel;

typedef struct {
  const char *name;
  bool original;      /* an index variable of the statement */
  const sym *extent;  /* natural extent: a function of params only (an upper bound) */
  int def;            /* relation that created it (-1: original) */
  int use;            /* relation that replaced it (-1: still a loop or original in use) */
  bool reduction;     /* original: summed over; derived: derived from a summed variable */
  fe_loc loc;
} ir_var;

typedef enum { PAR_NONE, PAR_CPU_THREAD, PAR_CPU_VECTOR, PAR_GPU_BLOCK, PAR_GPU_WARP,
               PAR_GPU_THREAD } ir_par_unit;
typedef enum { RACE_NO_RACES, RACE_ATOMICS, RACE_IGNORE } ir_race;
typedef kc_kernel ir_kernel; /* the leaf kernels of kernels/catalogue.h */

typedef enum { CIN_FORALL, CIN_ASSIGN, CIN_WHERE } cin_kind;
typedef struct cin_node cin_node;
struct cin_node {
  cin_kind kind;
  /* CIN_FORALL */
  int var;
  cin_node *body;
  bool distributed;
  int dist_level; /* machine level */
  int dist_dim;   /* grid dim (numbered after the commands; see dist_owner) */
  bool dist_owner; /* distributed by the owner-computes default: dist_dim is the grid dim of the
                    * data, given, not numbered in nest order */
  fe_loc dist_loc; /* the distribute command (owner computes: the statement) */
  ir_par_unit par;
  ir_race race;
  fe_loc par_loc;   /* the parallelize command (errors found later point at it) */
  int ncomm;
  int *comm; /* tensors communicated at this loop */
  ir_kernel kernel; /* substitute: set on the outermost substituted loop */
  int nsubst;       /* number of loops replaced by the kernel */
  fe_loc kernel_loc; /* the substitute command */
  /* CIN_ASSIGN */
  int lhs_tensor;
  int nlhs;
  int *lhs_vars;
  bool accumulate; /* += into existing values (output not zeroed) */
  bool reduces;    /* has summed variables */
  ir_expr *rhs;
  /* CIN_WHERE: consumer after producer (precompute) */
  cin_node *producer, *consumer;
  int workspace; /* tensor index of the workspace (>= prog->ntensors: a temporary) */
};

typedef struct ir_stmt {
  int index;
  const fe_stmt *ast;
  int nvars;
  ir_var *vars;
  int nrels;
  ir_rel *rels;
  cin_node *root;
  int machine;         /* -1: no machine involved */
  int nlevels_used;
  int ndist;           /* distributed loops */
  bool has_distribute; /* a distribute command was applied */
  /* The statement as its commands left it, before the owner-computes default distributed it
   * or the default loop order reordered it (NULL: neither applied).  Scheduling further starts again from it; it is never
   * changed (a copy of the statement shares it). */
  const struct ir_stmt *before_owner;
  bool has_precompute;
  int nst;
  const char **st; /* the s.t. clause: every applied command, as written */
  /* workspaces created by precompute */
  int nwork;
  struct { const char *name; int nidx; int *vars; fe_type type; } *work;
} ir_stmt;

typedef struct {
  fe_program *ast;
  int nstmts;
  ir_stmt *stmts;
  int machine; /* the machine of the program (-1 if none) */
} ir_program;

/* Build tensor index notation and default concrete index notation (loop order: the
 * variables in order of first appearance, left side first, as TACO does). */
ir_program *ir_build(fe_program *prog);
/* Apply every statement's schedule; errors are reported at the command.  Returns the
 * number of errors. stop_after >= 0 applies only that many commands of each statement.
 * A statement that no distribute command distributed is then distributed like its data, the
 * owner-computes default of LANGUAGE.md section 5 (its s.t. clause lists what it added, each
 * marked "(owner computes)"). */
int ir_schedule(ir_program *ir, int stop_after);
/* Apply more commands to one statement, after those it has (a copy's, say, to try a schedule):
 * as ir_schedule does, errors reported at the commands through ir's source, whose text the
 * carets quote.  The commands' names and grids resolve in ir's program, so take them from a
 * program with the same declarations (the same source scheduled otherwise).  s need not be
 * one of ir->stmts (an ir_stmt_clone).  The commands apply to the statement as its own
 * commands left it: an owner-computes default it had is taken back first and applied again
 * afterwards where the statement still has no distribute.  Returns the number of errors. */
int ir_schedule_stmt(ir_program *ir, ir_stmt *s, const fe_command *cmds, int ncmds);
/* Deep copies in the current arena, to schedule or lower without touching the original: a
 * statement (variables, relations, its concrete index notation with the expressions, the
 * s.t. clause, the workspaces) and a program (every statement).  A copy shares only what
 * never changes: the AST it was built from and symbolic expressions. */
ir_stmt *ir_stmt_clone(const ir_stmt *s);
ir_program *ir_program_clone(const ir_program *ir);
/* Print a statement's concrete index notation with its s.t. relations. */
void ir_print_cin(FILE *f, const ir_program *ir, const ir_stmt *s);
void ir_print_expr(FILE *f, const ir_program *ir, const ir_stmt *s, const ir_expr *e);

/* Loop-nest helpers. */
int cin_loops(const cin_node *root, const cin_node **out, int max); /* the forall chain: its length, the first max */
const cin_node *cin_assign(const cin_node *root);                  /* innermost statement */
int ir_var_find(const ir_stmt *s, const char *name);
const char *ir_kernel_name(ir_kernel k);
/* The operands of an assignment as kernel k of the catalogue sees them (kc_access): op[0]
 * its output, then its factors left to right, each also in factor[] (NULL for the output);
 * loop q of the n substituted loops walks the original variable orig[q].  A factor is an
 * access that walks a substituted loop; what walks none (numbers, params, accesses indexed
 * by outer loops only, and what the product is divided by, and a minus sign) makes up the
 * coefficient: the form's scalar operand where it has one (axpy's a; 1 when there is
 * nothing), the last factor then, else *coef (NULL where it is 1), which multiplies the
 * product; *divides (divides may be NULL) says whether the product is divided by something.
 * Returns the number of operands, 0 when the right side is not such a product (or has more
 * factors than a kernel). */
int ir_kernel_operands(const cin_node *asg, ir_kernel k, const int *orig, int n, const ir_expr **factor,
                       kc_access *op, const ir_expr **coef, bool *divides);
fe_type ir_tensor_type(const ir_program *ir, int tensor);
/* Whether the assignment asg has kernel k's form (the catalogue's) with its n substituted
 * loops walking the original variables orig[0..n-1] in that order, every tensor of one type:
 * what substitute asks of the statement once the loops themselves are valid (innermost,
 * contiguous, not distributed).  The form depends on the statement and orig only, not on the
 * rest of the schedule, so a search can ask it before building a candidate. */
typedef enum {
  IR_FITS,
  IR_FITS_TYPES, /* a product of two tensors of other types */
  IR_FITS_COEF,  /* an integral statement scaled by a non-integer or divided */
  IR_FITS_FORM
} ir_fit;
ir_fit ir_kernel_fits(const ir_program *ir, const cin_node *asg, ir_kernel k, const int *orig, int n);

#endif
