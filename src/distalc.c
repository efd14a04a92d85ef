/* distalc -- the distal-mpi compiler driver (LANGUAGE.md section 6).
 *
 *   distalc FILE.dtl [-o OUT] [--main | --exe | --slurm] [--target cpu|cuda] [--name PREFIX]
 *                    [--emit c|cin|spmd|plan|svg|schedule|api] [--no-fuse] [--auto] [--mem-per-rank BYTES]
 *                    [--check] [--debug] [--version] [--help]
 *
 * Outputs are written to temporary files and renamed into place only when everything
 * succeeded, so no input leaves a partial file behind. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autosched.h"
#include "compiler.h"
#include "distal/grid.h"
#include "files.h"

static const char usage[] =
    "usage: distalc FILE.dtl [-o OUT] [--main | --exe | --slurm] [--target cpu|cuda]\n"
    "               [--name PREFIX] [--emit c|cin|spmd|plan|svg|schedule|api] [--no-fuse] [--auto]\n"
    "               [--mem-per-rank BYTES] [--check] [--debug]\n"
    "               [--ranks P] [--ranks-per-node K] [--set NAME=VALUE] [--version] [--help]\n"
    "\n"
    "  (default)       write OUT.c and OUT.h: the library form (plan_create, compute, ...)\n"
    "  --main          also emit main(): a complete program in OUT.c\n"
    "  --exe           build an MPI executable OUT with the MPI compiler wrapper\n"
    "  --slurm         write a Slurm batch script for the executable (-o job.sh)\n"
    "  --target cpu    generate C + MPI (default for cpu machines)\n"
    "  --target cuda   tensors in GPU memory, kernels in OUT.cu, NCCL and cuBLAS (default for\n"
    "                  machines with a gpu level)\n"
    "  --name PREFIX   prefix of the generated API (default: the stem of -o OUT, else of FILE.dtl)\n"
    "  --emit cin      print the scheduled concrete index notation\n"
    "  --emit spmd     print the SPMD program the C and CUDA printers print, and the rewrites\n"
    "  --emit plan     print the communication plan (for --ranks P and --set; without --ranks,\n"
    "                  the smallest count the machine admits, named on the first line; a\n"
    "                  hierarchical machine in nodes of K ranks with --ranks-per-node K, as\n"
    "                  DISTAL_RANKS_PER_NODE=K runs it, else of its inner levels' rank count\n"
    "                  where their dims are known, else all ranks on one node)\n"
    "  --emit svg      draw the plan (for --ranks P and --set, as --emit plan) as an SVG picture,\n"
    "                  to standard output or -o FILE.svg: per statement the grid, each tensor's\n"
    "                  blocks and who sends which box to whom in the first step\n"
    "  --emit c        print the generated C to standard output\n"
    "  --emit schedule print the program with the schedules --auto chose and the distributions\n"
    "                  the compiler chose (`@ M`) written out, as .dtl\n"
    "  --emit api      print the generated library's interface as JSON: params, tensors (type,\n"
    "                  order, extents, levels), whether PREFIX_iterations exists\n"
    "  --auto          schedule every statement without schedule commands by the cost model,\n"
    "                  for --ranks P and --set (as --emit plan; --emit plan then lists the\n"
    "                  candidates and their predicted costs)\n"
    "  --mem-per-rank BYTES  with --auto: the most buffer memory a schedule may use per rank\n"
    "  --model FILE    with --auto: the machine model (default $DISTAL_MACHINE_MODEL, else built-in)\n"
    "  --calibrate     measure the machine model with $MPIRUN on 2 ranks, write it to -o FILE\n"
    "                  (default distal.model)\n"
    "  --check         only parse and validate (everything short of writing code)\n"
    "  --debug         generated code verifies every box it receives\n"
    "  --no-fuse       no program-level rewrites: each statement runs alone (for comparison)\n"
    "\n"
    "Environment: MPICC (default " DISTAL_MPICC "), DISTAL_CFLAGS and DISTAL_LIBS override\n"
    "the flags used by --exe to find the distal runtime; for --target cuda also NVCC (default\n"
    DISTAL_NVCC_DEFAULT "), DISTAL_CUDA_ARCH (nvcc's -gencode options), DISTAL_CUDA_LIBS\n"
    "(libdistal_cuda, CUDA runtime, cuBLAS, NCCL), and DISTAL_CUDA_EMULATION=1 (compile the\n"
    "kernels as C against a host emulation, for testing without a GPU).\n";

static int fail_usage(const char *msg, const char *arg) {
  fprintf(stderr, "distalc: %s%s%s\n%s", msg, arg ? " " : "", arg ? arg : "", "(try distalc --help)\n");
  return 1;
}

/* The file stem, made into a C identifier. */
static char *stem_of(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  char *s = strdup(b);
  char *dot = strrchr(s, '.');
  if (dot && dot != s) *dot = 0;
  for (char *x = s; *x; x++)
    if (!isalnum((unsigned char)*x) && *x != '_') *x = '_';
  if (isdigit((unsigned char)s[0]) || !s[0]) {
    char *t = malloc(strlen(s) + 3);
    sprintf(t, "k_%s", s);
    free(s);
    s = t;
  }
  return s;
}

static bool valid_ident(const char *s) {
  if (!*s || isdigit((unsigned char)*s)) return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_') return false;
  return true;
}

/* Why PREFIX cannot name a generated API, or NULL.  Every name of the API starts with
 * PREFIX_, so a prefix must not reach into a namespace that another party owns: the
 * runtime's (dtl_, DTL_), MPI's (MPI_, PMPI_, reserved by the MPI standard), and the C
 * implementation's (a leading underscore). */
static const char *bad_prefix(const char *p) {
  if (!valid_ident(p)) return "is not a C identifier";
  if (strlen(p) > FE_MAX_IDENT) return "is longer than the 128 characters an identifier may have";
  if (p[0] == '_') return "starts with an underscore (names the C implementation reserves)";
  if (!strncasecmp(p, "dtl", 3) && (!p[3] || p[3] == '_')) return "is in the namespace of the distal runtime (dtl_)";
  if ((!strncasecmp(p, "mpi", 3) && (!p[3] || p[3] == '_')) || (!strncasecmp(p, "pmpi", 4) && (!p[4] || p[4] == '_')))
    return "is in the namespace the MPI standard reserves (MPI_, PMPI_)";
  return NULL;
}

/* The folder of a system or library header named HNAME that a header of that name in an
 * application's include path would hide, or NULL. */
static const char *hidden_header_dir(const char *hname) {
  static char dir[4096];
  const char *dirs = DISTAL_SYSTEM_INCLUDE_DIRS;
  while (*dirs) {
    const char *colon = strchr(dirs, ':');
    size_t n = colon ? (size_t)(colon - dirs) : strlen(dirs);
    if (n > 0 && n < sizeof dir - 1) {
      char path[8400];
      memcpy(dir, dirs, n);
      dir[n] = 0;
      snprintf(path, sizeof path, "%s/%s", dir, hname);
      if (access(path, F_OK) == 0) return dir;
    }
    dirs += n + (colon ? 1 : 0);
  }
  return NULL;
}

/* The input file: no output may replace it (gcc's "input file is the same as output file"). */
static const char *g_input;
static bool is_input(const char *path) {
  struct stat a, b;
  if (!g_input || stat(g_input, &a) || stat(path, &b)) return false;
  if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) return false;
  fprintf(stderr, "distalc: the output %s is the input file %s\n", path, g_input);
  return true;
}

/* s for a comment of C or of a shell script: "*" "/" apart and control characters as '?' (a
 * path may hold anything); malloc'ed */
static char *comment_safe(const char *s) {
  size_t n = strlen(s);
  char *r = malloc(2 * n + 1), *w = r;
  if (!r) return NULL;
  for (const char *p = s; *p; p++) {
    *w++ = (unsigned char)*p < 32 || *p == 127 ? '?' : *p;
    if (p[0] == '*' && p[1] == '/') *w++ = ' ';
  }
  *w = 0;
  return r;
}

/* s as one shell word: as it is where every character is plain, else single-quoted
 * (malloc'ed; NULL: no memory) */
static char *shell_word(const char *s) {
  bool plain = *s != 0;
  for (const char *p = s; *p; p++) plain &= isalnum((unsigned char)*p) || strchr("_./,+-=:@%", *p);
  if (plain) return strdup(s);
  char *r = malloc(4 * strlen(s) + 3), *w = r;
  if (!r) return NULL;
  *w++ = '\'';
  for (const char *p = s; *p; p++)
    if (*p == '\'') memcpy(w, "'\\''", 4), w += 4;
    else *w++ = *p;
  *w++ = '\'';
  *w = 0;
  return r;
}

/* Write to PATH through PATH.tmp.PID, renamed on success. */
typedef struct {
  char final[4096], tmp[4200];
  FILE *f;
} outfile;

/* The file writing `path` replaces (dtl_write_target: a symbolic link stays, the file it leads
 * to is written through a temporary beside it); false, reported, where the links loop. */
static bool out_target(const char *path, char *out, size_t n) {
  if (dtl_write_target(path, out, n)) return true;
  fprintf(stderr, "distalc: cannot write %s: its symbolic links loop or their path is too long\n", path);
  return false;
}

static bool out_open(outfile *o, const char *path) {
  o->f = NULL, o->tmp[0] = 0;
  if (is_input(path) || !out_target(path, o->final, sizeof o->final)) return false;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    /* a device, a pipe (-o /dev/stdout, /dev/null): written in place, nothing renamed over it */
    o->f = fopen(path, "w");
    if (!o->f) fprintf(stderr, "distalc: cannot write %s: %s\n", path, strerror(errno));
    return o->f != NULL;
  }
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%d", o->final, (int)getpid());
  o->f = fopen(o->tmp, "w");
  if (!o->f) fprintf(stderr, "distalc: cannot write %s: %s\n", path, strerror(errno));
  return o->f != NULL;
}

static void out_abort(outfile *o) {
  if (o->f) fclose(o->f), o->f = NULL;
  if (o->tmp[0]) unlink(o->tmp);
}

static bool out_commit(outfile *o) {
  bool ok = !ferror(o->f);
  ok &= fclose(o->f) == 0;
  o->f = NULL;
  if (!o->tmp[0]) { /* written in place */
    if (!ok) fprintf(stderr, "distalc: cannot write %s\n", o->final);
    return ok;
  }
  if (ok && rename(o->tmp, o->final) != 0) {
    fprintf(stderr, "distalc: cannot write %s: %s\n", o->final, strerror(errno));
    ok = false;
  }
  if (!ok) unlink(o->tmp);
  return ok;
}

/* Run a command line; report it when it fails.  (Generated sources are compiled without
 * their own directory on the include path: a source includes its header with quotes, and a
 * header named like a system one, stdio.h for stdio.dtl, must not hide it.) */
static int run_cmd(const char *cmd, const char *what) {
  int rc = system(cmd);
  if (rc != 0) fprintf(stderr, "distalc: %s failed: %s\n", what, cmd);
  return rc == 0 ? 0 : 1;
}

/* Compile the kernels of the CUDA target into an object: nvcc, or, with
 * DISTAL_CUDA_EMULATION=1, the C compiler against the host emulation of the test suite. */
static int build_kernels(const char *src_cu, const char *obj) {
  const char *cflags = getenv("DISTAL_CFLAGS");
  char defc[4096];
  if (!cflags) {
    snprintf(defc, sizeof defc, "-I%s", DISTAL_INCLUDEDIR);
    cflags = defc;
  }
  const char *emu = getenv("DISTAL_CUDA_EMULATION");
  const char *ccf = getenv("DISTAL_CUDA_CFLAGS");
  char cmd[16384];
  if (emu && !strcmp(emu, "1")) {
    const char *cc = getenv("MPICC");
    if (!cc || !*cc) cc = DISTAL_MPICC;
    snprintf(cmd, sizeof cmd, "%s -std=gnu11 -O2 -fwrapv -x c -DDISTAL_CUDA_EMULATION %s %s -c '%s' -o '%s'", cc,
             ccf ? ccf : "", cflags, src_cu, obj);
    return run_cmd(cmd, "the C compiler (kernels, emulated device)");
  }
  const char *nvcc = getenv("NVCC");
  if (!nvcc || !*nvcc) nvcc = DISTAL_NVCC_DEFAULT;
  const char *arch = getenv("DISTAL_CUDA_ARCH");
  if (!arch) arch = DISTAL_CUDA_ARCH_DEFAULT;
  snprintf(cmd, sizeof cmd, "%s -O3 %s -Xcompiler -fPIC,-fwrapv %s %s -c '%s' -o '%s'", nvcc, arch, ccf ? ccf : "", cflags, src_cu,
           obj);
  return run_cmd(cmd, "nvcc");
}

static int build_exe(const char *src_c, const char *out, const char *kobj) {
  const char *cc = getenv("MPICC");
  if (!cc || !*cc) cc = DISTAL_MPICC;
  const char *cflags = getenv("DISTAL_CFLAGS");
  const char *libs = getenv("DISTAL_LIBS");
  char defc[4096], defl[4096];
  if (!cflags) {
    snprintf(defc, sizeof defc, "-I%s", DISTAL_INCLUDEDIR);
    cflags = defc;
  }
  if (!libs) {
    snprintf(defl, sizeof defl, "-L%s -Wl,-rpath,%s -ldistal %s -lm", DISTAL_LIBDIR, DISTAL_LIBDIR, DISTAL_BLAS_LIBS);
    libs = defl;
  }
  const char *extra = getenv("DISTAL_EXTRA_CFLAGS");
  const char *culibs = "";
  char defcu[4096];
  if (kobj) {
    culibs = getenv("DISTAL_CUDA_LIBS");
    if (!culibs) {
      snprintf(defcu, sizeof defcu, "-L%s -Wl,-rpath,%s -ldistal_cuda %s", DISTAL_LIBDIR, DISTAL_LIBDIR, DISTAL_CUDA_LIBS_DEFAULT);
      culibs = defcu;
    }
  }
  size_t n = strlen(cc) + strlen(cflags) + strlen(libs) + strlen(src_c) + strlen(out) + 512 +
             (extra ? strlen(extra) : 0) + (kobj ? strlen(kobj) : 0) + strlen(culibs);
  char *cmd = malloc(n);
  snprintf(cmd, n, "%s -std=c11 -O3 -fwrapv -fopenmp %s %s '%s' %s%s%s -o '%s' %s %s", cc, extra ? extra : "", cflags, src_c,
           kobj ? "'" : "", kobj ? kobj : "", kobj ? "'" : "", out, culibs, libs);
  int rc = run_cmd(cmd, "the C compiler");
  free(cmd);
  return rc;
}

/* ---- the grid of --emit plan, solved as plan_create of the generated code solves it ---- */

/* The ranks of one node of a hierarchical machine when all dims of its inner levels are
 * known (literals, defaults, --set): nodes of any other size are an error at start-up.
 * 0 when some inner dim is left to the rank count. */
static int64_t inner_ranks(const fe_machine *M, const int64_t *vals) {
  int64_t inner = 1;
  for (int l = 1; l < M->nlevels; l++)
    for (int d = 0; d < M->levels[l].ndims; d++) {
      const fe_size *sz = &M->levels[l].dims[d];
      int64_t v = sz->is_param ? vals[sz->param] : sz->value;
      if (v <= 0 || __builtin_mul_overflow(inner, v, &inner)) return 0;
    }
  return inner;
}

/* the dims of every level of M, outer first, as distal/grid.h takes them; their count */
static int machine_dims(const fe_machine *M, int *param, int64_t *lit) {
  int nd = 0;
  for (int l = 0; l < M->nlevels; l++)
    for (int d = 0; d < M->levels[l].ndims && nd < FE_MAX_DIMS; d++, nd++) {
      const fe_size *sz = &M->levels[l].dims[d];
      param[nd] = sz->is_param ? sz->param : -1;
      lit[nd] = sz->is_param ? 0 : sz->value;
    }
  return nd;
}

/* The grid params of machine M at `ranks` ranks, nodes of per_node ranks if it is
 * hierarchical, by the runtime's dtl_solve_machine, which plan_create of generated code calls
 * too: a flat machine over all ranks; a hierarchical one its inner levels over the ranks of
 * one node, then level 0 over the nodes.  Fills vals; false with the message in err where
 * ranks do not fit. */
static bool solve_machine(const fe_program *prog, const fe_machine *M, int64_t *vals, int64_t ranks,
                          int64_t per_node, char *err, size_t errlen) {
  int param[FE_MAX_DIMS], n0 = M->levels[0].ndims;
  int64_t lit[FE_MAX_DIMS];
  int nd = machine_dims(M, param, lit);
  const char *names[prog->nparams + 1];
  for (int i = 0; i < prog->nparams; i++) names[i] = prog->params[i].name;
  names[prog->nparams] = NULL;
  return dtl_solve_machine(ranks, per_node, nd, M->nlevels == 1 ? 0 : nd - n0, param, lit, vals, names, err, errlen) == 0;
}

/* The rank count of --emit plan without --ranks (README, "Choices"): the smallest P that
 * forms the machine's grid (by solve_machine, as for --ranks P) with every grid param it
 * derives at least 2, so that the plan shows the machine's communication; where no P up to
 * the bound does (a repeated param takes every factor first, grid(q, q, r, r)), the smallest
 * P that forms the grid at all.  A hierarchical machine whose node size is not fixed
 * (*per_node 0, an inner dim left to the rank count) tries for each P its divisors as node
 * sizes, one node first, and sets *per_node to the one chosen.  Prints the choice as the
 * plan's first line; 0 with a message when no P up to the bound forms the grid.
 * vals: the params' values (-1: none), not changed. */
static int64_t plan_ranks(const fe_program *prog, const fe_machine *M, const int64_t *vals, int64_t *per_node, bool quiet) {
  enum { BOUND = 4096 };
  if (!M) {
    if (!quiet) printf("# ranks: 1 (the program has no machine: any count; --ranks N to choose)\n");
    return 1;
  }
  int64_t *trial = malloc(sizeof *trial * (size_t)(prog->nparams + 1));
  if (!trial) {
    fprintf(stderr, "distalc: out of memory\n");
    return 0;
  }
  bool hier = M->nlevels > 1, derived = false;
  int64_t fixed = !hier ? 1 : *per_node > 0 ? *per_node : inner_ranks(M, vals);
  int64_t first = 0, first_k = 0, best = 0, best_k = 0;
  char err[1024];
  for (int64_t p = 1; p <= BOUND && !best; p++)
    for (int64_t k = fixed ? fixed : p; k >= 1 && !best; k = fixed ? 0 : k - 1) {
      if (p % k) continue;
      memcpy(trial, vals, sizeof *trial * (size_t)(prog->nparams + 1));
      if (!solve_machine(prog, M, trial, p, k, err, sizeof err)) continue;
      if (!first) first = p, first_k = k;
      bool all = true;
      for (int l = 0; l < M->nlevels; l++)
        for (int d = 0; d < M->levels[l].ndims; d++) {
          const fe_size *sz = &M->levels[l].dims[d];
          if (sz->is_param && vals[sz->param] <= 0) derived = true, all &= trial[sz->param] >= 2;
        }
      if (all) best = p, best_k = k;
    }
  free(trial);
  int64_t p = best ? best : first, k = best ? best_k : first_k;
  if (!p) {
    fprintf(stderr, "distalc: no rank count up to %d forms this machine's grid; choose one with --ranks\n", (int)BOUND);
    return 0;
  }
  char nodes[128] = "";
  if (hier)
    snprintf(nodes, sizeof nodes, "%lld node%s of %lld rank%s: ", (long long)(p / k), p / k == 1 ? "" : "s",
             (long long)k, k == 1 ? "" : "s");
  const char *why = best && !derived ? "the count this machine's grid dims give"
                    : best ? "the smallest count this machine's grid admits with every grid param it derives at least 2"
                           : "the smallest count this machine's grid admits";
  if (!quiet) printf("# ranks: %lld (%s%s; --ranks N%s to choose)\n", (long long)p, nodes, why, hier ? " --ranks-per-node K" : "");
  if (hier) *per_node = k;
  return p;
}

/* A Slurm batch script for the executable built from this program: task counts from the
 * machine where its dims are literals, launch with srun --mpi=pmix (or mpirun), and the
 * script's own arguments passed on to the program. */
static bool write_slurm(const fe_program *prog, const ir_program *ir, const char *input,
                        const char *out, const char *name, bool cuda) {
  char *stem = name ? strdup(name) : stem_of(input);
  char path[4096];
  snprintf(path, sizeof path, "%s", out ? out : "job.sh");
  const char *base = strrchr(path, '/');
  if (!strcmp(base ? base + 1 : path, stem)) { /* it launches ./STEM from its own folder */
    fprintf(stderr, "distalc: --slurm -o %s: the script would be the program it launches (./%s): name it %s.sh, say\n", path, stem,
            stem);
    free(stem);
    return false;
  }
  outfile of = {0};
  if (!out_open(&of, path)) {
    free(stem);
    return false;
  }
  /* the usage lines' words shell-quoted, as a user would paste them */
  char *in_word = shell_word(input), *path_word = shell_word(path);
  char *in_safe = comment_safe(input), *stem_safe = comment_safe(stem), *path_safe = path_word ? comment_safe(path_word) : NULL,
       *in_cmd = in_word ? comment_safe(in_word) : NULL;
  free(in_word), free(path_word);
  if (!in_safe || !stem_safe || !path_safe || !in_cmd) {
    free(in_safe), free(stem_safe), free(path_safe), free(in_cmd), free(stem);
    out_abort(&of);
    return false;
  }
  FILE *f = of.f;
  const fe_machine *M = ir->machine >= 0 ? &prog->machines[ir->machine] : NULL;
  int64_t outer = 1, inner = 1;
  bool outer_lit = M != NULL, inner_lit = M && M->nlevels > 1, gpu = cuda;
  for (int l = 0; M && l < M->nlevels; l++) {
    const fe_grid *G = &M->levels[l];
    gpu |= G->kind == FE_GPU;
    for (int d = 0; d < G->ndims; d++) {
      bool lit = !G->dims[d].is_param;
      int64_t v = lit ? G->dims[d].value : 1;
      if (l == 0) outer *= v, outer_lit &= lit;
      else inner *= v, inner_lit &= lit;
    }
  }
  fprintf(f, "#!/bin/bash\n");
  fprintf(f, "# Slurm batch script for %s (from %s), written by distalc %s.\n", stem_safe, in_safe, PACKAGE_VERSION);
  fprintf(f, "# Build the program next to it and submit from that directory; the script's own\n"
             "# arguments go to the program:\n"
             "#   distalc %s --exe -o %s\n"
             "#   sbatch%s %s -n 8192 --validate\n"
             "# DISTAL_LAUNCHER=mpirun launches with mpirun inside the allocation instead of srun.\n",
          in_cmd, stem_safe, M && M->nlevels == 1 && !outer_lit ? " -n RANKS" : "", path_safe);
  free(in_safe), free(path_safe), free(in_cmd);
  fprintf(f, "#SBATCH --job-name=%s\n", stem_safe);
  free(stem_safe);
  if (M && M->nlevels > 1) {
    if (outer_lit) fprintf(f, "#SBATCH --nodes=%lld\n", (long long)outer);
    if (inner_lit) fprintf(f, "#SBATCH --ntasks-per-node=%lld\n", (long long)inner);
  } else if (outer_lit) {
    fprintf(f, "#SBATCH --ntasks=%lld\n", (long long)outer);
  }
  if (gpu) fprintf(f, "#SBATCH --gpus-per-task=1\n");
  fprintf(f, "set -eu\n"
             "cd \"${SLURM_SUBMIT_DIR:-.}\"\n"
             "prog=${DISTAL_PROGRAM:-./%s}\n"
             "export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}\n"
             "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}\n"
             "case \"${DISTAL_LAUNCHER:-srun}\" in\n"
             "  srun) exec srun --mpi=pmix \"$prog\" \"$@\" ;;\n"
             "  mpirun) exec mpirun \"$prog\" \"$@\" ;;\n"
             "  *) echo \"$0: DISTAL_LAUNCHER must be srun or mpirun\" >&2; exit 2 ;;\n"
             "esac\n", stem);
  free(stem);
  if (!out_commit(&of)) return false;
  chmod(path, 0755);
  return true;
}

/* distalc --calibrate: build the calibration program with the MPI compiler wrapper, run it on
 * 2 ranks with $MPIRUN (default mpirun; again with --oversubscribe where that fails, as Open
 * MPI needs on one core) and write the model it prints to `out`, renamed into place when
 * complete. */
static int calibrate(const char *out) {
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/distalc-calibrate.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "distalc: --calibrate: cannot create a temporary directory: %s\n", strerror(errno));
    return 1;
  }
  char src[4200], exe[4200], res[4200], cmd[32768];
  snprintf(src, sizeof src, "%s/calibrate.c", dir);
  snprintf(exe, sizeof exe, "%s/calibrate", dir);
  snprintf(res, sizeof res, "%s/model", dir);
  FILE *f = fopen(src, "w");
  int rc = !f || fputs(dc_calibrate_source, f) < 0;
  if (f && fclose(f)) rc = 1;
  const char *cc = getenv("MPICC"), *mpirun = getenv("MPIRUN");
  if (!cc || !*cc) cc = DISTAL_MPICC;
  if (!mpirun || !*mpirun) mpirun = "mpirun";
  if (!rc) {
    snprintf(cmd, sizeof cmd, "%s -O2 '%s' -o '%s'", cc, src, exe);
    rc = run_cmd(cmd, "the MPI compiler (--calibrate)");
  }
  if (!rc) {
    snprintf(cmd, sizeof cmd, "%s -np 2 '%s' > '%s' 2>/dev/null || %s -np 2 --oversubscribe '%s' > '%s'", mpirun, exe, res, mpirun, exe,
             res);
    rc = run_cmd(cmd, "the calibration run (--calibrate)");
  }
  dc_machine_model m = dc_default_model;
  char err[1024];
  if (!rc && !dc_read_model(res, &m, err, sizeof err)) {
    fprintf(stderr, "distalc: --calibrate: the calibration printed no model: %s\n", err);
    rc = 1;
  }
  /* the threads a rank runs: OpenMP's count where OMP_NUM_THREADS sets it (its first level),
   * as the generated loops and libdistal's kernels take it (dtl_loop_threads) */
  long threads = 1;
  const char *omp = getenv("OMP_NUM_THREADS");
  if (omp && *omp) {
    char *end = NULL;
    long t = strtol(omp, &end, 10);
    if (end != omp && (*end == 0 || *end == ',') && t > 1 && t <= 4096) threads = t;
  }
  if (!rc) {
    /* the model as read back (the file --auto will read), renamed into place when written */
    outfile of = {0};
    rc = !out_open(&of, out);
    if (!rc) {
      fprintf(of.f, "# machine model for distalc --auto (distalc --calibrate)\nbandwidth %.6g\nlatency %.6g\npoint_time %.6g\n"
                    "memory_bandwidth %.6g\n", m.bandwidth, m.latency, m.point_time, m.memory_bandwidth);
      if (m.node_bandwidth > 0 && m.node_latency > 0)
        fprintf(of.f, "# between two ranks of one node (shared memory)\nnode_bandwidth %.6g\nnode_latency %.6g\n", m.node_bandwidth,
                m.node_latency);
      if (threads > 1) fprintf(of.f, "# OMP_NUM_THREADS at the calibration: the threads each rank runs\nthreads %ld\n", threads);
      rc = !out_commit(&of);
    }
    if (!rc) printf("distalc: wrote the machine model %s (bandwidth %.3g B/s, latency %.3g s, %.3g s per loop iteration, "
                    "memory %.3g B/s, %ld thread%s a rank)\n", out, m.bandwidth, m.latency, m.point_time, m.memory_bandwidth, threads,
                    threads > 1 ? "s" : "");
  }
  unlink(src), unlink(exe), unlink(res), rmdir(dir);
  return rc;
}

/* The params' values for --emit plan and --auto: defaults, then --set NAME=VALUE (-1: none);
 * NULL with a message on a bad --set. */
static int64_t *param_values(const fe_program *prog, char **sets, int nsets) {
  int64_t *vals = calloc(prog->nparams + 1, sizeof *vals);
  if (!vals) {
    fprintf(stderr, "distalc: out of memory\n");
    return NULL;
  }
  for (int i = 0; i < prog->nparams; i++) vals[i] = prog->params[i].has_default ? prog->params[i].value : -1;
  for (int k = 0; k < nsets; k++) {
    char *eq = strchr(sets[k], '=');
    int pi = -1;
    if (eq) {
      *eq = 0;
      pi = fe_find_param(prog, sets[k]);
      *eq = '=';
    }
    char *end = NULL;
    if (pi >= 0 && prog->params[pi].is_float) { /* any finite number; it changes no size, grid or plan */
      double f = strtod(eq + 1, &end);
      if (end == eq + 1 || *end || !isfinite(f)) {
        fprintf(stderr, "distalc: --set needs NAME=VALUE with a finite number for the floating param %s, not %s\n",
                prog->params[pi].name, sets[k]);
        free(vals);
        return NULL;
      }
      continue;
    }
    long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
    if (pi < 0 || !end || *end || v <= 0) {
      fprintf(stderr, "distalc: --set needs NAME=VALUE with a declared param and a positive value, not %s\n", sets[k]);
      free(vals);
      return NULL;
    }
    vals[pi] = v;
  }
  /* the plan's and the cost model's byte counts are int64: a tensor of more elements than the
   * executables address (dist.c: 2^59) is refused here as there */
  for (int t = 0; t < prog->ntensors; t++) {
    const fe_tensor *x = &prog->tensors[t];
    int64_t n = 1;
    bool known = true, big = false;
    for (int d = 0; d < x->order; d++) {
      const fe_size *z = &x->dims[d];
      int64_t e = z->is_param ? (z->param >= 0 && z->param < prog->nparams ? vals[z->param] : -1) : z->value;
      if (e < 0) {
        known = false;
        break;
      }
      if (e > 0 && n > ((int64_t)1 << 59) / e) big = true;
      else n *= e;
    }
    if (known && (big || n > ((int64_t)1 << 59))) {
      fe_error(prog->src, x->loc, "tensor '%s' has too many elements to address at these param values (at most 2^59)", x->name);
      free(vals);
      return NULL;
    }
  }
  return vals;
}

/* The grid params of vals solved for *ranks (chosen as --emit plan does when 0, printing the
 * choice unless quiet); false with a message where the ranks do not form the grid. */
static bool solve_grid(const fe_program *prog, const ir_program *ir, int64_t *vals, int64_t *ranks, int64_t *per_node,
                       bool quiet) {
  const fe_machine *M = ir->machine >= 0 ? &prog->machines[ir->machine] : NULL;
  if (!*ranks && !(*ranks = plan_ranks(prog, M, vals, per_node, quiet))) return false;
  char err[1024];
  const char *node_why = " (--ranks-per-node)";
  if (M && M->nlevels > 1 && !*per_node) {
    *per_node = inner_ranks(M, vals) ? inner_ranks(M, vals) : *ranks;
    node_why = ", which the inner levels of the machine need";
  }
  if (M && !solve_machine(prog, M, vals, *ranks, *per_node, err, sizeof err)) {
    fprintf(stderr, "distalc: %s%s\n", err, M->nlevels > 1 && *ranks % *per_node ? node_why : "");
    return false;
  }
  return true;
}

/* whether param q appears in expression e */
static bool expr_uses(const fe_expr *e, int q) {
  return e && ((e->kind == FE_E_PARAM && e->param == q) || expr_uses(e->a, q) || expr_uses(e->b, q));
}

/* whether param q is part of the computation: a tensor's extent, a value in a statement, a
 * loop's bound or condition (changing it would change what the program computes) */
static bool param_in_data(const fe_program *prog, const fe_item *items, int nitems, int q) {
  for (int t = 0; t < prog->ntensors && items == prog->items; t++)
    for (int x = 0; x < prog->tensors[t].order; x++)
      if (prog->tensors[t].dims[x].is_param && prog->tensors[t].dims[x].param == q) return true;
  for (int i = 0; i < nitems; i++) {
    const fe_item *it = &items[i];
    if (it->kind == FE_ITEM_STMT && expr_uses(prog->stmts[it->stmt].rhs, q)) return true;
    if (it->kind == FE_ITEM_LOOP && ((it->bound.is_param && it->bound.param == q) || expr_uses(it->cond, q) ||
                                     param_in_data(prog, it->items, it->nitems, q)))
      return true;
  }
  return false;
}

/* Whether --auto chooses the grid's shape (README, "Choices"): a flat machine (CPU or GPU), no sparse
 * tensor (plan_create chooses the shape with the variants' cost formulas), and at least two
 * grid params with no value (vals: -1) used once each, none of them part of the computation
 * (param_in_data; a grid param in a schedule is fine). */
static bool shape_is_free(const dc_unit *u, const int64_t *vals) {
  const fe_program *prog = u->ast;
  if (u->ir->machine < 0 || prog->machines[u->ir->machine].nlevels != 1) return false;
  for (int t = 0; t < prog->ntensors; t++)
    for (int x = 0; x < prog->tensors[t].order; x++)
      if (prog->tensors[t].formats && prog->tensors[t].formats[x] == FE_COMPRESSED) return false;
  int param[FE_MAX_DIMS], nfree = 0;
  int64_t lit[FE_MAX_DIMS];
  int nd = machine_dims(&prog->machines[u->ir->machine], param, lit);
  for (int d = 0; d < nd; d++) {
    int uses = 0;
    for (int e = 0; e < nd; e++) uses += param[d] >= 0 && param[e] == param[d];
    if (uses != 1 || vals[param[d]] > 0) continue;
    if (param_in_data(prog, prog->items, prog->nitems, param[d])) return false;
    nfree++;
  }
  return nfree >= 2;
}

/* Shape number `shape` (dtl_grid_shapes, 0: the solver's) of M's grid at `ranks` ranks into
 * vals (the params, grid params without a value -1); false where the ranks do not form the
 * grid or there are fewer shapes (at most SHAPES_MAX are tried).  A flat machine only. */
enum { SHAPES_MAX = 64 };
/* Whether every fixed coordinate of a distribution over M lies inside its grid dim at vals (a
 * shape of free grid params may make a dim too small: such a shape is never chosen). */
static bool fixed_fit(const fe_program *prog, const fe_machine *M, const int64_t *vals) {
  for (int t = 0; t < prog->ntensors; t++) {
    const fe_tensor *T = &prog->tensors[t];
    if (!T->has_dist || &prog->machines[T->dist.machine] != M) continue;
    for (int l = 0; l < T->dist.nlevels && l < M->nlevels; l++)
      for (int k = 0; k < T->dist.levels[l].ny && k < M->levels[l].ndims; k++) {
        const fe_ydim *y = &T->dist.levels[l].y[k];
        const fe_size *sz = &M->levels[l].dims[k];
        int64_t d = sz->is_param ? vals[sz->param] : sz->value;
        if (y->kind == FE_Y_FIXED && d > 0 && y->fixed >= d) return false;
      }
  }
  return true;
}

static bool grid_shape(const fe_program *prog, const fe_machine *M, int64_t *vals, int64_t ranks, int shape) {
  int param[FE_MAX_DIMS];
  int64_t lit[FE_MAX_DIMS];
  int nd = machine_dims(M, param, lit), nv = prog->nparams + 1;
  int64_t *out = malloc(sizeof *out * (size_t)nv * SHAPES_MAX);
  int n = out ? dtl_grid_shapes(ranks, nd, param, lit, vals, nv, out, SHAPES_MAX) : 0;
  if (shape < n) memcpy(vals, out + (size_t)shape * (size_t)nv, sizeof *vals * (size_t)prog->nparams);
  free(out);
  return shape < n;
}

/* dc_auto_variants' grid: the grid params of vals at `ranks` ranks, shape number `shape`
 * where the unit's shape is free; on a hierarchical machine, in nodes of the compile's size
 * (per_node: the run's node count varies, a node's cores do not) */
typedef struct {
  const fe_program *prog;
  const ir_program *ir;
  int64_t per_node;
} grid_ctx;
static bool grid_for(void *ctx, int64_t *vals, int64_t ranks, int shape) {
  const grid_ctx *g = ctx;
  char err[1024];
  const fe_machine *M = g->ir->machine >= 0 ? &g->prog->machines[g->ir->machine] : NULL;
  /* a rank count that does not form the grid is skipped, not reported */
  if (ranks <= 0) return false;
  if (!M) return shape == 0;
  if (M->nlevels != 1)
    return shape == 0 && g->per_node > 0 && ranks % g->per_node == 0 &&
           solve_machine(g->prog, M, vals, ranks, g->per_node, err, sizeof err);
  if (!shape) return solve_machine(g->prog, M, vals, ranks, 0, err, sizeof err);
  /* shape number `shape` among those (after the solver's) whose dims hold every fixed coordinate */
  int64_t *v = malloc(sizeof *v * (size_t)(g->prog->nparams + 1));
  bool found = false;
  for (int k = 1, n = 0; v && !found; k++) {
    memcpy(v, vals, sizeof *v * (size_t)(g->prog->nparams + 1));
    if (!grid_shape(g->prog, M, v, ranks, k)) break;
    if (fixed_fit(g->prog, M, v) && ++n == shape) found = true, memcpy(vals, v, sizeof *v * (size_t)g->prog->nparams);
  }
  free(v);
  return found;
}

static void quiet_diag(void *ctx, const fe_diag *d) { (void)ctx, (void)d; }

/* --auto's grid shape where it is free (shape_is_free): each shape of the grid at `ranks`
 * ranks (grid_shape) with its own layouts (dc_auto_layouts) and schedules (dc_auto): the
 * solver's shape unless another's whole program is predicted faster than DTL_SHAPE_MARGIN of
 * its time (as plan_create: within 1% the model sees near-ties, where the balanced shape
 * receives the fewest bytes), then the fastest (ties: the earlier).  given: the params before
 * the grid was solved; vals: solved, set to the chosen shape.  Appends one line to *report
 * (malloc'ed, NULL: none yet).  Returns the chosen shape's number (-1: none could be costed,
 * vals unchanged) with, in *text and *layouts, what dc_auto_layouts wrote for it (malloc'ed;
 * NULL where no layout is left to choose). */
static int choose_shape(dc_unit *u, const char *input, dc_target tg, const int64_t *given, int64_t *vals, int64_t ranks,
                         int64_t mem, const dc_machine_model *mm, char **report, char **text, char **layouts) {
  const fe_program *prog = u->ast;
  const fe_machine *M = &prog->machines[u->ir->machine];
  int np = prog->nparams;
  int64_t *v = malloc(sizeof *v * (size_t)(np + 1)), *best = malloc(sizeof *best * (size_t)(np + 1));
  double bs = 0, s0 = 0;
  int nshapes = 0, at = -1;
  bool have0 = false;
  char *text0 = NULL, *lay0 = NULL, *tbest = NULL, *lbest = NULL; /* the layouts of shape 0 and of the best other */
  for (int k = 0; v && best; k++) {
    memcpy(v, given, sizeof *v * (size_t)(np + 1));
    if (!grid_shape(prog, M, v, ranks, k)) break;
    nshapes++;
    if (!fixed_fit(prog, M, v)) continue; /* a fixed coordinate outside a dim of this shape */
    /* a shape other than the solver's is chosen only below this: its program is costed
     * bounded by it (its layouts are chosen by exact times, as each choice steers the next) */
    double below = k == 0 ? HUGE_VAL : fmin(have0 ? s0 * DTL_SHAPE_MARGIN : HUGE_VAL, at > 0 ? bs * (1 - 1e-6) : HUGE_VAL);
    char *lay = NULL, *t = dc_auto_layouts(u, v, mem, mm, &lay);
    dc_unit *w = NULL;
    double s;
    bool ok;
    if (t && dc_compile(input, t, strlen(t), &(dc_options){.target = tg, .no_lower = true}, &w) == DC_OK) {
      w->no_fuse = u->no_fuse;
      ok = dc_program_seconds(w, v, mem, mm, below, &s);
      dc_unit_free(w);
    } else
      ok = !t && dc_program_seconds(u, v, mem, mm, below, &s);
    if (ok && k == 0) {
      s0 = s, have0 = true;
      text0 = t, lay0 = lay, t = lay = NULL;
    } else if (ok && (at < 0 || s < bs * (1 - 1e-6))) {
      at = k, bs = s, memcpy(best, v, sizeof *v * (size_t)(np + 1));
      free(tbest), free(lbest);
      tbest = t, lbest = lay, t = lay = NULL;
    }
    free(t);
    free(lay);
  }
  if (have0 && (at < 0 || bs >= s0 * DTL_SHAPE_MARGIN)) at = 0, bs = s0; /* the solver's unless another is clearly faster */
  if (!have0 && at > 0) s0 = INFINITY; /* the solver's shape does not hold a fixed coordinate */
  if (at > 0) memcpy(vals, best, sizeof *vals * (size_t)np);
  *text = at == 0 ? text0 : at > 0 ? tbest : NULL, *layouts = at == 0 ? lay0 : at > 0 ? lbest : NULL;
  if (at != 0) free(text0), free(lay0);
  if (at <= 0) free(tbest), free(lbest);
  char line[1024];
  int w = snprintf(line, sizeof line, "  grid: %s(", M->name);
  for (int d = 0; d < M->levels[0].ndims && w < (int)sizeof line; d++) {
    const fe_size *sz = &M->levels[0].dims[d];
    w += snprintf(line + w, sizeof line - (size_t)w, "%s%lld", d ? ", " : "", (long long)(sz->is_param ? vals[sz->param] : sz->value));
  }
  if (at < 0) snprintf(line + w, sizeof line - (size_t)w, ") at %lld ranks, the solver's (no shape could be costed)\n", (long long)ranks);
  else
    snprintf(line + w, sizeof line - (size_t)w, ") at %lld ranks, of %d shapes: the program predicted at %.3g s%s (the solver's shape: %.3g s)\n",
             (long long)ranks, nshapes, bs, at == 0 ? ", the solver's shape" : "", s0);
  size_t old = *report ? strlen(*report) : 0;
  char *r = realloc(*report, old + strlen(line) + 1);
  if (r) strcpy(r + old, line), *report = r;
  free(v);
  free(best);
  return at;
}

/* distalc --emit svg: the plan of --emit plan for the same arguments, drawn; written to
 * stdout, or to `out` renamed into place once complete.  Without --ranks, the count --emit
 * plan picks, named on stderr (stdout holds the picture).  shape_vals: --auto's grid shape
 * (NULL: the solver's). */
static int emit_svg(dc_unit *u, const lw_program *lp, const char *input, const char *out, char **sets, int nsets, int64_t ranks,
                    int64_t per_node, const int64_t *shape_vals) {
  int64_t *vals = param_values(u->ast, sets, nsets);
  bool chosen = !ranks;
  if (!vals || !solve_grid(u->ast, lp->ir, vals, &ranks, &per_node, true)) {
    free(vals);
    return 1;
  }
  for (int q = 0; q < u->ast->nparams && shape_vals; q++) /* --auto's grid shape */
    if (u->ast->params[q].is_grid) vals[q] = shape_vals[q];
  if (chosen) fprintf(stderr, "distalc: --emit svg at %lld ranks, the count --emit plan picks (--ranks N to choose)\n", (long long)ranks);
  sp_program *sp = NULL;
  if (dc_spmd(u, lp, &sp) != DC_OK) sp = NULL;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  int rc = m ? lw_print_svg(m, lp, sp, vals, ranks, input) : 1;
  if (m && fclose(m)) rc = 1;
  free(vals);
  if (rc) {
    fprintf(stderr, "distalc: --emit svg: out of memory\n");
    free(buf);
    return DC_NOMEM;
  }
  outfile of = {0};
  bool ok = out ? out_open(&of, out) : true;
  if (ok) {
    fwrite(buf, 1, len, out ? of.f : stdout);
    ok = out ? out_commit(&of) : fflush(stdout) == 0;
  }
  free(buf);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
  /* --auto lowers and drops thousands of candidate programs: keep the heap's top instead of
   * giving it back to the kernel after each (a brk and fresh page faults per candidate) */
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
#endif
  const char *input = NULL, *out = NULL, *name = NULL, *emit = NULL, *target = NULL;
  bool want_main = false, exe = false, slurm = false, check = false, debug = false, no_fuse = false, autos = false;
  bool calib = false;
  const char *model = getenv("DISTAL_MACHINE_MODEL"); /* --model FILE overrides it */
  int64_t mem_per_rank = 0; /* --mem-per-rank: 0, none */
  int64_t ranks = 0;    /* 0: no --ranks (--emit plan picks the count, plan_ranks) */
  int64_t per_node = 0; /* 0: no --ranks-per-node (README, "Choices") */
  char *sets[argc]; /* the --set values: at most one per argument */
  int nsets = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
#define TAKE(opt)                                                                              \
  (!strcmp(a, opt) ? (i + 1 < argc ? (val = argv[++i], true) : (fail_usage("missing value for", opt), exit(1), false)) \
   : (!strncmp(a, opt "=", strlen(opt) + 1) ? (val = a + strlen(opt) + 1, true) : false))
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--version")) {
      printf("distalc (distal-mpi) %s\n", PACKAGE_VERSION);
      return 0;
    } else if (TAKE("-o")) {
      size_t len = strlen(val);
      /* a file name: the stem of "" or of "dir/" would name hidden files ".c", ".h" */
      if (!len || val[len - 1] == '/' || !strcmp(val, ".") || !strcmp(val, "..") || (len >= 2 && !strcmp(val + len - 2, "/.")) ||
          (len >= 3 && !strcmp(val + len - 3, "/..")))
      {
        fprintf(stderr, "distalc: -o needs a file name, not '%s'\n(try distalc --help)\n", val);
        return 1;
      }
      out = val;
    }
    else if (TAKE("--name")) name = val;
    else if (TAKE("--emit")) emit = val;
    else if (TAKE("--target")) target = val;
    else if (TAKE("--ranks")) {
      char *end;
      ranks = strtoll(val, &end, 10);
      if (end == val || *end || ranks <= 0 || ranks > INT_MAX)
        return fail_usage("--ranks needs a positive integer (an MPI rank count), not", val);
    } else if (TAKE("--ranks-per-node")) {
      char *end;
      per_node = strtoll(val, &end, 10);
      if (*end || per_node <= 0 || per_node > INT_MAX)
        return fail_usage("--ranks-per-node needs a positive integer (an MPI rank count), not", val);
    } else if (TAKE("--model")) {
      model = val;
    } else if (TAKE("--mem-per-rank")) {
      char *end;
      errno = 0;
      mem_per_rank = strtoll(val, &end, 10);
      if (end == val || *end || errno == ERANGE || mem_per_rank <= 0)
        return fail_usage("--mem-per-rank needs a positive number of bytes (below 2^63), not", val);
    } else if (TAKE("--set")) {
      sets[nsets++] = (char *)val;
    } else if (!strcmp(a, "--main")) want_main = true;
    else if (!strcmp(a, "--exe")) exe = true;
    else if (!strcmp(a, "--slurm")) slurm = true;
    else if (!strcmp(a, "--check")) check = true;
    else if (!strcmp(a, "--debug")) debug = true;
    else if (!strcmp(a, "--no-fuse")) no_fuse = true;
    else if (!strcmp(a, "--auto")) autos = true;
    else if (!strcmp(a, "--calibrate")) calib = true;
    else if (a[0] == '-' && a[1]) return fail_usage("unknown option", a);
    else if (input) return fail_usage("more than one input file:", a);
    else input = a;
  }
  if (calib) {
    if (input) return fail_usage("--calibrate takes no input file:", input);
    return calibrate(out ? out : "distal.model");
  }
  if (!input) return fail_usage("no input file", NULL);
  if (emit && strcmp(emit, "c") && strcmp(emit, "cin") && strcmp(emit, "spmd") && strcmp(emit, "plan") && strcmp(emit, "svg") &&
      strcmp(emit, "schedule") && strcmp(emit, "api"))
    return fail_usage("--emit takes c, cin, spmd, plan, svg, schedule or api, not", emit);
  if (target && strcmp(target, "cpu") && strcmp(target, "cuda")) return fail_usage("--target takes cpu or cuda, not", target);
  if ((int)want_main + (int)exe + (int)slurm > 1) return fail_usage("--main, --exe and --slurm exclude each other", NULL);
  if (name && !valid_ident(name)) return fail_usage("--name needs a C identifier, not", name);

  g_input = input;
  fe_source *src = fe_source_open(input, stderr);
  if (!src) return 1;
  src->max_errors = 50;
  /* the front end and the schedule; lowering waits for what the options below ask */
  dc_unit *u;
  dc_target tg = !target ? DC_TARGET_AUTO : !strcmp(target, "cuda") ? DC_TARGET_CUDA : DC_TARGET_CPU;
  int status = dc_compile_source(src, &(dc_options){.target = tg, .no_lower = true}, &u);
  if (status != DC_OK) return status;
  u->no_fuse = no_fuse;
  status = 1;
  fe_program *prog = u->ast;
  ir_program *ir = u->ir;
  lw_program *lp = NULL;
  char *prefix = NULL, *source_safe = NULL; /* the input's path for the generated files' comments */
  int rc;
  dc_auto_report arep = {0};
  dc_machine_model amodel = *dc_target_model(u); /* --auto's machine model */
  int64_t auto_per_node = 0; /* --auto: the node size the search ran for */
  char *layouts = NULL; /* --auto: what dc_auto_layouts chose */
  outfile emit_out = {0}; /* --emit TEXT -o FILE: FILE's temporary, stdout on it while emit_fd >= 0 (the saved stdout) */
  int emit_fd = -1;
  char *shape_line = NULL; /* --auto: the grid's shape chosen (choose_shape's report) */
  int64_t *shape_vals = NULL, *given = NULL; /* --auto: the params at the chosen shape (NULL: the solver's); before the solve */
  if (autos) { /* the search, for the params and rank count of --emit plan */
    int64_t *vals = param_values(prog, sets, nsets);
    int64_t r = ranks, pn = per_node;
    given = vals ? malloc(sizeof *given * (size_t)(prog->nparams + 1)) : NULL;
    if (given) memcpy(given, vals, sizeof *given * (size_t)(prog->nparams + 1));
    if (!given || !solve_grid(prog, ir, vals, &r, &pn, true)) {
      free(vals);
      goto done;
    }
    auto_per_node = pn; /* as solve_grid set it where --ranks-per-node is not given */
    /* the program as written must lower for the target (its errors quote the lines of its
     * file; the search below compiles copies with other layouts and schedules quietly) */
    lw_program *as_written = NULL;
    if (dc_lower(u, ir, &as_written) != DC_OK) {
      free(vals);
      goto done;
    }
    ir_program *chosen = NULL;
    char merr[1024];
    if (model && *model && !dc_read_model(model, &amodel, merr, sizeof merr)) {
      fprintf(stderr, "%s\n", merr);
      free(vals);
      goto done;
    }
    /* the ranks on nodes of --ranks-per-node (a hierarchical machine: its inner levels'), else
     * on one node: which collectives stay within a node (the model's node rates) */
    amodel.ranks_per_node = pn;
    /* the grid's shape where it is free, then the layouts of `@ M` tensors: the program is
     * compiled again with them written */
    /* the shape at compile time only for the rank count of --ranks (without it, the layouts and
     * variant 0 are chosen on the solver's shape and plan_create chooses the shape) */
    u->shape_free = shape_is_free(u, given);
    int shape = -1; /* choose_shape's choice, its layouts already chosen */
    char *text2 = NULL;
    if (u->shape_free && !ranks)
      shape_line = strdup("  the solver's shape here (no --ranks): plan_create chooses the shape for the rank count of the run\n");
    else if (u->shape_free && (shape = choose_shape(u, input, tg, given, vals, r, mem_per_rank, &amodel, &shape_line, &text2, &layouts)) > 0) {
      shape_vals = malloc(sizeof *shape_vals * (size_t)(prog->nparams + 1));
      if (shape_vals) memcpy(shape_vals, vals, sizeof *shape_vals * (size_t)(prog->nparams + 1));
    }
    if (shape < 0) text2 = dc_auto_layouts(u, vals, mem_per_rank, &amodel, &layouts);
    if (text2) {
      /* quietly: where the program with the chosen layouts fails for the target (the search
       * compiles for CPU ranks), the program as written goes on and reports its own errors,
       * quoting the lines of its file */
      dc_unit *u2 = NULL;
      if (dc_compile(input, text2, strlen(text2), &(dc_options){.sink = {quiet_diag, NULL}, .target = tg, .no_lower = true}, &u2) ==
          DC_OK) {
        u2->src->sink = u->src->sink, u2->src->max_errors = u->src->max_errors; /* later errors as the file's */
        u2->no_fuse = no_fuse;
        u2->shape_free = u->shape_free;
        dc_unit_free(u);
        u = u2, prog = u->ast, ir = u->ir, src = u->src;
      }
      free(text2);
    }
    rc = dc_auto(u, vals, r, mem_per_rank, &amodel, &chosen, &arep);
    arep.model = model && *model ? model : NULL;
    arep.layouts = layouts;
    arep.shape = shape_line;
    arep.grid = shape_vals, arep.given = given;
    free(vals);
    if (rc != DC_OK || !chosen) {
      status = rc ? rc : 1;
      goto done;
    }
    ir = chosen;
  }
  bool cuda = u->cuda; /* without --target: cuda for a machine with a gpu level */
  /* lowered before anything is written: the schedule, the concrete index notation and the
   * batch script of a program that does not compile are not (its errors are, as in every mode) */
  if ((rc = dc_lower(u, ir, &lp)) != DC_OK) {
    status = rc;
    goto done;
  }
  if (slurm) {
    status = write_slurm(prog, ir, input, out, name, cuda) ? 0 : 1;
    goto done;
  }
  /* --emit c, cin, spmd, plan, schedule, api with -o: what they print goes to the file,
   * written whole or not at all (through its temporary, renamed at the end) */
  if (emit && strcmp(emit, "svg") && out) {
    if (!out_open(&emit_out, out)) goto done;
    fflush(stdout);
    emit_fd = dup(STDOUT_FILENO);
    if (emit_fd < 0 || dup2(fileno(emit_out.f), STDOUT_FILENO) < 0) {
      fprintf(stderr, "distalc: cannot write %s: %s\n", out, strerror(errno));
      out_abort(&emit_out);
      if (emit_fd >= 0) close(emit_fd), emit_fd = -1;
      goto done;
    }
  }
  if (emit && !strcmp(emit, "schedule")) {
    dc_print_schedule(stdout, u, autos ? &arep : NULL);
    status = fflush(stdout) ? 1 : 0;
    goto done;
  }
  if (emit && !strcmp(emit, "cin")) {
    for (int i = 0; i < ir->nstmts; i++) {
      if (ir->nstmts > 1) printf("# statement %d\n", i + 1);
      ir_print_cin(stdout, ir, &ir->stmts[i]);
    }
    status = 0;
    goto done;
  }
  if (autos) { /* the variants plan_create chooses among at run time */
    int64_t *vals = param_values(prog, sets, nsets);
    grid_ctx gc = {prog, ir, auto_per_node};
    rc = vals ? dc_auto_variants(u, lp, &arep, vals, arep.ranks, mem_per_rank, &amodel, grid_for, &gc, 4) : DC_NOMEM;
    free(vals);
    if (rc != DC_OK) {
      status = rc;
      goto done;
    }
  }
  if (check) { /* everything the code generator would reject is reported by now */
    status = 0;
    goto done;
  }
  if (emit && !strcmp(emit, "spmd")) {
    sp_program *sp;
    if ((rc = dc_spmd(u, lp, &sp)) != DC_OK) {
      status = rc;
      goto done;
    }
    spmd_print(stdout, sp);
    status = fflush(stdout) ? 1 : 0;
    goto done;
  }
  if (emit && !strcmp(emit, "plan")) {
    int64_t *vals = param_values(prog, sets, nsets);
    if (!vals || !solve_grid(prog, ir, vals, &ranks, &per_node, false)) {
      free(vals);
      goto done;
    }
    for (int q = 0; q < prog->nparams && shape_vals; q++) /* --auto's grid shape */
      if (prog->params[q].is_grid) vals[q] = shape_vals[q];
    lw_print_plan(stdout, lp, vals, ranks);
    sp_program *sp = NULL;
    if (dc_spmd(u, lp, &sp) == DC_OK && sp) spmd_print_plan_notes(stdout, sp);
    if (autos) dc_print_auto(stdout, &arep);
    if (sp) spmd_print_variants(stdout, sp, vals, ranks, autos ? given : NULL);
    free(vals);
    status = 0;
    goto done;
  }
  if (emit && !strcmp(emit, "svg")) {
    status = emit_svg(u, lp, input, out, sets, nsets, ranks, per_node, shape_vals);
    goto done;
  }
  if (want_main || exe) {
    /* generated executables read params as -NAME: options of the driver are taken (a param
     * h takes -h, help is then --help only) */
    static const char *taken[] = {"fill", "seed", "iters", "warmup", "load", "save", "validate",
                                  "json", "stats", "verbose", "monitor", "help", NULL};
    int bad = 0;
    for (int i = 0; i < prog->nparams; i++)
      for (int k = 0; taken[k]; k++)
        if (!strcmp(prog->params[i].name, taken[k])) {
          fe_error(src, prog->params[i].loc,
                   "param '%s' has the name of an option of generated executables (%s%s); rename it",
                   taken[k], taken[k][1] ? "--" : "-", taken[k]);
          bad++;
        }
    /* --density (fills of sparse tensors) exists in programs with sparse tensors */
    bool sparse = false;
    for (int t = 0; t < prog->ntensors; t++)
      for (int x = 0; x < prog->tensors[t].order; x++)
        sparse |= prog->tensors[t].formats && prog->tensors[t].formats[x] == FE_COMPRESSED;
    for (int i = 0; i < prog->nparams && sparse; i++)
      if (!strcmp(prog->params[i].name, "density")) {
        fe_error(src, prog->params[i].loc,
                 "param 'density' has the name of an option of generated executables with sparse tensors (--density); rename it");
        bad++;
      }
    if (bad) goto done;
  }
  prefix = name ? strdup(name) : stem_of(out && !exe ? out : input);
  if (bad_prefix(prefix)) {
    fprintf(stderr, "distalc: error: the prefix '%s' of the generated API (from %s) %s; choose another with --name\n", prefix,
            name ? "--name" : "the file name", bad_prefix(prefix));
    goto done;
  }
  source_safe = comment_safe(input);
  cg_options o = {.prefix = prefix, .source_name = source_safe ? source_safe : "?", .main = want_main || exe, .debug = debug};
  if (emit && !strcmp(emit, "api")) {
    sp_program *sp;
    if ((rc = dc_spmd(u, lp, &sp)) != DC_OK) {
      status = rc;
      goto done;
    }
    status = cg_emit_api(stdout, sp, &o) || fflush(stdout) ? 1 : 0;
    goto done;
  }
  if (emit && !strcmp(emit, "c")) {
    char hname[512];
    snprintf(hname, sizeof hname, "%s.h", prefix);
    o.header_name = hname;
    FILE *hnull = fopen("/dev/null", "w");
    char *kbuf = NULL;
    size_t kl = 0;
    FILE *kf = cuda ? open_memstream(&kbuf, &kl) : NULL;
    status = dc_emit(u, lp, hnull, stdout, kf, &o);
    fclose(hnull);
    if (kf) {
      fclose(kf);
      printf("\n/* ==== %s.cu ==== */\n%s", prefix, kbuf);
      free(kbuf);
    }
    goto done;
  }
  if (exe && is_input(out ? out : prefix)) goto done;
  if (exe) {
    char dir[] = "/tmp/distalc.XXXXXX";
    if (!mkdtemp(dir)) {
      fprintf(stderr, "distalc: cannot create a temporary directory: %s\n", strerror(errno));
      goto done;
    }
    char hpath[4200], cpath[4200], kpath[4200], opath[4200], hname[512], target_path[4200];
    snprintf(hname, sizeof hname, "%s.h", prefix);
    snprintf(hpath, sizeof hpath, "%s/%s.h", dir, prefix);
    snprintf(cpath, sizeof cpath, "%s/%s.c", dir, prefix);
    snprintf(kpath, sizeof kpath, "%s/%s.cu", dir, prefix);
    snprintf(opath, sizeof opath, "%s/%s_cu.o", dir, prefix);
    o.header_name = hname;
    FILE *h = fopen(hpath, "w"), *c = fopen(cpath, "w"), *k = cuda ? fopen(kpath, "w") : NULL;
    rc = h && c && (!cuda || k) ? dc_emit(u, lp, h, c, k, &o) : DC_ERRORS;
    bool ok = rc == DC_OK;
    if (h) ok &= fclose(h) == 0;
    if (c) ok &= fclose(c) == 0;
    if (k) ok &= fclose(k) == 0;
    const char *exe_out = out ? out : prefix;
    char exe_dst[4096];
    ok = ok && out_target(exe_out, exe_dst, sizeof exe_dst);
    snprintf(target_path, sizeof target_path, "%s.tmp.%d", ok ? exe_dst : exe_out, (int)getpid());
    if (ok && cuda) ok = build_kernels(kpath, opath) == 0;
    if (ok && build_exe(cpath, target_path, cuda ? opath : NULL) == 0) {
      if (rename(target_path, exe_dst) == 0) status = 0;
      else fprintf(stderr, "distalc: cannot write %s: %s\n", exe_out, strerror(errno));
    }
    if (rc == DC_NOMEM) status = DC_NOMEM;
    unlink(target_path);
    unlink(hpath);
    unlink(cpath);
    unlink(kpath);
    unlink(opath);
    rmdir(dir);
    goto done;
  }
  {
    /* library form: OUT.c and OUT.h */
    char base[4096];
    snprintf(base, sizeof base, "%s", out ? out : prefix);
    size_t bl = strlen(base);
    if (bl > 2 && (!strcmp(base + bl - 2, ".c") || !strcmp(base + bl - 2, ".h"))) base[bl - 2] = 0;
    char cpath[4200], hpath[4200], hname[4200], kpath[4200];
    snprintf(cpath, sizeof cpath, "%s.c", base);
    snprintf(hpath, sizeof hpath, "%s.h", base);
    snprintf(kpath, sizeof kpath, "%s.cu", base);
    const char *slash = strrchr(hpath, '/');
    snprintf(hname, sizeof hname, "%s", slash ? slash + 1 : hpath);
    o.header_name = hname;
    const char *sys = hidden_header_dir(hname);
    if (sys) {
      fprintf(stderr,
              "distalc: error: the generated header %s would hide the header <%s> of %s in every file compiled with its folder "
              "on the include path; choose another output name with -o\n",
              hpath, hname, sys);
      goto done;
    }
    outfile oc = {0}, oh = {0}, ok = {0};
    if (!out_open(&oc, cpath) || !out_open(&oh, hpath) || (cuda && !out_open(&ok, kpath))) {
      out_abort(&oc);
      out_abort(&oh);
      out_abort(&ok);
      goto done;
    }
    if ((rc = dc_emit(u, lp, oh.f, oc.f, ok.f, &o)) != DC_OK) {
      out_abort(&oc);
      out_abort(&oh);
      out_abort(&ok);
      if (rc == DC_NOMEM) status = DC_NOMEM;
      goto done;
    }
    if (out_commit(&oh) && (!cuda || out_commit(&ok)) && out_commit(&oc)) status = 0;
    else { /* the files not committed yet leave no temporary file; the committed ones go */
      if (oc.f) out_abort(&oc);
      if (ok.f) out_abort(&ok);
      unlink(hpath);
      if (cuda) unlink(kpath);
    }
  }
done:
  if (emit_fd >= 0) { /* stdout back, the file kept where everything was written */
    bool wrote = fflush(stdout) == 0 && !ferror(stdout);
    dup2(emit_fd, STDOUT_FILENO);
    close(emit_fd);
    if (status == 0 && wrote) status = out_commit(&emit_out) ? 0 : 1;
    else {
      if (status == 0) fprintf(stderr, "distalc: cannot write %s\n", out), status = 1;
      out_abort(&emit_out);
    }
  }
  free(prefix);
  free(source_safe);
  free(layouts);
  free(shape_line);
  free(shape_vals);
  free(given);
  dc_unit_free(u);
  return status;
}
