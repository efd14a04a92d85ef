/* frontend.h -- the front end of distalc: source text, diagnostics, lexer, parser, AST and
 * semantic checks of the .dtl language (LANGUAGE.md).  This header is the stage's whole
 * interface; every exported name carries the fe_ prefix. */
#ifndef DISTAL_FRONTEND_H
#define DISTAL_FRONTEND_H

/* Documented limits (README, "Choices"): longer identifiers and higher orders are located
 * errors.  Everything else (tensors, statements, commands, loops, params) grows as needed. */
#define FE_MAX_IDENT 128
#define FE_MAX_DIMS 8 /* tensor order; grid dims of a machine, all levels together */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- source and diagnostics (diag.c) ------------------------------------------------ */

typedef struct {
  int line, col; /* 1-based; line 0 means "no location" */
} fe_loc;

/* A diagnostic as a sink receives it.  `text` is exactly what distalc prints for it: for an
 * error or note in the program, "PATH:LINE:COL: error: MESSAGE", the source line and a caret
 * line (or "PATH: error: MESSAGE" without a location); for a failure of the compiler itself
 * (fe_tool_error), "distalc: MESSAGE".  Every line ends in '\n'; len counts the bytes (a
 * source line may hold NUL bytes).  The strings live until the sink returns. */
typedef enum { FE_DIAG_ERROR, FE_DIAG_NOTE } fe_diag_kind;
typedef struct {
  fe_diag_kind kind;
  const char *path; /* the source's name, as given */
  fe_loc loc;       /* line 0: no location */
  const char *message;
  const char *text;
  size_t len;
} fe_diag;

/* Where diagnostics go: fn(ctx, diag) for each one.  With fn NULL (the default) they are
 * written to the source's err stream (stderr unless given), as distalc prints them. */
typedef struct {
  void (*fn)(void *ctx, const fe_diag *d);
  void *ctx;
} fe_sink;

typedef struct fe_source {
  const char *path; /* as given by the user, printed in diagnostics */
  char *text;       /* whole file, NUL-terminated (owned) */
  size_t len;
  FILE *err;      /* where diagnostics go without a sink (stderr by default) */
  fe_sink sink;   /* where diagnostics go (fn NULL: to err) */
  int nerrors;    /* errors reported so far */
  int max_errors; /* stop reporting after this many (0: no limit) */
} fe_source;

/* Read a file; on failure print "distalc: cannot read PATH: REASON" and return NULL. */
fe_source *fe_source_open(const char *path, FILE *err);
/* The same with diagnostics to a sink, the failure to read included. */
fe_source *fe_source_open_sink(const char *path, const fe_sink *sink);
/* Wrap an in-memory buffer (copied); used by tests and the fuzzer. */
fe_source *fe_source_from_string(const char *path, const char *text, size_t len, FILE *err);
void fe_source_free(fe_source *src);

/* Print "PATH:LINE:COL: error: MESSAGE", the source line and a caret under COL; count it. */
void fe_error(fe_source *src, fe_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void fe_verror(fe_source *src, fe_loc loc, const char *fmt, va_list ap);
/* Same format with "note:" instead of "error:", not counted. */
void fe_note(fe_source *src, fe_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A failure of the compiler rather than of the program (a file it cannot read, no memory):
 * "distalc: MESSAGE", to the sink (NULL or fn NULL: to err, or stderr when err is NULL).
 * path names the file concerned, for the sink.  fe_tool_error_src sends it to a source's
 * sink and counts it as an error. */
void fe_tool_error(const fe_sink *sink, FILE *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void fe_tool_error_src(fe_source *src, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- AST (parser.c) ----------------------------------------------------------------- */

/* A size in a declaration: an integer literal or a param. */
typedef struct {
  bool is_param;
  int64_t value; /* literal value when !is_param */
  int param;     /* index into fe_program.params when is_param */
  fe_loc loc;
} fe_size;

typedef struct {
  char *name;
  bool has_default;
  int64_t value;   /* default when has_default (an integer param) */
  bool is_float;   /* declared with a floating default: a double, only in expressions and conditions */
  double fvalue;   /* its default */
  char *ftext;     /* ... as written */
  bool is_grid;    /* used as a dimension of some machine level */
  bool implicit;   /* declared by its use in grid(...) */
  fe_loc loc;
} fe_param;

typedef enum { FE_CPU, FE_GPU } fe_proc_kind;

typedef struct {
  int ndims;
  fe_size *dims;
  fe_proc_kind kind;
  fe_loc loc;
} fe_grid;

typedef struct {
  char *name;
  int nlevels; /* 1 for a flat machine */
  fe_grid *levels;
  bool hierarchical; /* written with [ ... ] */
  fe_loc loc;
} fe_machine;

typedef enum { FE_DOUBLE, FE_FLOAT, FE_INT32, FE_INT64 } fe_type;
typedef enum { FE_DENSE, FE_COMPRESSED } fe_level_format;

/* One entry of the Y side of a distribution. */
typedef enum { FE_Y_NAME, FE_Y_FIXED, FE_Y_STAR } fe_ydim_kind;
typedef struct {
  fe_ydim_kind kind;
  char *name;    /* FE_Y_NAME: the name as written */
  int xindex;    /* FE_Y_NAME: index into the level's X (set by sema) */
  int64_t fixed; /* FE_Y_FIXED */
  fe_loc loc;
} fe_ydim;

/* One level of a distribution: X -> Y. */
typedef struct {
  int nx;
  char **x;
  fe_loc *xloc;
  int ny;
  fe_ydim *y;
  fe_loc loc;
} fe_dist_level;

typedef struct {
  char *machine_name;
  bool chosen; /* `@ M` with no mapping: sema writes the default mapping (LANGUAGE.md section 3) */
  int machine; /* index into fe_program.machines (set by sema) */
  int nlevels;
  fe_dist_level *levels;
  fe_loc loc;
} fe_dist;

typedef struct {
  char *name;
  int order; /* 0 for a scalar */
  fe_size *dims;
  fe_type type;
  fe_level_format *formats; /* one per dimension (all FE_DENSE by default) */
  bool has_format;
  /* A mode order (`csc`, `order (d0, ...)`): level k stores the declared dimension mode[k].
   * The parser turns the tensor into its storage order (dims, distribution names and every
   * access's indices permuted), so everything after it sees a row-major tensor; mode is kept
   * for files and imports, which name the declared order.  NULL: row-major. */
  int *mode;
  fe_loc mode_loc;
  /* `balanced` after the distribution (a sparse tensor: every dimension it partitions is split
   * into blocks of about equal stored entries, chosen at run time) or `balanced by T` (each
   * partitioned dimension takes the blocks of T's dimension on the same grid dimension).
   * balance: after sema, 0 for neither, else 1 + the tensor whose splits this one uses (itself
   * for `balanced`). */
  bool balanced;
  const char *balance_by;
  fe_loc balance_loc, balance_by_loc;
  int balance;
  bool has_dist;
  fe_dist dist;
  bool is_temp;     /* declared with `temp`: lives inside the program only */
  fe_loc loc;
} fe_tensor;

typedef struct {
  char *tname;
  int tensor; /* index into fe_program.tensors (set by sema) */
  int nidx;
  char **idx; /* index variable names */
  fe_loc *idxloc;
  bool parens; /* written with (...) (a scalar may be written bare) */
  fe_loc loc;
} fe_access;

typedef enum {
  FE_E_ACCESS, FE_E_NUM, FE_E_ADD, FE_E_SUB, FE_E_MUL, FE_E_DIV, FE_E_NEG,
  FE_E_CALL, /* an element-wise function of one or two arguments (a, b) */
  FE_E_PARAM, /* a param's value (sema turns a bare name that is a param into one) */
  /* only in a loop's condition: comparisons (a op b) and logic */
  FE_E_LT, FE_E_LE, FE_E_GT, FE_E_GE, FE_E_EQ, FE_E_NE, FE_E_AND, FE_E_OR, FE_E_NOT
} fe_expr_kind;

/* The element-wise functions of LANGUAGE.md section 4.  Their names are not reserved: a name
 * followed by '(' is a call only where no tensor of that name is declared before it. */
typedef enum { FE_F_SQRT, FE_F_EXP, FE_F_LOG, FE_F_ABS, FE_F_ERF, FE_F_POW, FE_F_MIN, FE_F_MAX, FE_F_COUNT } fe_func;
/* The function named by the len bytes at name, or -1. */
int fe_find_func(const char *name, size_t len);
const char *fe_func_name(fe_func f);
int fe_func_arity(fe_func f);       /* 1 or 2 */
bool fe_func_integer(fe_func f);    /* allowed in an integer statement (abs, min, max) */

typedef struct fe_expr fe_expr;
struct fe_expr {
  fe_expr_kind kind;
  fe_loc loc;
  fe_access acc;  /* FE_E_ACCESS */
  double num;     /* FE_E_NUM: the nearest double (of ival when is_int) */
  bool is_int;    /* FE_E_NUM written without '.' or exponent */
  int64_t ival;   /* FE_E_NUM when is_int: the exact value ("-9223372036854775808", a unary
                   * minus of 2^63, is folded into one literal INT64_MIN) */
  char *text;     /* FE_E_NUM as written */
  fe_func func;   /* FE_E_CALL */
  int nargs;      /* FE_E_CALL: the arguments written (a and b hold the first two) */
  int param;      /* FE_E_PARAM: index into fe_program.params */
  fe_expr *a, *b; /* operands (b unused for FE_E_NEG; a call's arguments) */
};

/* Schedule command arguments. */
typedef enum {
  FE_ARG_IDENT, /* name */
  FE_ARG_INT,   /* 42 */
  FE_ARG_LIST,  /* {a, b, c}: items are FE_ARG_IDENT */
  FE_ARG_GRID,  /* grid(...) / Grid(...) inline */
  FE_ARG_LEVEL, /* M[1] */
  FE_ARG_EXPR   /* an expression (first argument of precompute) */
} fe_arg_kind;

typedef struct fe_arg fe_arg;
struct fe_arg {
  fe_arg_kind kind;
  fe_loc loc;
  char *name;     /* IDENT, LEVEL (machine name) */
  int64_t ival;   /* INT; LEVEL index */
  int nitems;     /* LIST */
  fe_arg *items;  /* LIST */
  fe_grid grid;   /* GRID (dims may name params) */
  fe_expr *expr;  /* EXPR */
};

typedef struct {
  char *name;
  fe_loc loc;
  int nargs;
  fe_arg *args;
} fe_command;

typedef struct {
  fe_access lhs;
  bool accumulate; /* += or -= */
  bool subtract;   /* -=: the same as += -(rhs) (the IR negates the right side) */
  fe_expr *rhs;
  int ncmds;
  fe_command *cmds;
  fe_loc loc;
} fe_stmt;

/* The program's control structure (LANGUAGE.md section 9): statements and loops in order.
 * Statements are also numbered in fe_program.stmts, in source order; items refer to them. */
typedef enum { FE_ITEM_STMT, FE_ITEM_LOOP } fe_item_kind;
typedef struct fe_item fe_item;
struct fe_item {
  fe_item_kind kind;
  int stmt;        /* FE_ITEM_STMT: index into fe_program.stmts */
  /* FE_ITEM_LOOP: repeat bound [until (cond)] { items } */
  fe_size bound;   /* at most this many iterations */
  fe_expr *cond;   /* NULL: no until */
  int nitems;
  fe_item *items;
  int number;      /* 1-based, in source order */
  fe_loc loc;
};

typedef struct fe_program {
  fe_source *src;
  int nparams, nmachines, ntensors, nstmts;
  fe_param *params;
  fe_machine *machines;
  fe_tensor *tensors;
  fe_stmt *stmts;
  int nitems;      /* the top level */
  fe_item *items;
  int nloops;
} fe_program;

/* Parse a whole program.  On syntax errors reports them through fe_error and returns
 * NULL.  The program keeps a pointer to src. */
fe_program *fe_parse(fe_source *src);
void fe_program_free(fe_program *prog);

/* Look-ups by name; -1 when absent. */
int fe_find_param(const fe_program *prog, const char *name);
int fe_find_machine(const fe_program *prog, const char *name);
int fe_find_tensor(const fe_program *prog, const char *name);
/* Does the tensor have a compressed level (a sparse tensor)? */
bool fe_tensor_sparse(const fe_tensor *t);
/* Balanced partitions (`balanced`, `balanced by T`): each pair (balanced tensor T, grid dim g of
 * the machine's only level that T partitions) is a split, numbered in declaration order of T, then
 * g.  fe_split_of: the split whose blocks tensor t's partitioned dimension on grid dim g takes, -1
 * where it takes the blocks of LANGUAGE.md section 3.  fe_split_info: its tensor, grid dim and the
 * tensor dim it splits. */
int fe_nsplits(const fe_program *prog);
int fe_split_of(const fe_program *prog, int t, int g);
void fe_split_info(const fe_program *prog, int id, int *tensor, int *gdim, int *tdim);

/* ---- semantic checks (sema.c) ------------------------------------------------------- */

/* Resolve names and check every rule of LANGUAGE.md sections 3 and 4 that does not need
 * the schedule.  Returns the number of errors reported (0: the program is valid). */
int fe_check(fe_program *prog);

/* Printing helpers (used by --emit cin and by tests). */
const char *fe_type_name(fe_type t);
/* Print a size as written: literal or param name. */
void fe_print_size(FILE *f, const fe_program *prog, const fe_size *s);
/* Print an expression fully parenthesized only where needed, e.g. "B(i,k) * C(k,j)". */
void fe_print_expr(FILE *f, const fe_expr *e);
/* A literal's value in a float statement: its text (as written) rounded once to float, as C
 * reads "0.1f"; (float)num when text is NULL.  Infinite when out of float's range. */
float fe_float_literal(const char *text, double num);

#endif
