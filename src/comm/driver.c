/* driver.c -- what every generated executable shares: its argument parser, its usage
 * text, and its summary line. */
#include "distal/runtime.h"

#include <math.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return 1;
}

/* A decimal integer in [min, INT64_MAX], the whole string. */
static bool parse_int(const char *s, int64_t min, int64_t *out) {
  char *end;
  if (!s || !*s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9')))
    return false;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < min)
    return false;
  *out = v;
  return true;
}

static int find_name(const char *name, size_t len, int n, const char *const *names) {
  for (int i = 0; i < n; i++)
    if (names[i] && strlen(names[i]) == len && !strncmp(names[i], name, len))
      return i;
  return -1;
}

/* TENSOR=FILE for --load and --save */
static int parse_file_opt(bool load, const char *v, int ntensors,
                          const char *const *tensor_names, int *n, int *tensors, const char **paths,
                          char *err, size_t errlen) {
  const char *flag = load ? "--load" : "--save", *eq = strchr(v, '=');
  if (!eq || eq == v || !eq[1])
    return failf(err, errlen, "invalid value '%s' for %s: expected TENSOR=FILE", v, flag);
  int t = find_name(v, (size_t)(eq - v), ntensors, tensor_names);
  if (t < 0) {
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; i < ntensors && at < sizeof list; i++)
      at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", tensor_names[i]);
    return failf(err, errlen, "unknown tensor '%.*s' in %s %s (tensors: %s)", (int)(eq - v), v,
                 flag, v, ntensors ? list : "none");
  }
  for (int i = 0; i < *n; i++)
    if (tensors[i] == t && (load || !strcmp(paths[i], eq + 1))) {
      paths[i] = eq + 1; /* a tensor is read from the last file given; written to every one */
      return 0;
    }
  if (*n == DTL_MAX_FILES)
    return failf(err, errlen, "too many %s options", flag);
  tensors[*n] = t;
  paths[(*n)++] = eq + 1;
  return 0;
}

int dtl_parse_args(int argc, char **argv, int nparams, const char *const *param_names,
                   const bool *param_float, int64_t *values, int ntensors, const char *const *tensor_names,
                   dtl_options *opt, char *err, size_t errlen) {
  memset(opt, 0, sizeof *opt);
  opt->fill = DTL_FILL_RANDOM;
  opt->seed = 1;
  opt->iters = 1;
  opt->warmup = 0;
  opt->density = 0.1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || !arg[1] || (arg[1] == '-' && !arg[2]))
      return failf(err, errlen, "unexpected argument '%s'", arg);
    const char *name = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    char flag[64];
    snprintf(flag, sizeof flag, "%.*s", (int)(eq ? eq - arg : (long)strlen(arg)), arg);
#define IS(s) (len == strlen(s) && !strncmp(name, s, len))
    /* flags without a value */
    bool *b = IS("validate")          ? &opt->validate
              : IS("json")            ? &opt->json
              : IS("stats")           ? &opt->stats
              : IS("verbose")         ? &opt->verbose
              : IS("monitor")         ? &opt->monitor
              : IS("help")            ? &opt->help
              /* -h is help unless the program has a param h (a step size, a grid dim) */
              : IS("h") && find_name(name, len, nparams, param_names) < 0 ? &opt->help
                                      : NULL;
    if (b) {
      if (eq)
        return failf(err, errlen, "option '%s' takes no value", flag);
      *b = true;
      if (b == &opt->help)
        return 0;
      continue;
    }
    int p = find_name(name, len, nparams, param_names);
    bool known = p >= 0 || IS("fill") || IS("seed") || IS("iters") || IS("warmup") || IS("load") ||
                 IS("save") || IS("density");
    if (!known)
      return failf(err, errlen, "unknown option '%s'", flag);
    const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!v)
      return failf(err, errlen, "option '%s' needs a value", flag);
    int64_t n;
    if (IS("fill")) {
      if (!strcmp(v, "random"))
        opt->fill = DTL_FILL_RANDOM;
      else if (!strcmp(v, "ones"))
        opt->fill = DTL_FILL_ONES;
      else if (!strcmp(v, "zeros"))
        opt->fill = DTL_FILL_ZEROS;
      else if (!strcmp(v, "index"))
        opt->fill = DTL_FILL_INDEX;
      else
        return failf(err, errlen,
                     "invalid value '%s' for %s: expected random, ones, zeros or index", v, flag);
    } else if (IS("density") && p < 0) { /* a param named density wins (dense programs) */
      char *end;
      errno = 0;
      double dv = strtod(v, &end);
      if (end == v || *end || errno || isspace((unsigned char)*v) || !(dv > 0 && dv <= 1))
        return failf(err, errlen, "invalid value '%s' for %s: expected a number in (0, 1]", v, flag);
      opt->density = dv;
    } else if (IS("seed")) {
      if (!parse_int(v, 0, &n))
        return failf(err, errlen, "invalid value '%s' for %s: expected an integer >= 0", v, flag);
      opt->seed = (uint64_t)n;
    } else if (IS("iters") || IS("warmup")) {
      int64_t min = IS("iters") ? 1 : 0;
      if (!parse_int(v, min, &n) || n > 1000000000)
        return failf(err, errlen, "invalid value '%s' for %s: expected an integer >= %lld", v, flag,
                     (long long)min);
      *(IS("iters") ? &opt->iters : &opt->warmup) = (int)n;
    } else if (IS("load") || IS("save")) {
      bool load = IS("load");
      if (parse_file_opt(load, v, ntensors, tensor_names,
                         load ? &opt->nload : &opt->nsave,
                         load ? opt->load_tensor : opt->save_tensor,
                         load ? opt->load_path : opt->save_path, err, errlen))
        return 1;
    } else if (param_float && param_float[p]) { /* a floating param: its bits in the slot */
      char *end;
      errno = 0;
      double dv = strtod(v, &end);
      if (end == v || *end || !isfinite(dv) || isspace((unsigned char)*v)) /* as an integer's: no blanks */
        return failf(err, errlen, "invalid value '%s' for %s: expected a finite number", v, flag);
      if (dv == 0 && errno == ERANGE) /* as distalc rejects such a literal */
        return failf(err, errlen, "invalid value '%s' for %s: out of range (nonzero, it would round to 0)", v, flag);
      values[p] = dtl_double_bits(dv);
    } else {
      if (!parse_int(v, 1, &n))
        return failf(err, errlen, "invalid value '%s' for %s: expected a positive integer", v,
                     flag);
      values[p] = n;
    }
#undef IS
  }
  return 0;
}

static const char *extension(const char *path) {
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  return dot && (!slash || dot > slash + 1) ? dot : "";
}

int dtl_args_agree(MPI_Comm comm, int argc, char **argv, char *err, size_t errlen) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the arguments, each ended by a 0 */
  for (int i = 1; i < argc; i++)
    for (const char *p = argv[i];; p++) {
      h = (h ^ (unsigned char)*p) * 1099511628211ull;
      if (!*p) break;
    }
  int64_t v = (int64_t)(h >> 1), lo = v, hi = v;
  if (MPI_Allreduce(&v, &lo, 1, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
      MPI_Allreduce(&v, &hi, 1, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)
    return failf(err, errlen, "the ranks could not compare their arguments");
  if (lo != hi)
    return failf(err, errlen, "the ranks were given different arguments (every rank must get the same: params, options and files)");
  return 0;
}

int dtl_check_saves(const dtl_options *opt, int ntensors, const char *const *tensor_names,
                    const int *orders, const bool *sparse, char *err, size_t errlen) {
  if (opt->help)
    return 0;
  for (int k = 0; k < opt->nsave; k++) /* two tensors into one file would leave either, or neither */
    for (int j = 0; j < k; j++)
      if (!strcmp(opt->save_path[j], opt->save_path[k]) && opt->save_tensor[j] >= 0 && opt->save_tensor[j] < ntensors &&
          opt->save_tensor[k] >= 0 && opt->save_tensor[k] < ntensors)
        return failf(err, errlen, "--save %s=%s and --save %s=%s: two tensors cannot be saved into one file",
                     tensor_names[opt->save_tensor[j]], opt->save_path[j], tensor_names[opt->save_tensor[k]],
                     opt->save_path[k]);
  for (int k = 0; k < opt->nsave; k++) {
    int t = opt->save_tensor[k];
    if (t < 0 || t >= ntensors)
      continue;
    const char *path = opt->save_path[k], *name = tensor_names[t], *ext = extension(path);
    { /* its folder must take the file (checked before the run, not after it) */
      char dir[4096];
      const char *slash = strrchr(path, '/');
      if (!slash) snprintf(dir, sizeof dir, ".");
      else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
      struct stat st;
      if (!stat(dir, &st) && !S_ISDIR(st.st_mode))
        return failf(err, errlen, "--save %s=%s: cannot write into %s: %s", name, path, dir, strerror(ENOTDIR));
      if (access(dir, W_OK | X_OK))
        return failf(err, errlen, "--save %s=%s: cannot write into %s: %s", name, path, dir, strerror(errno));
    }
    bool sp = sparse && sparse[t];
    int order = orders ? orders[t] : 0;
    if (!strcmp(ext, ".npy"))
      continue;
    if (!strcmp(ext, ".mtx") || !strcmp(ext, ".tns")) {
      bool mtx = ext[1] == 'm';
      if (!sp)
        return failf(err, errlen, "--save %s=%s: tensor %s is dense: a %s file holds a sparse %s; save it as .npy",
                     name, path, name, mtx ? "Matrix Market .mtx" : "FROSTT .tns", mtx ? "matrix" : "tensor");
      if (mtx && order != 2)
        return failf(err, errlen, "--save %s=%s: tensor %s has order %d: a Matrix Market .mtx file holds a matrix "
                     "(order 2); save it as .tns or .npy", name, path, name, order);
      if (!mtx && order < 1)
        return failf(err, errlen, "--save %s=%s: tensor %s is a scalar: save it as .npy", name, path, name);
      continue;
    }
    return failf(err, errlen, "--save %s=%s: unknown file type '%s': tensor %s is saved as %s", name, path,
                 *ext ? ext : "(no extension)", name,
                 !sp ? ".npy" : order == 2 ? ".npy, .mtx or .tns" : order >= 1 ? ".npy or .tns" : ".npy");
  }
  for (int k = 0; k < opt->nload; k++) {
    int t = opt->load_tensor[k];
    if (t < 0 || t >= ntensors)
      continue;
    /* a file to read, not a directory or a FIFO (whose open would wait for a writer) */
    struct stat st;
    if (!stat(opt->load_path[k], &st) && !S_ISREG(st.st_mode))
      return failf(err, errlen, "--load %s=%s: not a regular file", tensor_names[t], opt->load_path[k]);
    if (sparse && sparse[t]) /* a sparse file into a dense tensor: said before reading it */
      continue;
    const char *ext = extension(opt->load_path[k]);
    if (!strcmp(ext, ".mtx") || !strcmp(ext, ".tns"))
      return failf(err, errlen, "--load %s=%s: tensor %s is dense: a %s file holds a sparse %s; load it from .npy",
                   tensor_names[t], opt->load_path[k], tensor_names[t], ext[1] == 'm' ? "Matrix Market .mtx" : "FROSTT .tns",
                   ext[1] == 'm' ? "matrix" : "tensor");
  }
  return 0;
}

void dtl_print_usage(FILE *out, const char *prog, int nparams, const char *const *param_names,
                     const bool *param_float, const bool *param_grid, const int64_t *defaults, int ntensors,
                     const char *const *tensor_names, bool sparse) {
  fprintf(out, "usage: mpirun -np P %s [params] [options]\n", prog);
  if (nparams)
    fprintf(out, "params (-NAME V, --NAME V or --NAME=V, positive integers; floating params: numbers):\n");
  for (int i = 0; i < nparams; i++) {
    char lhs[96];
    snprintf(lhs, sizeof lhs, "-%s V", param_names[i]);
    if (param_float && param_float[i] && defaults)
      fprintf(out, "  %-26s default %g (floating)\n", lhs, dtl_as_double(defaults[i]));
    else if (defaults && defaults[i] > 0)
      fprintf(out, "  %-26s default %lld\n", lhs, (long long)defaults[i]);
    else if (param_grid && param_grid[i])
      fprintf(out, "  %-26s no default (sizes the machine's grid: the rank count gives it)\n", lhs);
    else
      fprintf(out, "  %-26s no default (required)\n", lhs);
  }
  fprintf(out, "options:\n"
               "  --fill random|ones|zeros|index  initial data (default random)\n"
               "  --seed N                   seed of --fill random (default 1)\n"
               "%s"
               "  --iters N                  timed repetitions (default 1)\n"
               "  --warmup N                 untimed repetitions first (default 0)\n"
               "  --load T=FILE              read tensor T from FILE: .npy (any tensor), .mtx\n"
               "                             (Matrix Market, a sparse matrix) or .tns (FROSTT,\n"
               "                             a sparse tensor)\n"
               "  --save T=FILE              write tensor T to FILE after the run, in the format\n"
               "                             of its extension: .npy (any tensor), .mtx or .tns\n"
               "                             (the stored entries of a sparse matrix / tensor)\n"
               "  --validate                 recompute serially on rank 0 and compare\n"
               "  --json                     print the summary as JSON\n"
               "  --stats                    bytes and messages per rank and operation\n"
               "  --verbose                  say what happens\n"
               "  --monitor                  rank 0 prints each loop iteration and the scalars\n"
               "                             its condition reads\n"
               "  %s this text\n",
          sparse ? "  --density F                fraction of entries a sparse tensor's --fill stores\n"
                   "                             (default 0.1)\n" : "",
          find_name("h", 1, nparams, param_names) < 0 ? "--help, -h                " : "--help                    ");
  if (ntensors) {
    fprintf(out, "tensors:");
    for (int i = 0; i < ntensors; i++)
      fprintf(out, " %s", tensor_names[i]);
    fprintf(out, "\n");
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Print a JSON string (program and param names are identifiers, but be safe). */
static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(out, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(out, "\\u%04x", *s);
    else
      fputc(*s, out);
  }
  fputc('"', out);
}

/* The shortest text of a double that reads back exactly (1e-06, not 9.9999999999999995e-07). */
static void print_double(FILE *out, double v) {
  char b[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(b, sizeof b, "%.*g", prec, v);
    if (strtod(b, NULL) == v) break;
  }
  fputs(b, out);
}

/* Rates come from the minimum time, the usual convention of benchmarks. */
void dtl_report(dtl_ctx *ctx, FILE *out, const char *prog, int nparams,
                const char *const *param_names, const bool *param_float, const int64_t *values,
                const double *times, int n, double flops, double bytes, int64_t iterations, bool json) {
  if (ctx->rank != 0)
    return;
  double tmin = 0, tmed = 0;
  double *sorted = n > 0 ? malloc((size_t)n * sizeof *sorted) : NULL;
  if (sorted) {
    memcpy(sorted, times, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    tmin = sorted[0];
    tmed = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    free(sorted);
  }
  double gflops = tmin > 0 ? flops / tmin / 1e9 : 0, gbs = tmin > 0 ? bytes / tmin / 1e9 : 0;
  if (!json) {
    fprintf(out, "%s: ranks=%d grid=", prog, ctx->size);
    for (int d = 0; d < ctx->ndims; d++)
      fprintf(out, "%s%lld", d ? "x" : "", (long long)ctx->dims[d]);
    for (int i = 0; i < nparams; i++)
      if (param_float && param_float[i]) {
        fprintf(out, " %s=", param_names[i]);
        print_double(out, dtl_as_double(values[i]));
      } else
        fprintf(out, " %s=%lld", param_names[i], (long long)values[i]);
    if (iterations >= 0)
      fprintf(out, " iterations=%lld", (long long)iterations);
    fprintf(out, " iters=%d min=%.6f s median=%.6f s %.2f GFLOP/s %.2f GB/s\n", n, tmin, tmed,
            gflops, gbs);
  } else {
    fprintf(out, "{\"program\": ");
    json_string(out, prog);
    fprintf(out, ", \"ranks\": %d, \"grid\": [", ctx->size);
    for (int d = 0; d < ctx->ndims; d++)
      fprintf(out, "%s%lld", d ? ", " : "", (long long)ctx->dims[d]);
    fprintf(out, "], \"params\": {");
    for (int i = 0; i < nparams; i++) {
      fprintf(out, "%s", i ? ", " : "");
      json_string(out, param_names[i]);
      if (param_float && param_float[i]) {
        fputs(": ", out);
        print_double(out, dtl_as_double(values[i]));
      } else
        fprintf(out, ": %lld", (long long)values[i]);
    }
    fprintf(out, "}, ");
    if (iterations >= 0)
      fprintf(out, "\"iterations\": %lld, ", (long long)iterations);
    fprintf(out, "\"iters\": %d, \"times_s\": [", n);
    for (int i = 0; i < n; i++)
      fprintf(out, "%s%.9g", i ? ", " : "", times[i]);
    fprintf(out,
            "], \"min_s\": %.9g, \"median_s\": %.9g, \"gflops\": %.6g, \"gbytes_per_s\": %.6g", tmin, tmed, gflops, gbs);
    if (ctx->load_s > 0)
      fprintf(out, ", \"load_s\": %.9g", ctx->load_s);
    fputs("}\n", out);
  }
  fflush(out);
}
