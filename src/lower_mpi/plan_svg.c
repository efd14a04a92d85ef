/* plan_svg.c -- distalc --emit svg: the plan as a picture (a printer of the plan, as
 * lw_print_plan is, beside the lowering that decides it), one panel per statement: the
 * processor grid (a 3-D or deeper grid as its 2-D layers side by side), each tensor's global
 * index space cut into the blocks the ranks hold, and each communicate point with the bytes
 * the plan gives and the messages of its first step, as arrows on a small copy of the grid
 * and as a table.  It draws what the lowering decided (lower.h: the plan and its values at
 * the params, instance.c) and what the SPMD rewrites changed (spmd.h: halo exchanges); it
 * decides nothing.  The document is SVG 1.1, self-contained and deterministic. */
#include "lower_mpi/spmd.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum {
  SVG_WIDTH = 1120,      /* the document */
  SVG_GRID_W = 520,      /* the room of the statement's grid */
  SVG_MINI_W = 300,      /* ... of the small grid with a communicate point's arrows */
  SVG_PIC = 150,         /* the longest side of a tensor's picture */
  SVG_MAX_CELLS = 4096,  /* the most ranks drawn as cells */
  SVG_MAX_ARROWS = 256,  /* the most messages drawn as arrows (all of them, else none) */
  SVG_MAX_ROWS = 12,     /* the most messages listed per communicate point */
  SVG_MAX_RANKS_MSGS = 4096 /* messages are derived up to this many ranks */
};

typedef struct {
  FILE *f; /* the body; the header needs its height */
  const lw_program *lp;
  const sp_program *sp;
  const int64_t *params;
  int64_t nranks, dims[LW_MAX_DIMS];
  int nd;
  double y; /* the next free row */
} svg;

/* ---- text ---- */
static void esc(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '&') fputs("&amp;", f);
    else if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '"') fputs("&quot;", f);
    else if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
  }
}

static char *vfmt(const char *fmt, va_list ap) {
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

/* <text> at (x, y); style: "" or more attributes ("font-weight=\"bold\"") */
static void text(svg *s, double x, double y, int size, const char *style, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void text(svg *s, double x, double y, int size, const char *style, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *t = vfmt(fmt, ap);
  va_end(ap);
  fprintf(s->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\"%s%s>", x, y, size, *style ? " " : "", style);
  if (t) esc(s->f, t);
  fputs("</text>\n", s->f);
  free(t);
}

static void title(svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void title(svg *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *t = vfmt(fmt, ap);
  va_end(ap);
  fputs("<title>", s->f);
  if (t) esc(s->f, t);
  fputs("</title>", s->f);
  free(t);
}

/* "[0, 128) x [0, 256)", or "scalar" */
static void box_text(const lw_box *b, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  if (!b->order) snprintf(out, n, "scalar");
  for (int x = 0; x < b->order && k < n; x++)
    k += (size_t)snprintf(out + k, n - k, "%s[%lld, %lld)", x ? " x " : "", (long long)b->lo[x], (long long)b->hi[x]);
}

static void coords_text(const svg *s, int64_t r, char *out, size_t n) {
  int64_t c[LW_MAX_DIMS];
  lw_coords_of(s->nd, s->dims, r, c);
  size_t k = (size_t)snprintf(out, n, "(");
  for (int g = 0; g < s->nd && k < n; g++) k += (size_t)snprintf(out + k, n - k, "%s%lld", g ? "," : "", (long long)c[g]);
  if (k < n) snprintf(out + k, n - k, ")");
}

/* A rank's color: hues a golden angle apart, so that neighbours differ. */
static void rank_color(int64_t r, char out[8]) {
  double h = (double)((r * 137) % 360) / 60.0, s = 0.55, l = 0.68;
  double c = (1 - (2 * l - 1 < 0 ? 1 - 2 * l : 2 * l - 1)) * s, hm = h - 2 * (int)(h / 2);
  double x = c * (1 - (hm - 1 < 0 ? 1 - hm : hm - 1)), m = l - c / 2, rgb[3];
  int sector = (int)h;
  const int pick[6][3] = {{0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}};
  double v[3] = {c, x, 0};
  for (int k = 0; k < 3; k++) rgb[k] = v[pick[sector % 6][k]] + m;
  snprintf(out, 8, "#%02x%02x%02x", (int)(rgb[0] * 255 + 0.5), (int)(rgb[1] * 255 + 0.5), (int)(rgb[2] * 255 + 0.5));
}

static const char *op_color(lw_pattern p) {
  static const char *c[] = {"#888888", "#1f5fbf", "#2a8a2a", "#b03030", "#8a3ab0"};
  return c[p];
}

/* ---- the grid ---- */
typedef struct {
  double x, y, cw, ch, gap; /* origin, cell size, gap between layers */
  int64_t rows, cols, layers, per_row, drawn; /* layers of rows x cols cells, per_row of them side by side */
} grid_geom;

/* Cells of at most `width` pixels in all: the last two grid dims are a layer's rows and
 * columns, the dims before them number the layers. */
static grid_geom grid_layout(const svg *s, double x, double y, double width, double maxcell) {
  grid_geom g = {.x = x, .y = y, .gap = 14, .rows = 1, .cols = s->dims[s->nd - 1], .layers = 1};
  if (s->nd >= 2) g.rows = s->dims[s->nd - 2];
  for (int d = 0; d + 2 < s->nd; d++) g.layers *= s->dims[d];
  g.cw = width / (double)g.cols;
  if (g.cw > maxcell) g.cw = maxcell;
  if (g.cw < 6) g.cw = 6;
  g.ch = g.cw > 40 ? g.cw * 0.6 : g.cw;
  double label = s->nd > 2 ? 5.5 * (15.0 + 11.0 * (s->nd - 3)) : 0; /* "layer coord0=1, coord1=0" */
  if (label - g.cols * g.cw + 8 > g.gap) g.gap = label - g.cols * g.cw + 8;
  g.per_row = (int64_t)((width + g.gap) / (g.cols * g.cw + g.gap));
  if (g.per_row < 1) g.per_row = 1;
  if (g.per_row > g.layers) g.per_row = g.layers;
  g.drawn = s->nranks < SVG_MAX_CELLS ? s->nranks : SVG_MAX_CELLS;
  return g;
}

static void cell_at(const svg *s, const grid_geom *g, int64_t r, double *cx, double *cy) {
  int64_t c[LW_MAX_DIMS];
  lw_coords_of(s->nd, s->dims, r, c);
  int64_t row = s->nd >= 2 ? c[s->nd - 2] : 0, col = c[s->nd - 1], layer = r / (g->rows * g->cols);
  double lw = g->cols * g->cw + g->gap, lh = g->rows * g->ch + 14 + (s->nd > 2 ? 12 : 0);
  *cx = g->x + (double)(layer % g->per_row) * lw + (double)col * g->cw;
  *cy = g->y + (s->nd > 2 ? 12 : 0) + (double)(layer / g->per_row) * lh + (double)row * g->ch;
}

static double grid_width(const grid_geom *g) {
  int64_t layers = (g->drawn + g->rows * g->cols - 1) / (g->rows * g->cols);
  int64_t n = layers < g->per_row ? layers : g->per_row;
  return (double)n * (g->cols * g->cw + g->gap) - (g->layers > 1 ? 0 : g->gap);
}

static double grid_height(const svg *s, const grid_geom *g) {
  int64_t layers = (g->drawn + g->rows * g->cols - 1) / (g->rows * g->cols);
  int64_t lrows = (layers + g->per_row - 1) / g->per_row;
  return (double)lrows * (g->rows * g->ch + 14 + (s->nd > 2 ? 12 : 0));
}

/* The cells, each labelled with its rank and grid coordinates where there is room, and a
 * tooltip that names both; returns the height drawn. */
static double draw_grid(svg *s, const grid_geom *g, bool labels) {
  char col[8], ct[128];
  for (int64_t r = 0; r < g->drawn; r++) {
    double x, y;
    cell_at(s, g, r, &x, &y);
    if (s->nd > 2 && r % (g->rows * g->cols) == 0) {
      int64_t c[LW_MAX_DIMS];
      lw_coords_of(s->nd, s->dims, r, c);
      char lt[128];
      size_t k = 0;
      for (int d = 0; d + 2 < s->nd && k < sizeof lt; d++)
        k += (size_t)snprintf(lt + k, sizeof lt - k, "%scoord%d=%lld", d ? ", " : "", d, (long long)c[d]);
      text(s, x, y - 3, 10, "fill=\"#444444\"", "layer %s", lt);
    }
    rank_color(r, col);
    coords_text(s, r, ct, sizeof ct);
    fprintf(s->f, "<g><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"#ffffff\"/>", x, y, g->cw, g->ch,
            col);
    title(s, "rank %lld %s", (long long)r, ct);
    fputs("</g>\n", s->f);
    if (!labels) continue;
    if (g->cw >= 44 && (double)strlen(ct) * 5.5 < g->cw) {
      text(s, x + g->cw / 2, y + g->ch / 2 - 1, 11, "text-anchor=\"middle\" font-weight=\"bold\"", "r%lld", (long long)r);
      text(s, x + g->cw / 2, y + g->ch / 2 + 10, 9, "text-anchor=\"middle\"", "%s", ct);
    } else if (g->cw >= 16) {
      text(s, x + g->cw / 2, y + g->ch / 2 + 3, g->cw >= 24 ? 10 : 7, "text-anchor=\"middle\"", "%lld", (long long)r);
    }
  }
  double h = grid_height(s, g);
  if (g->drawn < s->nranks) {
    text(s, g->x, g->y + h + 10, 10, "fill=\"#b03030\"", "ranks %lld..%lld not drawn (the first %lld of %lld)", (long long)g->drawn,
         (long long)s->nranks - 1, (long long)g->drawn, (long long)s->nranks);
    h += 14;
  }
  return h;
}

/* ---- a tensor's index space, cut into blocks ---- */
typedef struct {
  lw_box b;         /* projected on dims 0 and 1 */
  int64_t first, n; /* its lowest owner, and how many ranks hold it */
  char owners[48];
} block_row;

static int add_owner(block_row **v, int *n, int *cap, const lw_box *b, int64_t r) {
  for (int k = 0; k < *n; k++)
    if (!memcmp(&(*v)[k].b, b, sizeof *b)) {
      block_row *w = &(*v)[k];
      size_t l = strlen(w->owners);
      if (w->n < 4) snprintf(w->owners + l, sizeof w->owners - l, ",%lld", (long long)r);
      else if (w->n == 4) snprintf(w->owners + l, sizeof w->owners - l, ",...");
      w->n++;
      return 0;
    }
  if (*n == *cap) {
    int c = *cap ? 2 * *cap : 16;
    block_row *nv = realloc(*v, (size_t)c * sizeof *nv);
    if (!nv) return -1;
    *v = nv, *cap = c;
  }
  block_row *w = &(*v)[(*n)++];
  memset(w, 0, sizeof *w);
  w->b = *b, w->first = r, w->n = 1;
  snprintf(w->owners, sizeof w->owners, "r%lld", (long long)r);
  return 0;
}

/* The picture's extents (rows along dim 0, columns along dim 1) and pixel size. */
typedef struct {
  int64_t e0, e1;
  double w, h;
} pic_geom;

static pic_geom pic_layout(const lw_box *full) {
  pic_geom p = {.e0 = 1, .e1 = 1, .w = 26, .h = 26};
  if (full->order == 1) p.e1 = full->hi[0] > 0 ? full->hi[0] : 1, p.w = SVG_PIC, p.h = 18;
  if (full->order >= 2) {
    p.e0 = full->hi[0] > 0 ? full->hi[0] : 1, p.e1 = full->hi[1] > 0 ? full->hi[1] : 1;
    double big = (double)(p.e0 > p.e1 ? p.e0 : p.e1);
    p.w = SVG_PIC * (double)p.e1 / big, p.h = SVG_PIC * (double)p.e0 / big;
    if (p.w < 24) p.w = 24;
    if (p.h < 24) p.h = 24;
  }
  return p;
}

/* the pixel rectangle of a box (dims 0 and 1 of it) in the picture at (x, y) */
static void pic_rect(const pic_geom *p, const lw_box *b, double x, double y, double r[4]) {
  double l0 = 0, h0 = 1, l1 = 0, h1 = 1;
  if (b->order == 1) l1 = (double)b->lo[0], h1 = (double)b->hi[0];
  if (b->order >= 2) l0 = (double)b->lo[0], h0 = (double)b->hi[0], l1 = (double)b->lo[1], h1 = (double)b->hi[1];
  double e0 = b->order >= 2 ? (double)p->e0 : 1, e1 = b->order >= 1 ? (double)p->e1 : 1;
  r[0] = x + p->w * l1 / e1, r[1] = y + p->h * l0 / e0;
  r[2] = p->w * (h1 - l1) / e1, r[3] = p->h * (h0 - l0) / e0;
}

static const char *role_of(const lw_stmt *ls, int t) {
  bool w = false, r = false;
  for (int q = 0; q < ls->ncomm; q++)
    if (ls->comm[q].tensor == t) {
      if (ls->comm[q].output) w = true;
      else r = true;
    }
  return w && r ? "written and read" : w ? "written" : "read";
}

/* One tensor at (x, y): its name, extents and distribution, then its blocks; returns the
 * height drawn. */
static double draw_tensor(svg *s, int i, int t, double x, double y) {
  const fe_tensor *ft = &s->lp->ir->ast->tensors[t];
  const lw_owner *o = &s->lp->owner[t];
  const char *dist = s->sp && s->sp->tensors[t].dist_text ? s->sp->tensors[t].dist_text : NULL;
  char ext[160] = "";
  lw_box full = {.order = ft->order}, b;
  int64_t zero[LW_MAX_DIMS] = {0};
  bool known = true;
  for (int x2 = 0; x2 < ft->order; x2++) {
    full.lo[x2] = 0;
    known &= sym_eval(sym_from_size(&ft->dims[x2]), &(sym_env){.params = s->params}, &full.hi[x2]);
    size_t k = strlen(ext);
    snprintf(ext + k, sizeof ext - k, "%s%lld", x2 ? " x " : "", (long long)full.hi[x2]);
  }
  text(s, x, y + 11, 12, "font-weight=\"bold\"", "%s: %s, %s", ft->name, role_of(&s->lp->stmts[i], t), ft->order ? ext : "scalar");
  text(s, x, y + 24, 10, "fill=\"#444444\"", "%s%s", o->everywhere || !dist ? "replicated on every rank" : dist,
       lw_sparse(s->lp->ir->ast, t) ? ", sparse" : "");
  double top = y + 30, h = 30;
  if (!known) {
    text(s, x, top + 12, 10, "fill=\"#b03030\"", "extents unknown: --set their params");
    return h + 18;
  }
  if (ft->order > 2) {
    text(s, x, top + 10, 9, "fill=\"#444444\"", "dims 0 and 1 shown; dims 2..%d projected", ft->order - 1);
    top += 13, h += 13;
  }
  block_row *v = NULL;
  int n = 0, cap = 0;
  int64_t c[LW_MAX_DIMS], upto = s->nranks < SVG_MAX_CELLS ? s->nranks : SVG_MAX_CELLS;
  for (int64_t r = 0; r < upto; r++) {
    lw_coords_of(s->nd, s->dims, r, c);
    int held = lw_block_at(s->lp, t, s->params, c, &b);
    if (held <= 0) continue;
    if (b.order > 2) b.order = 2;
    if (lw_box_volume(&b) > 0 || !b.order) add_owner(&v, &n, &cap, &b, r);
  }
  pic_geom p = pic_layout(&full);
  fprintf(s->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f4f4f4\" stroke=\"#333333\"/>\n", x, top, p.w, p.h);
  char col[8], bt[256];
  for (int k = 0; k < n; k++) {
    double r[4];
    pic_rect(&p, &v[k].b, x, top, r);
    rank_color(v[k].first, col);
    box_text(&v[k].b, bt, sizeof bt);
    fprintf(s->f, "<g><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"#ffffff\"/>", r[0], r[1], r[2], r[3], col);
    title(s, "%s %s held by rank%s %s", ft->name, bt, v[k].n > 1 ? "s" : "", v[k].owners + 1);
    fputs("</g>\n", s->f);
    if ((double)strlen(v[k].owners) * 5.5 < r[2] && r[3] >= 10)
      text(s, r[0] + r[2] / 2, r[1] + r[3] / 2 + 3, 9, "text-anchor=\"middle\"", "%s", v[k].owners);
  }
  if (!n) text(s, x + 4, top + p.h / 2 + 3, 9, "", "no rank holds a block");
  free(v);
  /* the box rank 0 reads or writes at the statement's first communicate point of t */
  const lw_stmt *ls = &s->lp->stmts[i];
  for (int q = 0; q < ls->ncomm && ft->order; q++)
    if (ls->comm[q].tensor == t && lw_box_at(s->lp, i, &ls->comm[q], s->params, zero, &b) && lw_box_volume(&b) > 0) {
      double r[4];
      if (b.order > 2) b.order = 2;
      pic_rect(&p, &b, x, top, r);
      fprintf(s->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#000000\" stroke-width=\"1.5\" "
                    "stroke-dasharray=\"4,2\"/>\n", r[0], r[1], r[2], r[3]);
      break;
    }
  return h + p.h + 8;
}

/* ---- communicate points ---- */
static bool halo_of(const sp_node *n, const sp_program *sp, int t, const sp_node **out) {
  if (!n) return false;
  if (n->kind == SN_COMM && n->op == SC_HALO && sp->bufs[n->buf].tensor == t) {
    *out = n;
    return true;
  }
  for (int k = 0; k < n->nkids; k++)
    if (halo_of(n->kids[k], sp, t, out)) return true;
  return false;
}

/* the operation, in the words of --emit plan */
static void op_text(const svg *s, const lw_comm *c, char *out, size_t n) {
  bool sparse = lw_sparse(s->lp->ir->ast, c->tensor), cuda = s->lp->cuda;
  size_t k = (size_t)snprintf(out, n, "%s", lw_pattern_name(c->pattern));
  if (c->pattern == PAT_BCAST || (c->pattern == PAT_REDUCE && c->mask)) {
    k += (size_t)snprintf(out + k, n - k, "%s along grid dims {", c->pattern == PAT_REDUCE && c->allreduce ? " (allreduce)" : "");
    for (int g = 0, first = 1; g < s->nd && k < n; g++)
      if (c->mask >> g & 1) k += (size_t)snprintf(out + k, n - k, "%s%d", first ? "" : ", ", g), first = 0;
    if (k < n) k += (size_t)snprintf(out + k, n - k, "}");
  }
  const char *api = c->pattern == PAT_BCAST ? (sparse ? "MPI_Bcast of the stored entries" : cuda ? "ncclBroadcast" : "MPI_Ibcast")
                    : c->pattern == PAT_REDUCE && c->mask ? (cuda ? (c->allreduce ? "ncclAllReduce" : "ncclReduce")
                                                                  : (c->allreduce ? "MPI_Allreduce" : "MPI_Reduce"))
                    : c->pattern == PAT_SHIFT    ? (cuda ? "ncclSend/ncclRecv" : "MPI_Sendrecv")
                    : c->pattern == PAT_EXCHANGE ? (c->output ? "point-to-point accumulate" : "point-to-point")
                                                 : NULL;
  if (c->pattern == PAT_SHIFT && k < n) k += (size_t)snprintf(out + k, n - k, " along grid dim %d", c->shift_dim);
  if (api && k < n) snprintf(out + k, n - k, " (%s)", api);
}

static double draw_arrows(svg *s, const lw_msg *m, int n, lw_pattern pat, double x, double y, double *w) {
  grid_geom g = grid_layout(s, x, y, SVG_MINI_W, 48);
  double h = draw_grid(s, &g, true);
  *w = grid_width(&g);
  for (int k = 0; k < n; k++) {
    double x0, y0, x1, y1;
    cell_at(s, &g, m[k].from, &x0, &y0);
    cell_at(s, &g, m[k].to, &x1, &y1);
    x0 += g.cw / 2, y0 += g.ch / 2, x1 += g.cw / 2, y1 += g.ch / 2;
    /* bent to the right of the direction of travel: a pair of opposite messages stays two arrows */
    double mx = (x0 + x1) / 2 + (y1 - y0) * 0.2, my = (y0 + y1) / 2 - (x1 - x0) * 0.2;
    fprintf(s->f, "<path d=\"M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.4\" marker-end=\"url(#arrow-%s)\"/>\n",
            x0, y0, mx, my, x1, y1, op_color(pat), lw_pattern_name(pat));
  }
  return h;
}

/* Communicate point q of statement i: the operation, the plan's bytes, the messages of the
 * first step; returns the height drawn. */
static double draw_comm(svg *s, int i, int q, double x, double y, bool grid_known) {
  const lw_stmt *ls = &s->lp->stmts[i];
  const lw_comm *c0 = &ls->comm[q], *c = lw_comm_at(s->lp, c0, s->params);
  const fe_program *p = s->lp->ir->ast;
  char op[512], bt[512];
  int64_t bytes;
  op_text(s, c0, op, sizeof op);
  lw_bytes_line(s->lp, i, q, s->params, bt, sizeof bt, &bytes);
  const char *at = c0->depth < 0 ? "statement start" : ls->s->vars[ls->loops[c0->depth]->var].name;
  const char *name = p->tensors[c0->tensor].name;
  text(s, x, y + 12, 12, "font-weight=\"bold\"", "%s %s at %s: %s", c0->output ? "write" : "read", name, at, op);
  text(s, x + 12, y + 26, 10, "fill=\"#444444\"", "%s", c0->why);
  text(s, x + 12, y + 39, 11, "", "%s", bt);
  double h = 44;
  if (c != c0) {
    op_text(s, c, op, sizeof op);
    text(s, x + 12, y + h + 8, 11, "", "%s == %s here: %s -- %s", p->params[c0->assume[0]].name, p->params[c0->assume[1]].name, op, c->why);
    h += 14;
  }
  const sp_node *halo = NULL;
  if (s->sp && !c0->output && halo_of(s->sp->funcs[i].body, s->sp, c0->tensor, &halo)) {
    text(s, x + 12, y + h + 8, 11, "fill=\"#8a3ab0\"",
         "halo exchange instead (the SPMD rewrite halo): only the entries at the stored coordinates of the rank's piece of %s, "
         "from their owners along grid dim %d; known once %s is loaded",
         s->sp->tensors[halo->halo_tensor].name, __builtin_ctz(halo->mask), s->sp->tensors[halo->halo_tensor].name);
    return h + 18;
  }
  if (c->pattern == PAT_LOCAL || (c->pattern == PAT_REDUCE && !c->mask)) return h + 4;
  if (!grid_known || s->nranks > SVG_MAX_RANKS_MSGS) {
    text(s, x + 12, y + h + 8, 11, "fill=\"#b03030\"", "messages not listed (%s)",
         grid_known ? "more than 4096 ranks" : "the grid is not known at these params");
    return h + 18;
  }
  int n = 0;
  bool ok;
  lw_msg *m = lw_step_messages(s->lp, i, c, s->params, s->dims, s->nranks, &n, &ok);
  if (!ok) {
    text(s, x + 12, y + h + 8, 11, "fill=\"#b03030\"", "messages not listed: the boxes are not known at these params (--set)");
    return h + 18;
  }
  int64_t es = lw_type_size(p->tensors[c->tensor].type), sum = 0;
  for (int k = 0; k < n; k++) sum += m[k].elements;
  bool sparse = lw_sparse(p, c->tensor);
  text(s, x + 12, y + h + 8, 11, "font-style=\"italic\"", "first step (every loop counter 0): %d message%s, %lld elements%s%lld bytes in all", n,
       n == 1 ? "" : "s", (long long)sum, sparse ? " at most (stored entries only): " : ", ", (long long)(sum * es));
  h += 16;
  double th = 0, tx = x + 12;
  if (n > 0 && n <= SVG_MAX_ARROWS && s->nranks <= 64) {
    double w;
    th = draw_arrows(s, m, n, c->pattern, x + 12, y + h + 4, &w) + 8;
    tx = x + 12 + w + 24;
  }
  char bx[256];
  double ty = y + h + 4;
  for (int k = 0; k < n && k < SVG_MAX_ROWS; k++, ty += 13) {
    box_text(&m[k].box, bx, sizeof bx);
    text(s, tx, ty + 10, 10, "font-family=\"monospace\"", "r%-4lld -> r%-4lld %s %s  %lld elements, %lld bytes", (long long)m[k].from,
         (long long)m[k].to, name, bx, (long long)m[k].elements, (long long)(m[k].elements * es));
  }
  if (n > SVG_MAX_ROWS) {
    text(s, tx, ty + 10, 10, "", "... and %d more", n - SVG_MAX_ROWS);
    ty += 13;
  }
  free(m);
  double rows = ty - (y + h + 4);
  return h + 8 + (th > rows ? th : rows);
}

/* ---- a statement ---- */
static void draw_stmt(svg *s, int i, bool grid_known) {
  const lw_program *lp = s->lp;
  const lw_stmt *ls = &lp->stmts[i];
  char *st = NULL;
  size_t sl = 0;
  FILE *m = open_memstream(&st, &sl);
  if (m) {
    lw_print_stmt(m, lp, i);
    fclose(m);
  }
  double top = s->y;
  fprintf(s->f, "<g class=\"statement\">\n");
  text(s, 20, top + 22, 15, "font-weight=\"bold\"", "statement %d: %s", i + 1, st ? st : "");
  free(st);
  double y = top + 34;
  if (s->sp && s->sp->funcs[i].removed) {
    text(s, 20, y + 10, 11, "fill=\"#b03030\"", "removed: %s", s->sp->funcs[i].removed);
    y += 16;
  }
  int64_t total = 0;
  bool all = true;
  char bt[512];
  for (int q = 0; q < ls->ncomm; q++) {
    int64_t b;
    lw_bytes_line(s->lp, i, q, s->params, bt, sizeof bt, &b);
    all &= b >= 0, total += b > 0 ? b : 0;
  }
  if (all) text(s, 20, y + 10, 11, "", "communication: %lld bytes per rank (rank 0), all communicate points and steps", (long long)total);
  else text(s, 20, y + 10, 11, "", "communication: bytes per rank not all evaluated (see each communicate point)");
  y += 20;
  /* the grid at the left, the tensors flowing at its right */
  double gh = 0, gw = 200;
  if (grid_known) {
    grid_geom g = grid_layout(s, 20, y, SVG_GRID_W, 64);
    gh = draw_grid(s, &g, true);
    if (grid_width(&g) > gw) gw = grid_width(&g);
  } else {
    text(s, 20, y + 12, 11, "fill=\"#b03030\"", "the grid is not known at these params");
    gh = 16;
  }
  double tx0 = 20 + gw + 30, tx = tx0, ty = y, rowh = 0;
  for (int q = 0; q < ls->ncomm; q++) {
    int t = ls->comm[q].tensor;
    bool dup = false;
    for (int k = 0; k < q; k++) dup |= ls->comm[k].tensor == t;
    if (dup) continue;
    if (tx + 180 > SVG_WIDTH) tx = tx0, ty += rowh + 10, rowh = 0;
    double h = grid_known ? draw_tensor(s, i, t, tx, ty) : 0;
    if (!grid_known) {
      text(s, tx, ty + 11, 12, "font-weight=\"bold\"", "%s", lp->ir->ast->tensors[t].name);
      h = 16;
    }
    if (h > rowh) rowh = h;
    tx += 200;
  }
  y = (y + gh > ty + rowh ? y + gh : ty + rowh) + 6;
  text(s, 20, y + 8, 9, "fill=\"#444444\"", "cells and blocks colored by rank; dashed: the box rank 0 moves in the first step");
  y += 18;
  for (int q = 0; q < ls->ncomm; q++) y += draw_comm(s, i, q, 20, y, grid_known) + 6;
  fprintf(s->f, "<rect x=\"8\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"none\" stroke=\"#999999\"/>\n</g>\n", top + 4, SVG_WIDTH - 16,
          y - top);
  s->y = y + 14;
}

int lw_print_svg(FILE *out, const lw_program *lp, const sp_program *sp, const int64_t *params, int64_t nranks, const char *source_name) {
  char *body = NULL;
  size_t blen = 0;
  svg s = {.lp = lp, .sp = sp, .params = params, .nranks = nranks, .nd = lp->ndims, .y = 44};
  if (!(s.f = open_memstream(&body, &blen))) return 1;
  bool grid_known = lw_grid_at(lp, params, s.dims);
  int64_t prod = 1;
  for (int g = 0; g < s.nd && grid_known; g++) prod *= s.dims[g];
  grid_known &= prod == nranks;
  char gt[128] = "";
  for (int g = 0; g < s.nd && grid_known; g++) {
    size_t k = strlen(gt);
    snprintf(gt + k, sizeof gt - k, "%s%lld", g ? " x " : "", (long long)s.dims[g]);
  }
  text(&s, 20, 28, 18, "font-weight=\"bold\"", "%s: plan at %lld rank%s, grid %s", source_name, (long long)nranks, nranks == 1 ? "" : "s",
       grid_known ? gt : "?");
  for (int i = 0; i < lp->nstmts; i++) draw_stmt(&s, i, grid_known);
  if (fclose(s.f)) {
    free(body);
    return 1;
  }
  int height = (int)s.y + 10;
  fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n<title>",
          SVG_WIDTH, height, SVG_WIDTH, height);
  esc(out, source_name);
  fprintf(out, ": the plan at %lld ranks (distalc --emit svg)</title>\n<defs>\n", (long long)nranks);
  for (int p = PAT_BCAST; p <= PAT_EXCHANGE; p++)
    fprintf(out, "<marker id=\"arrow-%s\" viewBox=\"0 0 8 8\" refX=\"7\" refY=\"4\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">"
                 "<path d=\"M0,0 L8,4 L0,8 z\" fill=\"%s\"/></marker>\n",
            lw_pattern_name((lw_pattern)p), op_color((lw_pattern)p));
  fprintf(out, "</defs>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", SVG_WIDTH, height);
  fwrite(body, 1, blen, out);
  fputs("</svg>\n", out);
  free(body);
  return ferror(out) ? 1 : 0;
}
