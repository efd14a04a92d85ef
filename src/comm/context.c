/* context.c -- element types, the processor grid (Cartesian communicator and its cached
 * sub-communicators), errors and their agreement across ranks.  The solver of grid params
 * from the rank count is grid_solve.c. */
#include "distal/runtime.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

size_t dtl_type_size(dtl_type t) {
  switch (t) {
  case DTL_DOUBLE:
    return sizeof(double);
  case DTL_FLOAT:
    return sizeof(float);
  case DTL_INT32:
    return sizeof(int32_t);
  case DTL_INT64:
    return sizeof(int64_t);
  }
  return 0;
}

MPI_Datatype dtl_type_mpi(dtl_type t) {
  switch (t) {
  case DTL_DOUBLE:
    return MPI_DOUBLE;
  case DTL_FLOAT:
    return MPI_FLOAT;
  case DTL_INT32:
    return MPI_INT32_T;
  case DTL_INT64:
    return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

const char *dtl_type_name(dtl_type t) {
  switch (t) {
  case DTL_DOUBLE:
    return "double";
  case DTL_FLOAT:
    return "float";
  case DTL_INT32:
    return "int32";
  case DTL_INT64:
    return "int64";
  }
  return "?";
}

/* ---- errors ------------------------------------------------------------------------------ */
const char *dtl_ctx_error(const dtl_ctx *ctx) { return ctx ? ctx->err : "no context"; }

int dtl_fail(dtl_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return 1;
}

int dtl_mpi_fail(dtl_ctx *ctx, int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "error %d", rc);
  return dtl_fail(ctx, "%s failed: %s", what, msg);
}

/* Agreement on failure: the lowest failing rank's message is broadcast so that every rank
 * reports the same text (rank 0 prints it in drivers). */
int dtl_agree(dtl_ctx *ctx, int *flag) {
  if (MPI_Bcast(flag, 1, MPI_INT, 0, ctx->comm) != MPI_SUCCESS)
    return dtl_fail(ctx, "MPI_Bcast failed while agreeing on a loop's condition");
  return 0;
}

bool dtl_is_root(const dtl_ctx *ctx) {
  int r = 0;
  MPI_Comm_rank(ctx->comm, &r);
  return r == 0;
}

int dtl_any_error(dtl_ctx *ctx, int err) {
  int mine = err ? ctx->rank : ctx->size, first = ctx->size;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, ctx->cart) != MPI_SUCCESS) {
    if (!err)
      dtl_fail(ctx, "MPI_Allreduce failed while agreeing on an error");
    return 1;
  }
  if (first == ctx->size)
    return 0;
  ctx->err[sizeof ctx->err - 1] = '\0';
  MPI_Bcast(ctx->err, (int)sizeof ctx->err, MPI_CHAR, first, ctx->cart);
  return 1;
}

int dtl_count_type(dtl_type t, int64_t n, int *count, MPI_Datatype *dt) {
  MPI_Datatype base = dtl_type_mpi(t);
  if (n <= INT_MAX) {
    *count = (int)n;
    *dt = base;
    return MPI_SUCCESS;
  }
  /* n = q * chunk + r elements as one struct of two contiguous parts */
  const int64_t chunk = (int64_t)1 << 30;
  int64_t q = n / chunk, r = n % chunk;
  MPI_Datatype blk, parts[2];
  int rc = MPI_Type_contiguous((int)chunk, base, &blk);
  if (rc != MPI_SUCCESS)
    return rc;
  parts[0] = blk;
  parts[1] = base;
  int lens[2] = {(int)q, (int)r};
  MPI_Aint disp[2] = {0, (MPI_Aint)(q * chunk * (int64_t)dtl_type_size(t))};
  rc = MPI_Type_create_struct(2, lens, disp, parts, dt);
  MPI_Type_free(&blk);
  if (rc == MPI_SUCCESS)
    rc = MPI_Type_commit(dt);
  *count = 1;
  return rc;
}

void dtl_count_free(MPI_Datatype *dt) {
  if (*dt == MPI_DATATYPE_NULL)
    return;
  int combiner, ni, na, nt;
  MPI_Type_get_envelope(*dt, &ni, &na, &nt, &combiner);
  if (combiner != MPI_COMBINER_NAMED)
    MPI_Type_free(dt);
  *dt = MPI_DATATYPE_NULL;
}

/* ---- the grid -------------------------------------------------------------------------- */
static void format_dims(char *buf, size_t len, int ndims, const int64_t *dims) {
  size_t at = 0;
  buf[0] = '\0';
  for (int d = 0; d < ndims && at < len; d++)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? "x" : "", (long long)dims[d]);
}

/* Sub-communicators are created eagerly for grids of up to this many dims, so that
 * dtl_subcomm is not collective there; larger grids create them on first use. */
#define EAGER_SUBCOMM_DIMS 4

static MPI_Comm make_sub(dtl_ctx *ctx, unsigned mask) {
  int keep[DTL_MAX_DIMS];
  MPI_Comm sub = MPI_COMM_NULL;
  for (int d = 0; d < ctx->ndims; d++)
    keep[d] = (mask >> d) & 1u;
  if (MPI_Cart_sub(ctx->cart, keep, &sub) != MPI_SUCCESS)
    return MPI_COMM_NULL;
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return sub;
}

int dtl_params_agree(MPI_Comm comm, int n, const int64_t *values, const bool *is_float, const char *const *names, char *err,
                     size_t errlen) {
  if (n <= 0) return 0;
  int64_t *lo = malloc(sizeof *lo * (size_t)n * 3), *hi = lo ? lo + n : NULL, *v = lo ? lo + 2 * n : NULL;
  int bad = !lo;
  for (int k = 0; k < n && v; k++) { /* a floating -0.0 as 0.0: the same number */
    v[k] = values[k];
    if (is_float && is_float[k] && dtl_as_double(v[k]) == 0) v[k] = 0;
  }
  if (lo && (MPI_Allreduce(v, lo, n, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
             MPI_Allreduce(v, hi, n, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS))
    bad = 1;
  if (bad) snprintf(err, errlen, "the ranks could not compare their params");
  for (int k = 0; k < n && !bad; k++)
    if (lo[k] != hi[k]) {
      const char *name = names && names[k] ? names[k] : "?";
      if (is_float && is_float[k])
        snprintf(err, errlen, "params differ between ranks: %s is %.17g on some and %.17g on others (every rank must give the same)",
                 name, dtl_as_double(lo[k]), dtl_as_double(hi[k]));
      else
        snprintf(err, errlen, "params differ between ranks: %s is %lld on some and %lld on others (every rank must give the same)", name,
                 (long long)lo[k], (long long)hi[k]);
      bad = 1;
    }
  free(lo);
  return bad;
}

/* Which node this rank is on: ranks that share memory (MPI_COMM_TYPE_SHARED), or, where
 * DISTAL_RANKS_PER_NODE is set, consecutive blocks of that many ranks (to try a
 * hierarchical machine on one computer).  Nodes are numbered by their lowest rank. */
int dtl_node_of(MPI_Comm comm, int *node, int *nnodes, int *local, int *per_node, char *err,
                size_t errlen) {
  int rank, size, rc;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const char *env = getenv("DISTAL_RANKS_PER_NODE");
  /* every rank takes the same way (the shared-memory split is collective): the variable's
   * value, 0 where unset, -1 where not a positive integer, agreed by all ranks first */
  long k = 0;
  if (env && *env) {
    char *end;
    errno = 0;
    k = strtol(env, &end, 10);
    if (*end || k < 1 || errno || k > INT_MAX) k = -1;
  }
  long kmin = k, kmax = k;
  if ((rc = MPI_Allreduce(&k, &kmin, 1, MPI_LONG, MPI_MIN, comm)) != MPI_SUCCESS ||
      (rc = MPI_Allreduce(&k, &kmax, 1, MPI_LONG, MPI_MAX, comm)) != MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Allreduce failed (error %d)", rc);
    return 1;
  }
  if (kmin != kmax) {
    snprintf(err, errlen, "DISTAL_RANKS_PER_NODE differs between ranks (%s on some; every rank must see the same)",
             kmin <= 0 || kmax <= 0 ? "unset or invalid" : "different values");
    return 1;
  }
  if (k < 0) {
    snprintf(err, errlen, "DISTAL_RANKS_PER_NODE=%s is not a positive integer", env);
    return 1;
  }
  if (k > 0) {
    if (size % k) {
      snprintf(err, errlen, "%d rank%s do%s not split into nodes of DISTAL_RANKS_PER_NODE=%ld", size, size == 1 ? "" : "s",
               size == 1 ? "es" : "", k);
      return 1;
    }
    *node = rank / (int)k, *local = rank % (int)k, *per_node = (int)k, *nnodes = size / (int)k;
    return 0;
  }
  MPI_Comm nc;
  if ((rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &nc)) != MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Comm_split_type failed (error %d)", rc);
    return 1;
  }
  int lsize, lrank, leader = rank, mn, mx;
  MPI_Comm_size(nc, &lsize);
  MPI_Comm_rank(nc, &lrank);
  MPI_Bcast(&leader, 1, MPI_INT, 0, nc);
  MPI_Comm_free(&nc);
  MPI_Allreduce(&lsize, &mn, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(&lsize, &mx, 1, MPI_INT, MPI_MAX, comm);
  if (mn != mx) {
    snprintf(err, errlen, "nodes hold different numbers of ranks (%d to %d)", mn, mx);
    return 1;
  }
  int *leaders = malloc((size_t)size * sizeof *leaders);
  if (!leaders) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, comm);
  int below = 0;
  for (int r = 0; r < size; r++)
    if (leaders[r] < leader && leaders[r] == r) below++;
  free(leaders);
  *node = below, *local = lrank, *per_node = lsize, *nnodes = size / lsize;
  return 0;
}

int64_t dtl_nodes_blocked(MPI_Comm comm, bool hier) {
  int node, nnodes, local, per_node, rank, ok;
  char err[256];
  const char *env = getenv("DISTAL_RANKS_PER_NODE");
  if (!hier && env && *env) { /* simulated nodes: blocks of K, as distalc --ranks-per-node K (the last may be short) */
    char *end;
    errno = 0;
    long k = strtol(env, &end, 10);
    int64_t mine = !*end && k >= 1 && !errno ? (int64_t)k : 1, lo = mine, hi = mine;
    /* every rank the same (the variants' choice depends on it) */
    if (MPI_Allreduce(&mine, &lo, 1, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
        MPI_Allreduce(&mine, &hi, 1, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS || lo != hi)
      return 1;
    return lo;
  }
  if (dtl_node_of(comm, &node, &nnodes, &local, &per_node, err, sizeof err)) return 1;
  if (hier) return per_node; /* the machine's ranks are node-ordered */
  MPI_Comm_rank(comm, &rank);
  int mine = rank / per_node == node && rank % per_node == local;
  if (MPI_Allreduce(&mine, &ok, 1, MPI_INT, MPI_LAND, comm) != MPI_SUCCESS) return 1;
  return ok ? per_node : 1;
}

int dtl_ctx_create(MPI_Comm comm, int ndims, const int64_t *dims, bool debug, dtl_ctx **out,
                   char *err, size_t errlen) {
  return dtl_ctx_create_hier(comm, ndims, dims, 0, debug, out, err, errlen);
}

int dtl_ctx_create_hier(MPI_Comm comm, int ndims, const int64_t *dims, int ninner, bool debug,
                        dtl_ctx **out, char *err, size_t errlen) {
  int size, rc;
  char grid[128];
  *out = NULL;
  if (ndims < 1 || ndims > DTL_MAX_DIMS) {
    snprintf(err, errlen, "a grid has 1 to %d dims, not %d", DTL_MAX_DIMS, ndims);
    return 1;
  }
  if ((rc = MPI_Comm_size(comm, &size)) != MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Comm_size failed (error %d)", rc);
    return 1;
  }
  format_dims(grid, sizeof grid, ndims, dims);
  int64_t prod = 1;
  for (int d = 0; d < ndims; d++) {
    if (dims[d] < 1 || dims[d] > INT_MAX) {
      snprintf(err, errlen, "grid %s: dimension %d has size %lld", grid, d, (long long)dims[d]);
      return 1;
    }
    prod *= dims[d];
    if (prod > INT_MAX)
      break;
  }
  if (prod != size) {
    snprintf(err, errlen, "%d rank%s cannot form a %s grid", size, size == 1 ? "" : "s", grid);
    return 1;
  }
  /* a hierarchical machine: the ranks of one node form the inner dims, in node order */
  MPI_Comm ordered = MPI_COMM_NULL;
  if (ninner > 0 && ninner < ndims) {
    int node, nnodes, local, per_node;
    if (dtl_node_of(comm, &node, &nnodes, &local, &per_node, err, errlen)) return 1;
    int64_t inner = 1;
    for (int d = ndims - ninner; d < ndims; d++) inner *= dims[d];
    if (inner != per_node) {
      snprintf(err, errlen, "the inner levels of the machine need %lld ranks per node, but nodes "
               "have %d (run %lld ranks per node, or set DISTAL_RANKS_PER_NODE)",
               (long long)inner, per_node, (long long)inner);
      return 1;
    }
    if ((rc = MPI_Comm_split(comm, 0, node * per_node + local, &ordered)) != MPI_SUCCESS) {
      snprintf(err, errlen, "MPI_Comm_split failed (error %d)", rc);
      return 1;
    }
  }
  dtl_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  ctx->comm = ctx->cart = MPI_COMM_NULL;
  for (unsigned m = 0; m < (1u << DTL_MAX_DIMS); m++)
    ctx->sub[m] = MPI_COMM_NULL;
  ctx->ndims = ndims;
  ctx->debug = debug;
  int idims[DTL_MAX_DIMS], periods[DTL_MAX_DIMS], icoords[DTL_MAX_DIMS];
  for (int d = 0; d < ndims; d++) {
    ctx->dims[d] = dims[d];
    idims[d] = (int)dims[d];
    periods[d] = 1;
  }
  const char *what = "MPI_Comm_dup";
  rc = MPI_Comm_dup(comm, &ctx->comm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) {
    what = "MPI_Cart_create";
    if (ordered != MPI_COMM_NULL) {
      rc = MPI_Cart_create(ordered, ndims, idims, periods, 0, &ctx->cart);
      MPI_Comm_free(&ordered);
    } else {
      rc = MPI_Cart_create(ctx->comm, ndims, idims, periods, 1, &ctx->cart);
    }
  }
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_set_errhandler(ctx->cart, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_rank(ctx->cart, &ctx->rank);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_size(ctx->cart, &ctx->size);
  if (rc == MPI_SUCCESS)
    rc = MPI_Cart_coords(ctx->cart, ctx->rank, ndims, icoords);
  if (rc == MPI_SUCCESS && ndims <= EAGER_SUBCOMM_DIMS) {
    what = "MPI_Cart_sub";
    for (unsigned m = 0; m < (1u << ndims) && rc == MPI_SUCCESS; m++)
      if ((ctx->sub[m] = make_sub(ctx, m)) == MPI_COMM_NULL)
        rc = MPI_ERR_OTHER;
  }
  if (rc != MPI_SUCCESS) {
    dtl_mpi_fail(ctx, rc, what);
    snprintf(err, errlen, "%s", ctx->err);
    dtl_ctx_destroy(&ctx);
    return 1;
  }
  for (int d = 0; d < ndims; d++)
    ctx->coords[d] = icoords[d];
  *out = ctx;
  return 0;
}

void dtl_ctx_destroy(dtl_ctx **pctx) {
  dtl_ctx *ctx = *pctx;
  if (!ctx)
    return;
  if (ctx->dev && ctx->dev_free)
    ctx->dev_free(ctx->dev); /* device state first: its NCCL communicators sit on cart */
  ctx->dev = NULL;
  free(ctx->xbuf[0]), free(ctx->xbuf[1]);
  for (unsigned m = 0; m < (1u << DTL_MAX_DIMS); m++)
    if (ctx->sub[m] != MPI_COMM_NULL)
      MPI_Comm_free(&ctx->sub[m]);
  if (ctx->cart != MPI_COMM_NULL)
    MPI_Comm_free(&ctx->cart);
  if (ctx->comm != MPI_COMM_NULL)
    MPI_Comm_free(&ctx->comm);
  free(ctx);
  *pctx = NULL;
}

MPI_Comm dtl_subcomm(dtl_ctx *ctx, unsigned mask) {
  mask &= (1u << ctx->ndims) - 1u;
  if (ctx->sub[mask] == MPI_COMM_NULL)
    ctx->sub[mask] = make_sub(ctx, mask);
  return ctx->sub[mask];
}

/* Ranks of a Cartesian communicator are numbered row-major over the coordinates (MPI
 * standard, section 8.5), so ranks and coordinates convert without calling MPI; the grid
 * is periodic, so coordinates wrap around. */
int dtl_rank_of(const dtl_ctx *ctx, const int64_t *coords) {
  int64_t r = 0;
  for (int d = 0; d < ctx->ndims; d++)
    r = r * ctx->dims[d] + dtl_mod(coords[d], ctx->dims[d]);
  return (int)r;
}

void dtl_coords_of(const dtl_ctx *ctx, int rank, int64_t *coords) {
  int64_t r = rank;
  for (int d = ctx->ndims - 1; d >= 0; d--) {
    coords[d] = r % ctx->dims[d];
    r /= ctx->dims[d];
  }
}

void dtl_stats_reset(dtl_ctx *ctx) {
  for (int op = 0; op < DTL_NOPS; op++)
    ctx->bytes_sent[op] = ctx->bytes_recv[op] = ctx->msgs_sent[op] = ctx->msgs_recv[op] = 0;
}
