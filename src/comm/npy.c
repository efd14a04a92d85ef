/* npy.c -- NumPy .npy files read and written in parallel with MPI-IO: rank 0 handles the
 * header, every holder moves its own block through a subarray file view. */
#include "distal/runtime.h"
#include "files.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NATIVE_ORDER '>'
#else
#define NATIVE_ORDER '<'
#endif

static const char *dtype_code(dtl_type t) {
  switch (t) {
  case DTL_DOUBLE:
    return "f8";
  case DTL_FLOAT:
    return "f4";
  case DTL_INT32:
    return "i4";
  case DTL_INT64:
    return "i8";
  }
  return "?";
}

/* Python's repr of a shape tuple: (), (4,), (4, 5) */
static void format_shape(char *buf, size_t len, int n, const int64_t *s) {
  size_t at = (size_t)snprintf(buf, len, "(");
  for (int k = 0; k < n && at < len; k++)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", k ? ", " : "", (long long)s[k]);
  if (at < len)
    snprintf(buf + at, len - at, n == 1 ? ",)" : ")");
}

/* ---- the header: a Python dict literal ------------------------------------------------- */
typedef struct {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && isspace((unsigned char)*c->p))
    c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

static bool parse_string(cursor *c, char *out, size_t len) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
    return false;
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 < len)
      out[n++] = *c->p;
    c->p++;
  }
  out[n] = '\0';
  return eat(c, q);
}

/* shape: "(" [int ("," int)* [","]] ")" */
static bool parse_shape(cursor *c, int *n, int64_t *shape) {
  *n = 0;
  if (!eat(c, '('))
    return false;
  for (;;) {
    skip_ws(c);
    if (eat(c, ')'))
      return true;
    if (c->p >= c->end || !isdigit((unsigned char)*c->p) || *n >= DTL_MAX_DIMS)
      return false;
    int64_t v = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
      if (v > (INT64_MAX - 9) / 10)
        return false;
      v = v * 10 + (*c->p++ - '0');
    }
    while (c->p < c->end && (*c->p == 'L' || *c->p == 'l'))
      c->p++; /* Python 2 longs */
    shape[(*n)++] = v;
    if (!eat(c, ','))
      return eat(c, ')');
  }
}

typedef struct {
  char descr[32];
  int fortran; /* -1 missing */
  int nshape;  /* -1 missing */
  int64_t shape[DTL_MAX_DIMS];
} npy_header;

static bool parse_dict(const char *text, size_t len, npy_header *h) {
  cursor c = {text, text + len};
  h->descr[0] = '\0';
  h->fortran = h->nshape = -1;
  if (!eat(&c, '{'))
    return false;
  for (;;) {
    char key[32];
    if (eat(&c, '}'))
      return true;
    if (!parse_string(&c, key, sizeof key) || !eat(&c, ':'))
      return false;
    skip_ws(&c);
    if (!strcmp(key, "descr")) {
      if (!parse_string(&c, h->descr, sizeof h->descr))
        return false;
    } else if (!strcmp(key, "fortran_order")) {
      if (c.end - c.p >= 4 && !strncmp(c.p, "True", 4))
        h->fortran = 1, c.p += 4;
      else if (c.end - c.p >= 5 && !strncmp(c.p, "False", 5))
        h->fortran = 0, c.p += 5;
      else
        return false;
    } else if (!strcmp(key, "shape")) {
      if (!parse_shape(&c, &h->nshape, h->shape))
        return false;
    } else {
      return false;
    }
    if (!eat(&c, ','))
      return eat(&c, '}');
  }
}

/* Rank 0: check the file against the tensor; gives the offset of the data. */
static int check_file(dtl_ctx *ctx, const char *path, const dtl_dist *d, dtl_type t,
                      int64_t *data_off) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return dtl_fail(ctx, "%s: cannot open: %s", path, strerror(errno));
  unsigned char pre[12];
  int err = 0;
  char *text = NULL;
  size_t got = fread(pre, 1, 8, f);
  if (got < 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    err = dtl_fail(ctx, "%s: not a .npy file (bad magic)", path);
    goto done;
  }
  int64_t hlen, prefix;
  if (pre[6] == 1) {
    if (fread(pre + 8, 1, 2, f) < 2)
      goto truncated;
    hlen = pre[8] | (pre[9] << 8);
    prefix = 10;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 8, 1, 4, f) < 4)
      goto truncated;
    hlen = (int64_t)pre[8] | ((int64_t)pre[9] << 8) | ((int64_t)pre[10] << 16) |
           ((int64_t)pre[11] << 24);
    prefix = 12;
  } else {
    err = dtl_fail(ctx, "%s: unsupported .npy format version %d.%d", path, pre[6], pre[7]);
    goto done;
  }
  if (hlen > (1 << 24) || !(text = malloc((size_t)hlen + 1))) {
    err = dtl_fail(ctx, "%s: header of %lld bytes is too large", path, (long long)hlen);
    goto done;
  }
  if (fread(text, 1, (size_t)hlen, f) < (size_t)hlen)
    goto truncated;
  text[hlen] = '\0';
  npy_header h;
  if (!parse_dict(text, (size_t)hlen, &h) || !h.descr[0] || h.fortran < 0 || h.nshape < 0) {
    err = dtl_fail(ctx, "%s: malformed .npy header", path);
    goto done;
  }
  const char *want = dtype_code(t);
  char o = h.descr[0];
  if (strlen(h.descr) != 3 || strcmp(h.descr + 1, want) != 0 ||
      (o != NATIVE_ORDER && o != '=' && o != '|')) {
    err = dtl_fail(ctx, "%s: dtype '%s' does not match tensor type %s ('%c%s')", path, h.descr,
                   dtl_type_name(t), NATIVE_ORDER, want);
    goto done;
  }
  if (h.fortran) {
    err = dtl_fail(ctx, "%s: fortran_order True is not supported (C order only)", path);
    goto done;
  }
  bool same = h.nshape == d->order;
  for (int k = 0; same && k < d->order; k++)
    same = h.shape[k] == d->extent[k];
  if (!same) {
    char a[160], b[160];
    format_shape(a, sizeof a, h.nshape, h.shape);
    format_shape(b, sizeof b, d->order, d->extent);
    err = dtl_fail(ctx, "%s: shape %s does not match tensor shape %s", path, a, b);
    goto done;
  }
  int64_t vol = 1;
  for (int k = 0; k < d->order; k++) {
    if (d->extent[k] > 0 && vol > INT64_MAX / 8 / d->extent[k]) {
      err = dtl_fail(ctx, "%s: shape overflows the size of a file", path);
      goto done;
    }
    vol *= d->extent[k];
  }
  int64_t data = vol * (int64_t)dtl_type_size(t);
  *data_off = prefix + hlen;
  if (fseeko(f, 0, SEEK_END) != 0) {
    err = dtl_fail(ctx, "%s: cannot seek: %s", path, strerror(errno));
    goto done;
  }
  int64_t size = (int64_t)ftello(f), have = size - *data_off;
  if (have != data)
    err = dtl_fail(ctx, "%s: %s: %lld bytes of data, expected %lld", path,
                   have < data ? "truncated" : "trailing bytes", (long long)have, (long long)data);
  goto done;
truncated:
  err = dtl_fail(ctx, "%s: truncated header", path);
done:
  free(text);
  fclose(f);
  return err;
}

/* The file view of this rank's block (subarray of the global array), or NULL type with
 * count 0 for ranks that move nothing. */
static int block_view(dtl_ctx *ctx, const dtl_dist *d, dtl_type t, const dtl_box *b,
                      MPI_Datatype *ftype) {
  int sizes[DTL_MAX_DIMS], sub[DTL_MAX_DIMS], starts[DTL_MAX_DIMS], rc;
  *ftype = dtl_type_mpi(t);
  if (d->order == 0)
    return 0;
  for (int k = 0; k < d->order; k++) {
    if (d->extent[k] > INT_MAX)
      return dtl_fail(ctx, "MPI-IO: extent %lld is too large", (long long)d->extent[k]);
    sizes[k] = (int)d->extent[k];
    sub[k] = (int)(b->hi[k] - b->lo[k]);
    starts[k] = (int)b->lo[k];
  }
  rc = MPI_Type_create_subarray(d->order, sizes, sub, starts, MPI_ORDER_C, dtl_type_mpi(t), ftype);
  if (rc == MPI_SUCCESS)
    rc = MPI_Type_commit(ftype);
  return rc == MPI_SUCCESS ? 0 : dtl_mpi_fail(ctx, rc, "MPI_Type_create_subarray");
}

/* Collective part shared by read and write: set the view at `off` and move this rank's
 * block (count 0 where active is false).  Reads are collective (MPI_File_read_all).
 * Writes are independent (MPI_File_write through the same view): the collective write of
 * Open MPI 4.1's OMPIO loses data when blocks interleave in the file (write data sieving
 * of fbtl/posix, open-mpi/ompi#12718; about one write in ten of 2-D column blocks here),
 * and a corrupt output file is worse than a slower one. */
/* Writes go out as the block's contiguous runs at explicit offsets (MPI_File_write_at with
 * the plain byte view): no file view with holes, so no data sieving that could race with
 * the neighbours' runs. */
static int write_runs(dtl_ctx *ctx, MPI_File fh, int64_t off, const dtl_dist *d, dtl_type t,
                      const dtl_box *b, bool active, const void *local) {
  int rc = MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  if (rc != MPI_SUCCESS) return dtl_mpi_fail(ctx, rc, "MPI_File_set_view");
  int64_t vol = active ? dtl_box_volume(b) : 0;
  if (vol <= 0) return 0;
  const int64_t es = (int64_t)dtl_type_size(t);
  int n = d->order;
  if (n == 0) {
    MPI_Status st;
    rc = MPI_File_write_at(fh, (MPI_Offset)off, (void *)local, (int)es, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) return dtl_mpi_fail(ctx, rc, "MPI_File_write_at");
    ctx->bytes_sent[DTL_OP_IO] += es, ctx->msgs_sent[DTL_OP_IO]++;
    return 0;
  }
  /* the run: the last dim, merged with earlier dims while the later ones are full */
  int k = n - 1;
  int64_t run = b->hi[k] - b->lo[k];
  while (k > 0 && b->lo[k] == 0 && b->hi[k] == d->extent[k]) {
    k--;
    run *= b->hi[k] - b->lo[k];
  }
  int64_t idx[DTL_MAX_DIMS];
  for (int x = 0; x < n; x++) idx[x] = b->lo[x];
  const char *src = local;
  for (int64_t done = 0; done < vol; done += run) {
    int64_t lin = 0;
    for (int x = 0; x < n; x++) lin = lin * d->extent[x] + (x <= k ? idx[x] : 0);
    for (int64_t w = 0; w < run;) {
      int64_t chunk = run - w > (INT_MAX / es) ? (INT_MAX / es) : run - w;
      MPI_Status st;
      rc = MPI_File_write_at(fh, (MPI_Offset)(off + (lin + w) * es), (void *)(src + (done + w) * es),
                             (int)(chunk * es), MPI_BYTE, &st);
      if (rc != MPI_SUCCESS) return dtl_mpi_fail(ctx, rc, "MPI_File_write_at");
      w += chunk;
    }
    /* next run: odometer over dims [0, k) (dim k is whole inside the run) */
    for (int x = k - 1; x >= 0; x--) {
      if (++idx[x] < b->hi[x]) break;
      idx[x] = b->lo[x];
    }
  }
  ctx->bytes_sent[DTL_OP_IO] += vol * es, ctx->msgs_sent[DTL_OP_IO]++;
  return 0;
}

static int move_block(dtl_ctx *ctx, MPI_File fh, int64_t off, const dtl_dist *d, dtl_type t,
                      const dtl_box *b, bool active, void *local, bool write) {
  if (write) return write_runs(ctx, fh, off, d, t, b, active, local);
  MPI_Datatype ftype = dtl_type_mpi(t), mtype = dtl_type_mpi(t);
  int64_t vol = active ? dtl_box_volume(b) : 0;
  int err = 0, cnt = 0, rc = MPI_SUCCESS;
  if (vol > 0)
    err = block_view(ctx, d, t, b, &ftype);
  if (vol > 0 && !err)
    rc = dtl_count_type(t, vol, &cnt, &mtype);
  if (rc != MPI_SUCCESS)
    err = dtl_mpi_fail(ctx, rc, "MPI_Type_create_struct");
  if (err)
    vol = 0, cnt = 0, ftype = mtype = dtl_type_mpi(t);
  const char *what = "MPI_File_set_view";
  rc = MPI_File_set_view(fh, (MPI_Offset)off, dtl_type_mpi(t), ftype, "native", MPI_INFO_NULL);
  if (rc == MPI_SUCCESS) {
    MPI_Status st;
    what = write ? "MPI_File_write" : "MPI_File_read_all";
    if (write)
      rc = cnt > 0 ? MPI_File_write(fh, local, cnt, mtype, &st) : MPI_SUCCESS;
    else
      rc = MPI_File_read_all(fh, local, cnt, mtype, &st);
    int n = cnt;
    if (rc == MPI_SUCCESS && cnt > 0 && mtype == dtl_type_mpi(t))
      MPI_Get_count(&st, mtype, &n);
    if (rc == MPI_SUCCESS && n != cnt && !err)
      err = dtl_fail(ctx, "%s moved %d of %d elements", what, n, cnt);
  }
  if (rc != MPI_SUCCESS && !err)
    err = dtl_mpi_fail(ctx, rc, what);
  if (ftype != dtl_type_mpi(t))
    MPI_Type_free(&ftype);
  dtl_count_free(&mtype);
  int64_t bytes = vol * (int64_t)dtl_type_size(t);
  if (vol > 0 && write)
    ctx->bytes_sent[DTL_OP_IO] += bytes, ctx->msgs_sent[DTL_OP_IO]++;
  if (vol > 0 && !write)
    ctx->bytes_recv[DTL_OP_IO] += bytes, ctx->msgs_recv[DTL_OP_IO]++;
  return err;
}

int dtl_npy_read(dtl_ctx *ctx, const char *path, const dtl_dist *d, dtl_type t, void *local,
                 const dtl_box *own) {
  int64_t off = 0;
  int err = ctx->rank == 0 ? check_file(ctx, path, d, t, &off) : 0;
  if (dtl_any_error(ctx, err))
    return 1;
  int rc = MPI_Bcast(&off, 1, MPI_INT64_T, 0, ctx->cart);
  if (rc != MPI_SUCCESS)
    return dtl_any_error(ctx, dtl_mpi_fail(ctx, rc, "MPI_Bcast"));
  MPI_File fh;
  rc = MPI_File_open(ctx->cart, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  if (dtl_any_error(ctx, rc != MPI_SUCCESS ? dtl_mpi_fail(ctx, rc, "MPI_File_open") : 0)) {
    if (rc == MPI_SUCCESS)
      MPI_File_close(&fh);
    return 1;
  }
  dtl_box mine;
  bool holder = dtl_dist_block(ctx, d, ctx->coords, &mine);
  (void)own;
  err = move_block(ctx, fh, off, d, t, &mine, holder, local, false);
  rc = MPI_File_close(&fh);
  if (rc != MPI_SUCCESS && !err)
    err = dtl_mpi_fail(ctx, rc, "MPI_File_close");
  if (err) {
    char msg[sizeof ctx->err];
    snprintf(msg, sizeof msg, "%s", ctx->err);
    dtl_fail(ctx, "%s: %s", path, msg);
  }
  return dtl_any_error(ctx, err);
}

/* The header of format 1.0, padded with spaces so that the data starts at a multiple of
 * 64 bytes as NumPy does. */
static size_t make_header(char *buf, size_t len, const dtl_dist *d, dtl_type t) {
  char shape[200], dict[400];
  format_shape(shape, sizeof shape, d->order, d->extent);
  int n = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                   NATIVE_ORDER, dtype_code(t), shape);
  size_t total = 10 + (size_t)n + 1;
  total = (total + 63) / 64 * 64;
  if (total > len)
    return 0;
  size_t hlen = total - 10;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)(hlen & 0xff);
  buf[9] = (char)(hlen >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
  buf[total - 1] = '\n';
  return total;
}

/* (comm_internal.h) */
int dtl_tmp_begin(dtl_ctx *ctx, const char *path, const void *hdr, size_t hlen, char *tmp, size_t tmpsize, char *dst,
                  size_t dstsize, int *created) {
  int err = 0;
  *created = 0;
  if (ctx->rank == 0 && !dtl_write_target(path, dst, dstsize))
    err = dtl_fail(ctx, "%s: the symbolic links loop or their path is too long", path);
  else if (ctx->rank == 0 && strlen(dst) + 32 > tmpsize)
    err = dtl_fail(ctx, "%s: path too long", path);
  if (!err && ctx->rank == 0) {
    uint64_t r = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 17 ^
                 (uint64_t)clock() ^ (uint64_t)(uintptr_t)&r;
    snprintf(tmp, tmpsize, "%s.tmp.%08llx", dst, (unsigned long long)(r >> 32));
    FILE *f = fopen(tmp, "wbx");
    if (!f) {
      err = dtl_fail(ctx, "%s: cannot create file: %s", path, strerror(errno));
    } else {
      *created = 1;
      bool ok = fwrite(hdr, 1, hlen, f) == hlen;
      if (fclose(f) != 0)
        ok = false;
      if (!ok)
        err = dtl_fail(ctx, "%s: cannot write: %s", path, strerror(errno));
    }
  }
  int rc = MPI_Bcast(tmp, (int)tmpsize, MPI_CHAR, 0, ctx->cart);
  if (rc != MPI_SUCCESS && !err)
    err = dtl_mpi_fail(ctx, rc, "MPI_Bcast");
  return dtl_any_error(ctx, err);
}

int dtl_npy_write(dtl_ctx *ctx, const char *path, const dtl_dist *d, dtl_type t, const void *local,
                  const dtl_box *own) {
  char tmp[4096], hdr[1024], dst[4096];
  int err = 0, created = 0;
  size_t hlen = make_header(hdr, sizeof hdr, d, t);
  if (hlen == 0) /* the same on every rank */
    return dtl_fail(ctx, "%s: the .npy header does not fit in %zu bytes", path, sizeof hdr);
  if (dtl_tmp_begin(ctx, path, hdr, hlen, tmp, sizeof tmp, dst, sizeof dst, &created))
    goto fail;
  int rc;
  MPI_File fh;
  rc = MPI_File_open(ctx->cart, tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
  if (dtl_any_error(ctx, rc != MPI_SUCCESS ? dtl_mpi_fail(ctx, rc, "MPI_File_open") : 0)) {
    if (rc == MPI_SUCCESS)
      MPI_File_close(&fh);
    goto fail;
  }
  dtl_box mine;
  bool holder = dtl_dist_block(ctx, d, ctx->coords, &mine);
  bool writer =
      holder && (d->replicated_everywhere ? ctx->rank == 0 : dtl_dist_canonical(d, ctx->coords));
  (void)own;
  err = move_block(ctx, fh, (int64_t)hlen, d, t, &mine, writer, (void *)local, true);
  rc = MPI_File_close(&fh);
  if (rc != MPI_SUCCESS && !err)
    err = dtl_mpi_fail(ctx, rc, "MPI_File_close");
  if (err) {
    char msg[sizeof ctx->err];
    snprintf(msg, sizeof msg, "%s", ctx->err);
    dtl_fail(ctx, "%s: %s", path, msg);
  }
  if (dtl_any_error(ctx, err))
    goto fail;
  if (ctx->rank == 0 && rename(tmp, dst) != 0)
    err = dtl_fail(ctx, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
  if (dtl_any_error(ctx, err))
    goto fail;
  return 0;
fail:
  if (created)
    unlink(tmp);
  return 1;
}
