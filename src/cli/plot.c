/* loopkit plot: training curves from a run's metrics.csv, drawn with cairo
 * into a PNG or SVG file: a grid of the panels plot_panels.c chooses, each
 * a metric per step with its training values (raw and smoothed), its
 * validation points and its test result as a level, on a linear or a log
 * scale. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "plot.h"

#ifdef LK_HAVE_CAIRO
#include <cairo.h>
#if CAIRO_HAS_SVG_SURFACE
#include <cairo-svg.h>
static const bool can_svg = true;
#else
static const bool can_svg = false;
#endif
#if CAIRO_HAS_PNG_FUNCTIONS
static const bool can_png = true;
#else
static const bool can_png = false;
#endif

/* The figure: a grid of panels, two or three a row. */
enum { PANEL_W = 600, PANEL_H = 450 };
/* The plot area inside a panel: room for the title, tick labels and axis
 * labels around it. */
enum { MARGIN_L = 84, MARGIN_R = 24, MARGIN_T = 44, MARGIN_B = 56 };
/* TensorBoard's smoothing weight for the training loss, and its legend. */
static const double smoothing = 0.9;
static const char smoothing_label[] = "smoothed (EMA 0.9)";
/* Beyond this a value is a divergence, not a point: leaving it out keeps
 * the span of an axis finite. */
static const double too_big = 1e300;

static const char usage[] =
    "usage: loopkit plot RUN_DIR [-o FILE] [--metrics NAME,...] [--log] "
    "[--list]: FILE ends in .png or .svg (default RUN_DIR/curves.png)";

/* What to draw and where. */
typedef struct plot_options {
  const char *out;
  const char *metrics; /* a comma list, or NULL: every metric */
  bool log;            /* every y axis on a log scale */
  bool list;           /* print the panels instead of drawing them */
} plot_options;

typedef struct rgb {
  double r, g, b;
} rgb;

typedef struct series {
  const double *x, *y; /* NULL: no data */
  size_t n;
  rgb color;
  double width;
  bool markers;      /* a dot at every point */
  bool level;        /* one point, and a dashed line across at its height */
  const char *label; /* in the legend, or NULL */
} series;

/* A panel, and the values it draws that are not columns: its smoothed
 * series, the ends of a constant's line, a test result's point. */
typedef struct panel {
  const char *title, *xlabel, *ylabel;
  const char *missing; /* said instead of an empty plot */
  series s[4];
  size_t n_series;
  bool log;
  double *smoothed;
  double cx[2], cy[2], tx, ty;
  char ylabel_buf[96];
} panel;

/* An axis from LO to HI with a tick every STEP (0: no ticks); on a LOG
 * axis the three are powers of ten. */
typedef struct axis {
  double lo, hi, step;
  bool log;
} axis;

/* A panel's plot area in device units and the axes mapped onto it. */
typedef struct frame {
  double x, y, w, h;
  axis ax[2]; /* x, y */
} frame;

static bool usable(double v) {
  return isfinite(v) && fabs(v) < too_big;
}

/* A point that can be drawn, on a log scale when LOG: nothing there below
 * or at 0. */
static bool usable_point(double x, double y, bool log) {
  return usable(x) && usable(y) && (!log || y > 0);
}

/* ---- axes --------------------------------------------------------------- */

/* A tick spacing of 1, 2 or 5 times a power of ten giving about five
 * ticks over SPAN. */
static double nice_step(double span) {
  double raw = span / 5;
  double mag = pow(10, floor(log10(raw)));
  double f = raw / mag;
  return mag * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

/* An axis over [MIN, MAX] widened to whole ticks; a single value gets
 * room around it so that its point lands inside. An INTEGER axis (steps,
 * epochs) has no ticks between whole numbers. */
static axis nice_axis(double min, double max, bool integer) {
  if (min == max) {
    double pad = min == 0 ? 1 : fabs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  double step = nice_step(max - min);
  if (integer && step < 1)
    step = 1;
  axis a = {floor(min / step) * step, ceil(max / step) * step, step, false};
  bool sane = isfinite(a.lo) && isfinite(a.hi) && a.hi > a.lo && step > 0 &&
              (a.hi - a.lo) / step <= 50 && fabs(a.lo / step) < 1e15 &&
              fabs(a.hi / step) < 1e15;
  if (!sane) /* spans at the ends of double's range: no ticks, no rounding */
    a = (axis){min, max > min ? max : min + 1, 0, false};
  return a;
}

static int clamp(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* The steps of a long run, shortened so that they fit under their tick:
 * 200k, 1.5M. */
static void tick_label_si(char *buf, size_t size, double v, double step) {
  static const struct {
    double scale;
    const char *suffix;
  } units[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}};
  size_t u = 0;
  while (units[u].scale > 1 && fabs(v) < units[u].scale)
    u++;
  double x = v / units[u].scale, s = step / units[u].scale;
  int whole = x == 0 ? 1 : (int)floor(log10(fabs(x))) + 1;
  int digits = whole - (int)floor(log10(s)); /* down to the step's digit */
  snprintf(buf, size, "%.*g%s", clamp(digits > whole ? digits : whole, 1, 15),
           x, units[u].suffix);
}

/* Digits enough to tell A's ticks apart, without float noise. */
static void tick_label(char *buf, size_t size, double v, const axis *a) {
  if (a->log) { /* v is a power of ten's exponent */
    snprintf(buf, size, "%g", pow(10, v));
    return;
  }
  double step = a->step, big = fmax(fabs(a->lo), fabs(a->hi));
  if (fabs(v) < step * 1e-6)
    v = 0; /* no "-0" or "1e-17" where the axis crosses zero */
  int mag = (int)floor(log10(step));
  if (big >= 1e4 && step >= 1)
    tick_label_si(buf, size, v, step);
  else if (step >= 1e-4)
    snprintf(buf, size, "%.*f", mag < 0 ? -mag : 0, v);
  else {
    int digits = v == 0 ? 1 : (int)floor(log10(fabs(v))) - mag + 1;
    snprintf(buf, size, "%.*g", clamp(digits, 1, 7), v);
  }
}

/* Device coordinate of V along axis DIM (0: x, 1: y, which grows up). */
static double to_device(const frame *f, int dim, double v) {
  const axis *a = &f->ax[dim];
  if (a->log)
    v = log10(v);
  double t = (v - a->lo) / (a->hi - a->lo);
  return dim == 0 ? f->x + t * f->w : f->y + f->h - t * f->h;
}

/* TEXT with its extents' point (AX, AY) at (X, Y): 0 left/top, 0.5 centre,
 * 1 right/bottom. */
static void draw_text(cairo_t *cr, double x, double y, const char *text,
                      double ax, double ay) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, text, &e);
  cairo_move_to(cr, x - e.x_bearing - ax * e.width,
                y - e.y_bearing - ay * e.height);
  cairo_show_text(cr, text);
}

static void set_color(cairo_t *cr, rgb c) {
  cairo_set_source_rgb(cr, c.r, c.g, c.b);
}

static const rgb ink = {0.15, 0.15, 0.15}, grid = {0.88, 0.88, 0.88},
                 faint = {0.45, 0.45, 0.45};

static void segment(cairo_t *cr, rgb color, double x0, double y0, double x1,
                    double y1) {
  set_color(cr, color);
  cairo_move_to(cr, x0, y0);
  cairo_line_to(cr, x1, y1);
  cairo_stroke(cr);
}

/* Grid lines, tick marks and tick labels along axis DIM. */
static void draw_ticks(cairo_t *cr, const frame *f, int dim) {
  const axis *a = &f->ax[dim];
  if (a->step == 0)
    return;
  cairo_set_font_size(cr, 11);
  cairo_set_line_width(cr, 1);
  double bottom = f->y + f->h, right = f->x + f->w;
  long first = (long)ceil(a->lo / a->step - 1e-9);
  long last = (long)floor(a->hi / a->step + 1e-9);
  for (long k = first; k <= last; k++) {
    double v = (double)k * a->step;
    double p = to_device(f, dim, a->log ? pow(10, v) : v);
    char label[32];
    tick_label(label, sizeof label, v, a);
    if (dim == 0) {
      segment(cr, grid, p, f->y, p, bottom);
      segment(cr, ink, p, bottom, p, bottom + 5);
      draw_text(cr, p, bottom + 9, label, 0.5, 0);
    } else {
      segment(cr, grid, f->x, p, right, p);
      segment(cr, ink, f->x - 5, p, f->x, p);
      draw_text(cr, f->x - 9, p, label, 1, 0.5);
    }
  }
}

static void draw_axes(cairo_t *cr, const frame *f, const char *xlabel,
                      const char *ylabel) {
  draw_ticks(cr, f, 0);
  draw_ticks(cr, f, 1);
  set_color(cr, ink);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, f->x, f->y, f->w, f->h);
  cairo_stroke(cr);
  cairo_set_font_size(cr, 12);
  draw_text(cr, f->x + f->w / 2, f->y + f->h + 30, xlabel, 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, f->x - MARGIN_L + 16, f->y + f->h / 2);
  cairo_rotate(cr, -M_PI / 2);
  draw_text(cr, 0, 0, ylabel, 0.5, 0.5);
  cairo_restore(cr);
}

/* ---- series ------------------------------------------------------------- */

/* The bounds of every usable point of P's series; false when none. */
static bool data_bounds(const panel *p, double lo[2], double hi[2]) {
  bool any = false;
  for (size_t k = 0; k < p->n_series; k++) {
    const series *s = &p->s[k];
    for (size_t i = 0; s->x && s->y && i < s->n; i++) {
      double v[2] = {s->x[i], s->y[i]};
      if (!usable_point(v[0], v[1], p->log))
        continue;
      for (int d = 0; d < 2; d++) {
        lo[d] = any ? fmin(lo[d], v[d]) : v[d];
        hi[d] = any ? fmax(hi[d], v[d]) : v[d];
      }
      any = true;
    }
  }
  return any;
}

/* Points sharing a column of pixels, reduced to their lowest and highest:
 * a long run draws as fast, and its SVG stays as small, as a short one,
 * with the same envelope. */
typedef struct bucket {
  long col;
  size_t n;
  size_t i[2]; /* index of the point of least and of greatest device y */
  double x[2], y[2];
} bucket;

static void flush_bucket(cairo_t *cr, const bucket *b) {
  if (b->n == 0)
    return;
  int first = b->i[0] <= b->i[1] ? 0 : 1; /* keep the order of the data */
  cairo_line_to(cr, b->x[first], b->y[first]);
  if (b->i[0] != b->i[1])
    cairo_line_to(cr, b->x[1 - first], b->y[1 - first]);
}

static void add_to_bucket(cairo_t *cr, bucket *b, size_t i, double x,
                          double y) {
  long col = (long)floor(x);
  if (b->n == 0 || col != b->col) {
    flush_bucket(cr, b);
    *b = (bucket){col, 1, {i, i}, {x, x}, {y, y}};
    return;
  }
  b->n++;
  int end = y > b->y[1] ? 1 : y < b->y[0] ? 0 : -1;
  if (end >= 0) {
    b->i[end] = i;
    b->x[end] = x;
    b->y[end] = y;
  }
}

static void draw_dot(cairo_t *cr, double x, double y) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, 3.5, 0, 2 * M_PI);
}

/* A test result: a dashed line across the plot at its value, for the
 * curves to be read against, and its point. */
static void draw_level(cairo_t *cr, const frame *f, const series *s) {
  double y = to_device(f, 1, s->y[0]);
  static const double dash[] = {6, 4};
  cairo_set_dash(cr, dash, 2, 0);
  cairo_move_to(cr, f->x, y);
  cairo_line_to(cr, f->x + f->w, y);
  cairo_stroke(cr);
  cairo_set_dash(cr, NULL, 0, 0);
  draw_dot(cr, to_device(f, 0, s->x[0]), y);
  cairo_fill(cr);
}

static void draw_series(cairo_t *cr, const frame *f, const series *s) {
  bool log = f->ax[1].log;
  if (!s->x || !s->y)
    return;
  set_color(cr, s->color);
  cairo_set_line_width(cr, s->width);
  cairo_new_path(cr);
  if (s->level) {
    if (s->n == 1 && usable_point(s->x[0], s->y[0], log))
      draw_level(cr, f, s);
    return;
  }
  bucket b = {0};
  size_t points = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (!usable_point(s->x[i], s->y[i], log))
      continue;
    add_to_bucket(cr, &b, i, to_device(f, 0, s->x[i]),
                  to_device(f, 1, s->y[i]));
    points++;
  }
  flush_bucket(cr, &b);
  cairo_stroke(cr);
  /* A line through a single vertex is invisible: a lone point, or points
   * that all land on it. */
  bool one_vertex = points > 0 && b.n == points && b.i[0] == b.i[1];
  if (one_vertex)
    draw_dot(cr, b.x[0], b.y[0]);
  for (size_t i = 0; s->markers && !one_vertex && i < s->n; i++)
    if (usable_point(s->x[i], s->y[i], log))
      draw_dot(cr, to_device(f, 0, s->x[i]), to_device(f, 1, s->y[i]));
  cairo_fill(cr);
}

/* The labelled series, right-aligned in the margin above the plot. */
static void draw_legend(cairo_t *cr, const frame *f, const panel *p) {
  double right = f->x + f->w;
  cairo_set_font_size(cr, 11);
  for (size_t k = p->n_series; k-- > 0;) {
    const series *s = &p->s[k];
    if (!s->label)
      continue;
    cairo_text_extents_t e;
    cairo_text_extents(cr, s->label, &e);
    set_color(cr, ink);
    draw_text(cr, right, f->y - 10, s->label, 1, 0.5);
    right -= e.x_advance + 6;
    set_color(cr, s->color);
    cairo_set_line_width(cr, s->width);
    static const double dash[] = {6, 4};
    cairo_set_dash(cr, dash, s->level ? 2 : 0, 0);
    cairo_move_to(cr, right - 18, f->y - 10);
    cairo_line_to(cr, right, f->y - 10);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    right -= 18 + 14;
  }
}

static void draw_panel(cairo_t *cr, double x0, double y0, const panel *p) {
  frame f = {.x = x0 + MARGIN_L,
             .y = y0 + MARGIN_T,
             .w = PANEL_W - MARGIN_L - MARGIN_R,
             .h = PANEL_H - MARGIN_T - MARGIN_B};
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, 14);
  set_color(cr, ink);
  draw_text(cr, f.x, y0 + 14, p->title, 0, 0);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         CAIRO_FONT_WEIGHT_NORMAL);
  double lo[2], hi[2];
  if (!data_bounds(p, lo, hi)) {
    cairo_set_font_size(cr, 14);
    set_color(cr, faint);
    draw_text(cr, f.x + f.w / 2, f.y + f.h / 2, p->missing, 0.5, 0.5);
    return;
  }
  f.ax[0] = nice_axis(lo[0], hi[0], true); /* steps */
  if (p->log) {
    f.ax[1] = nice_axis(log10(lo[1]), log10(hi[1]), true); /* decades */
    f.ax[1].log = true;
  } else
    f.ax[1] = nice_axis(lo[1], hi[1], false);
  draw_axes(cr, &f, p->xlabel, p->ylabel);
  draw_legend(cr, &f, p);
  /* No clip: the axes hold every point, and a dot on the frame stays
   * whole. */
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (size_t k = 0; k < p->n_series; k++)
    draw_series(cr, &f, &p->s[k]);
}

/* ---- the figure --------------------------------------------------------- */

/* TensorBoard's smoothing: an exponential moving average of weight W,
 * debiased like Adam's moments so that the first values are not pulled
 * towards 0. Unusable values (and, on a log scale, those at or below 0)
 * stay out of the average. */
static void smooth(const double *y, size_t n, double w, bool log, double *out) {
  double avg = 0, weight = 1;
  for (size_t i = 0; i < n; i++) {
    if (!usable(y[i]) || (log && y[i] <= 0)) {
      out[i] = NAN;
      continue;
    }
    avg = avg * w + (1 - w) * y[i];
    weight *= w;
    out[i] = avg / (1 - weight);
  }
}

static series line(const double *x, const double *y, size_t n, rgb color,
                   double width, const char *label) {
  return (series){x, y, n, color, width, false, false, label};
}

static const rgb light_blue = {0.68, 0.78, 0.93}, blue = {0.10, 0.33, 0.72},
                 orange = {0.85, 0.37, 0.01}, green = {0.11, 0.55, 0.27},
                 purple = {0.46, 0.27, 0.65};

/* The first and last usable steps of T, or 0 and 0. */
static void step_span(const plot_table *t, double span[2]) {
  const double *step = plot_table_column(t, PLOT_STEP);
  span[0] = span[1] = 0;
  bool any = false;
  for (size_t i = 0; step && i < t->n_rows; i++)
    if (usable(step[i])) {
      span[0] = any ? fmin(span[0], step[i]) : step[i];
      span[1] = any ? fmax(span[1], step[i]) : step[i];
      any = true;
    }
}

/* P drawn from layout panel LP; -1 when memory runs out. Every series is
 * per step: validation and test rows are logged at the step they ran. */
static int make_panel(const plot_table *t, const plot_panel *lp,
                      const plot_options *o, panel *p) {
  const double *step = plot_table_column(t, PLOT_STEP);
  size_t n = t->n_rows;
  double span[2];
  step_span(t, span);
  *p = (panel){.title = lp->name, .xlabel = "step", .log = o->log};
  snprintf(p->ylabel_buf, sizeof p->ylabel_buf, "%s%s", lp->name,
           o->log ? " (log scale)" : "");
  p->ylabel = p->ylabel_buf;
  p->missing = o->log ? "no values above 0 for a log scale" : "no values";
  bool lr = plot_is_rate(lp->name); /* drawn as set, never smoothed */
  for (size_t k = 0; k < lp->n_series; k++) {
    const plot_series *ls = &lp->s[k];
    const double *y = ls->col >= 0 ? t->cols[ls->col] : NULL;
    switch (ls->role) {
    case ROLE_TRAIN:
      if (lr) {
        p->s[p->n_series++] = line(step, y, n, purple, 2, ls->label);
        break;
      }
      if (!(p->smoothed = malloc((n ? n : 1) * sizeof *p->smoothed)))
        return -1;
      smooth(y, n, smoothing, o->log, p->smoothed);
      p->s[p->n_series++] = line(step, y, n, light_blue, 1, ls->label);
      p->s[p->n_series++] =
          line(step, p->smoothed, n, blue, 2, smoothing_label);
      break;
    case ROLE_VAL:
      p->s[p->n_series] = line(step, y, n, orange, 2, ls->label);
      p->s[p->n_series++].markers = true;
      break;
    case ROLE_TEST: /* at the run's last step, where the test ran */
      p->tx = span[1];
      p->ty = ls->value;
      p->s[p->n_series] = line(&p->tx, &p->ty, 1, green, 1.5, ls->label);
      p->s[p->n_series++].level = true;
      break;
    case ROLE_CONSTANT:
      p->cx[0] = span[0];
      p->cx[1] = span[1];
      p->cy[0] = p->cy[1] = ls->value;
      p->s[p->n_series++] = line(p->cx, p->cy, 2, purple, 2, ls->label);
      break;
    }
  }
  return 0;
}

/* Columns of panels: one alone, two a row up to four, then three. */
static int grid_columns(size_t n) {
  return n <= 1 ? 1 : n <= 4 ? 2 : 3;
}

static void figure_size(const plot_layout *l, int *w, int *h) {
  size_t n = l->n ? l->n : 1;
  int cols = grid_columns(n);
  *w = cols * PANEL_W;
  *h = (int)((n + (size_t)cols - 1) / (size_t)cols) * PANEL_H;
}

static cairo_status_t draw_figure(cairo_t *cr, const plot_table *t,
                                  const plot_layout *l, const plot_options *o) {
  size_t n = l->n ? l->n : 1;
  panel *p = calloc(n, sizeof *p);
  if (!p)
    return CAIRO_STATUS_NO_MEMORY;
  cairo_status_t st = CAIRO_STATUS_SUCCESS;
  if (l->n == 0)
    p[0] = (panel){.title = "metrics.csv",
                   .missing = "no metric with values in metrics.csv"};
  for (size_t k = 0; k < l->n && st == CAIRO_STATUS_SUCCESS; k++)
    if (make_panel(t, &l->panels[k], o, &p[k]) != 0)
      st = CAIRO_STATUS_NO_MEMORY;
  if (st == CAIRO_STATUS_SUCCESS) {
    int cols = grid_columns(n);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    for (size_t k = 0; k < n; k++)
      draw_panel(cr, (double)(k % (size_t)cols) * PANEL_W,
                 (double)(k / (size_t)cols) * PANEL_H, &p[k]);
    st = cairo_status(cr);
  }
  for (size_t k = 0; k < n; k++)
    free(p[k].smoothed);
  free(p);
  return st;
}

/* ---- output ------------------------------------------------------------- */

typedef enum format { FORMAT_PNG, FORMAT_SVG } format;

/* Where cairo's output goes: the temporary file, and the errno of the first
 * failed write (cairo only says that one failed). */
typedef struct sink {
  FILE *f;
  int err;
} sink;

static cairo_status_t write_chunk(void *closure, const unsigned char *data,
                                  unsigned int len) {
  sink *s = closure;
  if (fwrite(data, 1, len, s->f) == len)
    return CAIRO_STATUS_SUCCESS;
  if (!s->err)
    s->err = errno ? errno : EIO;
  return CAIRO_STATUS_WRITE_ERROR;
}

/* What is drawn: the table, its panels, the options. */
typedef struct figure {
  const plot_table *t;
  const plot_layout *l;
  const plot_options *o;
} figure;

static cairo_status_t draw_on(cairo_surface_t *surface, const figure *fig) {
  cairo_status_t st = cairo_surface_status(surface);
  if (st != CAIRO_STATUS_SUCCESS)
    return st;
  cairo_t *cr = cairo_create(surface);
  st = cairo_status(cr);
  if (st == CAIRO_STATUS_SUCCESS)
    st = draw_figure(cr, fig->t, fig->l, fig->o);
  cairo_destroy(cr);
  cairo_surface_flush(surface);
  return st != CAIRO_STATUS_SUCCESS ? st : cairo_surface_status(surface);
}

static cairo_status_t render(const figure *fig, format fmt, sink *s) {
  cairo_surface_t *surface;
  cairo_status_t st;
  int w, h;
  figure_size(fig->l, &w, &h);
  if (fmt == FORMAT_PNG) {
    surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    st = draw_on(surface, fig);
#if CAIRO_HAS_PNG_FUNCTIONS
    if (st == CAIRO_STATUS_SUCCESS)
      st = cairo_surface_write_to_png_stream(surface, write_chunk, s);
#endif
  } else {
#if CAIRO_HAS_SVG_SURFACE
    surface = cairo_svg_surface_create_for_stream(write_chunk, s, w, h);
    st = draw_on(surface, fig);
    cairo_surface_finish(surface); /* writes the document's end */
    if (st == CAIRO_STATUS_SUCCESS)
      st = cairo_surface_status(surface);
#else
    return CAIRO_STATUS_INVALID_FORMAT;
#endif
  }
  cairo_surface_destroy(surface);
  return st;
}

/* Whether OUT is written as a stream: -, a character device or a FIFO
 * (lk_output_open writes them through). */
static bool is_stream(const char *out) {
  struct stat st;
  return !strcmp(out, "-") || (lstat(out, &st) == 0 &&
                               (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)));
}

/* OUT's format from its extension, PNG for a stream without one;
 * EXIT_USAGE after cli_error when it has none this cairo can write. */
static int output_format(const char *out, format *fmt) {
  const char *base = strrchr(out, '/');
  const char *dot = strrchr(base ? base + 1 : out, '.');
  bool png_name = dot && !strcasecmp(dot, ".png");
  bool svg_name = dot && !strcasecmp(dot, ".svg");
  bool png = can_png && (png_name || (!svg_name && is_stream(out)));
  bool svg = can_svg && svg_name;
  if (!png && !svg) {
    cli_error("plot: cannot tell the format of %s: the file name must end "
              "in .png or .svg (a stream, - or a device, is PNG)",
              out);
    return EXIT_USAGE;
  }
  *fmt = png ? FORMAT_PNG : FORMAT_SVG;
  return 0;
}

/* DIR/NAME, or NULL when memory runs out. */
static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir);
  bool slash = n > 0 && dir[n - 1] == '/';
  size_t size = n + strlen(name) + 2;
  char *path = malloc(size);
  if (path)
    snprintf(path, size, "%s%s%s", dir, slash ? "" : "/", name);
  return path;
}

/* Draws FIG into OUT, written as every output is (lk_output_open): a
 * regular file replaced whole only when all of it was drawn and written.
 * 0; EXIT_USAGE after cli_error when OUT cannot be opened (nothing drawn),
 * EXIT_FAILED when drawing or writing fails. */
static int write_figure(const figure *fig, const char *out, format fmt) {
  lk_output *o;
  if (lk_output_open(out, NULL, &o) != 0) {
    cli_error("plot: %s", lk_last_error());
    return EXIT_USAGE;
  }
  sink s = {lk_output_stream(o), 0};
  cairo_status_t st = render(fig, fmt, &s);
  bool ok = false;
  if (s.err)
    cli_error("plot: cannot write %s: %s",
              strcmp(out, "-") ? out : "the standard output", strerror(s.err));
  else if (st != CAIRO_STATUS_SUCCESS)
    cli_error("plot: cannot draw %s: %s", out, cairo_status_to_string(st));
  else
    ok = true;
  if (lk_output_close(o, ok) != 0 && ok) {
    cli_error("plot: %s", lk_last_error());
    ok = false;
  }
  return ok ? 0 : EXIT_FAILED;
}

/* Each panel on a line: its name, then what it shows. */
static void list_panels(const plot_layout *l) {
  for (size_t k = 0; k < l->n; k++) {
    const plot_panel *p = &l->panels[k];
    printf("%s:", p->name);
    for (size_t i = 0; i < p->n_series; i++)
      printf("%s %s", i ? "," : "", p->s[i].label);
    putchar('\n');
  }
}

/* 0; EXIT_USAGE after cli_error when RUN_DIR, its metrics.csv, a metric
 * asked for or OUT's format is wrong; EXIT_FAILED after cli_error when
 * drawing or writing fails. */
static int plot_curves(const char *run_dir, const plot_options *o) {
  const char *out = o->out;
  struct stat st;
  format fmt = FORMAT_PNG;
  if (stat(run_dir, &st) != 0) {
    cli_error("plot: cannot open run directory %s: %s", run_dir,
              strerror(errno));
    return EXIT_USAGE;
  }
  if (!S_ISDIR(st.st_mode)) {
    cli_error("plot: %s is not a directory: expected a run directory "
              "holding metrics.csv",
              run_dir);
    return EXIT_USAGE;
  }
  if (!o->list && output_format(out, &fmt) != 0)
    return EXIT_USAGE;
  char *metrics = join(run_dir, "metrics.csv");
  if (!metrics) {
    cli_error("plot: out of memory");
    return EXIT_FAILED;
  }
  plot_table t;
  int rc = plot_table_read(metrics, &t);
  free(metrics);
  if (rc != 0)
    return rc;
  plot_layout l;
  rc = plot_panels_choose(&t, o->metrics, run_dir, &l);
  if (rc == 0 && o->list)
    list_panels(&l);
  else if (rc == 0)
    rc = write_figure(&(figure){&t, &l, o}, out, fmt);
  plot_layout_free(&l);
  plot_table_free(&t);
  return rc;
}

int cli_plot_curves(const char *run_dir, const char *out) {
  int rc = plot_curves(run_dir, &(plot_options){.out = out});
  return rc == 0 ? 0 : EXIT_FAILED;
}

bool cli_plot_available(void) {
  return true;
}

/* The value of option NAME at ARGV[*I] ("NAME VALUE" or "NAME=VALUE"),
 * or NULL when ARGV[*I] is not NAME; *MISSING when NAME has no value. */
static const char *option_value(int argc, char **argv, int *i, const char *name,
                                bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0)
    return NULL;
  if (a[n] == '=')
    return a + n + 1;
  if (a[n])
    return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

/* RUN_DIR and the options of plot RUN_DIR [-o FILE] [--metrics LIST]
 * [--log] [--list]; -1 after cli_error. */
static int parse_args(int argc, char **argv, const char **run_dir,
                      plot_options *o) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v;
    bool missing = false;
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (i + 1 >= argc) {
        cli_error("plot: %s needs a file name; %s", a, usage);
        return -1;
      }
      o->out = argv[++i];
    } else if (!strncmp(a, "--output=", 9))
      o->out = a + 9;
    else if ((v = option_value(argc, argv, &i, "--metrics", &missing)))
      o->metrics = v;
    else if (missing) {
      cli_error("plot: --metrics needs a comma list of metric names; %s",
                usage);
      return -1;
    } else if (!strcmp(a, "--log"))
      o->log = true;
    else if (!strcmp(a, "--list"))
      o->list = true;
    else if ((a[0] == '-' && a[1]) || *run_dir) {
      cli_error("plot: unexpected \"%s\"; %s", a, usage);
      return -1;
    } else
      *run_dir = a;
  }
  if (!*run_dir) {
    cli_error("plot: no run directory; %s", usage);
    return -1;
  }
  return 0;
}

int cli_plot(int argc, char **argv) {
  if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
    puts(usage);
    return 0;
  }
  const char *run_dir = NULL;
  plot_options o = {0};
  if (parse_args(argc, argv, &run_dir, &o) != 0)
    return EXIT_USAGE;
  char *path = o.out ? NULL : join(run_dir, "curves.png");
  if (!o.out && !path) {
    cli_error("plot: out of memory");
    return EXIT_FAILED;
  }
  if (!o.out)
    o.out = path;
  int rc = plot_curves(run_dir, &o);
  if (rc == 0 && !o.list && strcmp(o.out, "-") != 0) /* - is the image */
    printf("wrote %s\n", o.out);
  free(path);
  return rc;
}

#else /* !LK_HAVE_CAIRO */

static int no_cairo(void) {
  cli_error("plot: this loopkit was built without cairo: install "
            "libcairo2-dev and "
            "rebuild to draw plots");
  return EXIT_USAGE;
}

int cli_plot(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return no_cairo();
}

int cli_plot_curves(const char *run_dir, const char *out) {
  (void)run_dir;
  (void)out;
  return no_cairo();
}

bool cli_plot_available(void) {
  return false;
}

#endif
