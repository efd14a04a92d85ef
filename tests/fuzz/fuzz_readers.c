/* fuzz_readers.c -- libFuzzer target of the file readers of generated executables: the
 * Matrix Market (.mtx), FROSTT (.tns) and NumPy (.npy) readers of libdistal, on one rank
 * (MPI_COMM_SELF).  Any bytes either load or fail with a message; never a crash, a leak, a
 * hang or a read out of bounds.
 *
 * The first byte of an input picks the reader, the tensor's type and shape; the rest is the
 * file, written to a scratch file with the reader's extension:
 *   bits 0-1  0 .mtx (sparse), 1 .tns (sparse), 2 .npy into a sparse tensor, 3 .npy dense
 *   bits 2-3  the type: double, float, int32, int64
 *   bits 4-5  the shape: (4, 5), (5, 5), (6,) or (4, 5, 3)  (.mtx: (4, 5) or (5, 5) only)
 *   bit  6    the levels of a sparse tensor: all compressed, or dense then compressed
 *
 * Built with -DFUZZ_REPLAY it is instead a plain program that runs the harness once on each
 * file named on its command line (a directory stands for the files in it); with no
 * arguments, on $top_srcdir/tests/fuzz/corpus_readers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distal/runtime.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static dtl_ctx *g_ctx;
static char g_base[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited)
    MPI_Init(NULL, NULL);
  int64_t dims[1] = {1};
  char err[256];
  if (dtl_ctx_create(MPI_COMM_SELF, 1, dims, false, &g_ctx, err, sizeof err)) {
    fprintf(stderr, "fuzz_readers: %s\n", err);
    abort();
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(g_base, sizeof g_base, "%s/fuzz-readers-%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  if (!g_ctx)
    LLVMFuzzerInitialize(NULL, NULL);
  const unsigned sel = data[0];
  const int kind = sel & 3;
  const dtl_type t = (dtl_type)((sel >> 2) & 3);
  static const int64_t shapes[4][3] = {{4, 5, 0}, {5, 5, 0}, {6, 0, 0}, {4, 5, 3}};
  static const int orders[4] = {2, 2, 1, 3};
  int s = (sel >> 4) & 3;
  if (kind == 0)
    s &= 1; /* a matrix */
  static const char *const ext[4] = {".mtx", ".tns", ".npy", ".npy"};
  char path[300];
  snprintf(path, sizeof path, "%s%s", g_base, ext[kind]);
  FILE *f = fopen(path, "wb");
  if (!f)
    return 0;
  bool ok = fwrite(data + 1, 1, size - 1, f) == size - 1;
  if (fclose(f) != 0 || !ok) {
    unlink(path);
    return 0;
  }
  dtl_dist d;
  memset(&d, 0, sizeof d);
  d.order = orders[s];
  d.ngrid = 1;
  d.kind[0] = DTL_DIM_PART, d.tdim[0] = 0;
  for (int k = 0; k < d.order; k++)
    d.extent[k] = shapes[s][k];
  dtl_box own;
  dtl_dist_block(g_ctx, &d, g_ctx->coords, &own);
  own.nd = d.order;
  if (kind == 3) {
    int64_t vol = dtl_box_volume(&own);
    void *local = calloc((size_t)(vol > 0 ? vol : 1), dtl_type_size(t));
    if (local)
      dtl_npy_read(g_ctx, path, &d, t, local, &own);
    free(local);
  } else {
    dtl_level lv[DTL_MAX_DIMS];
    for (int k = 0; k < d.order; k++)
      lv[k] = (sel & 64) && k == 0 ? DTL_LEVEL_DENSE : DTL_LEVEL_COMPRESSED;
    dtl_sparse sp;
    if (dtl_sparse_read(g_ctx, path, &d, t, lv, &own, &sp) == 0) {
      /* walk what was loaded */
      int64_t n = 0, *c = NULL;
      void *v = NULL;
      if (dtl_sparse_extract(&sp, &own, &n, &c, &v) == 0) {
        for (int64_t e = 0; e < n * d.order; e++)
          if (c[e] < 0 || c[e] >= 6)
            abort(); /* a coordinate outside every shape above */
      }
      free(c), free(v);
      dtl_sparse_free(&sp);
    }
  }
  unlink(path);
  return 0;
}

#ifdef FUZZ_REPLAY
#define FUZZ_REPLAY_NAME "fuzz_readers_replay"
#include "fuzz_replay.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  LLVMFuzzerInitialize(&argc, &argv);
  int count = 0, rc = 0;
  if (argc > 1) {
    for (int k = 1; k < argc; k++)
      rc |= replay(argv[k], &count);
  } else {
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus_readers", top ? top : ".");
    rc |= replay(path, &count);
  }
  printf("fuzz_readers_replay: %d inputs\n", count);
  dtl_ctx_destroy(&g_ctx);
  MPI_Finalize();
  return rc;
}
#endif
