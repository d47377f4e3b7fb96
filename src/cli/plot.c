/* loopkit plot: training curves from a run's metrics.csv, drawn with cairo
 * into a PNG or SVG file of four panels: training loss per step (raw and
 * smoothed), validation loss and accuracy per epoch, learning rate. */
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

/* The figure: a 2x2 grid of panels. */
enum { FIG_W = 1200, FIG_H = 900, PANEL_W = FIG_W / 2, PANEL_H = FIG_H / 2 };
/* The plot area inside a panel: room for the title, tick labels and axis
 * labels around it. */
enum { MARGIN_L = 84, MARGIN_R = 24, MARGIN_T = 44, MARGIN_B = 56 };
/* TensorBoard's smoothing weight for the training loss, and its legend. */
static const double smoothing = 0.9;
static const char smoothing_label[] = "smoothed (EMA 0.9, debiased)";
/* Beyond this a value is a divergence, not a point: leaving it out keeps
 * the span of an axis finite. */
static const double too_big = 1e300;

static const char usage[] = "usage: loopkit plot RUN_DIR [-o FILE]: FILE "
                            "ends in .png or .svg (default RUN_DIR/curves.png)";

typedef struct rgb {
  double r, g, b;
} rgb;

typedef struct series {
  const double *x, *y; /* NULL: no data */
  size_t n;
  rgb color;
  double width;
  bool markers;      /* a dot at every point */
  const char *label; /* in the legend, or NULL */
} series;

typedef struct panel {
  const char *title, *xlabel, *ylabel;
  const char *missing; /* said instead of an empty plot */
  series s[2];
  size_t n_series;
} panel;

/* An axis from LO to HI with a tick every STEP (0: no ticks). */
typedef struct axis {
  double lo, hi, step;
} axis;

/* A panel's plot area in device units and the axes mapped onto it. */
typedef struct frame {
  double x, y, w, h;
  axis ax[2]; /* x, y */
} frame;

static bool usable(double v) {
  return isfinite(v) && fabs(v) < too_big;
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
  axis a = {floor(min / step) * step, ceil(max / step) * step, step};
  bool sane = isfinite(a.lo) && isfinite(a.hi) && a.hi > a.lo && step > 0 &&
              (a.hi - a.lo) / step <= 50 && fabs(a.lo / step) < 1e15 &&
              fabs(a.hi / step) < 1e15;
  if (!sane) /* spans at the ends of double's range: no ticks, no rounding */
    a = (axis){min, max > min ? max : min + 1, 0};
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
    double v = (double)k * a->step, p = to_device(f, dim, v);
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
      if (!usable(v[0]) || !usable(v[1]))
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

static void draw_series(cairo_t *cr, const frame *f, const series *s) {
  if (!s->x || !s->y)
    return;
  set_color(cr, s->color);
  cairo_set_line_width(cr, s->width);
  cairo_new_path(cr);
  bucket b = {0};
  size_t points = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (!usable(s->x[i]) || !usable(s->y[i]))
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
    if (usable(s->x[i]) && usable(s->y[i]))
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
    cairo_move_to(cr, right - 18, f->y - 10);
    cairo_line_to(cr, right, f->y - 10);
    cairo_stroke(cr);
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
  for (int d = 0; d < 2; d++)
    f.ax[d] = nice_axis(lo[d], hi[d], d == 0); /* x: steps or epochs */
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
 * towards 0. Unusable values stay out of the average. */
static void smooth(const double *y, size_t n, double w, double *out) {
  double avg = 0, weight = 1;
  for (size_t i = 0; i < n; i++) {
    if (!usable(y[i])) {
      out[i] = NAN;
      continue;
    }
    avg = avg * w + (1 - w) * y[i];
    weight *= w;
    out[i] = avg / (1 - weight);
  }
}

static series line(const double *x, const double *y, size_t n, rgb color,
                   double width) {
  return (series){x, y, n, color, width, false, NULL};
}

static panel panel_of(const char *title, const char *xlabel, const char *ylabel,
                      const char *missing, series s) {
  return (panel){title, xlabel, ylabel, missing, {s}, 1};
}

/* The validation accuracy: val_accuracy, or another val_* column whose
 * name says acc (val_acc, val_top1_acc). */
static long accuracy_column(const plot_table *t) {
  long c = plot_table_find(t, "val_accuracy");
  if (plot_table_column(t, c))
    return c;
  for (size_t i = 0; i < t->n_cols; i++)
    if (!strncmp(t->names[i], "val_", 4) && strstr(t->names[i], "acc") &&
        plot_table_column(t, (long)i))
      return (long)i;
  return -1;
}

/* The four panels; SMOOTHED has room for a value per row. */
static void make_panels(const plot_table *t, double *smoothed, panel p[4]) {
  const double *step = plot_table_column(t, PLOT_STEP);
  const double *epoch = plot_table_column(t, PLOT_EPOCH);
  const double *loss = plot_table_column(t, PLOT_LOSS);
  const double *val = plot_table_column(t, plot_table_find(t, "val_loss"));
  long acc_col = accuracy_column(t);
  const double *acc = plot_table_column(t, acc_col);
  const double *lr = plot_table_column(t, plot_table_find(t, "lr"));
  size_t n = t->n_rows;
  static const rgb light_blue = {0.68, 0.78, 0.93}, blue = {0.10, 0.33, 0.72},
                   orange = {0.85, 0.37, 0.01}, green = {0.11, 0.55, 0.27},
                   purple = {0.46, 0.27, 0.65};
  if (loss)
    smooth(loss, n, smoothing, smoothed);
  p[0] = panel_of("training loss", "step", "loss", "no loss in metrics.csv",
                  line(step, loss, n, light_blue, 1));
  p[0].s[0].label = "raw";
  p[0].s[1] = line(step, loss ? smoothed : NULL, n, blue, 2);
  p[0].s[1].label = smoothing_label;
  p[0].n_series = 2;
  p[1] = panel_of("validation loss", "epoch", "val_loss",
                  "no val_loss in metrics.csv", line(epoch, val, n, orange, 2));
  p[2] = panel_of(
      "validation accuracy", "epoch", acc ? t->names[acc_col] : "val_accuracy",
      "no val_accuracy in metrics.csv", line(epoch, acc, n, green, 2));
  p[1].s[0].markers = p[2].s[0].markers = true;
  p[3] = panel_of("learning rate", "step", "lr", "no lr in metrics.csv",
                  line(step, lr, n, purple, 2));
}

static cairo_status_t draw_figure(cairo_t *cr, const plot_table *t) {
  double *smoothed = malloc((t->n_rows ? t->n_rows : 1) * sizeof *smoothed);
  if (!smoothed)
    return CAIRO_STATUS_NO_MEMORY;
  panel p[4];
  make_panels(t, smoothed, p);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  for (int k = 0; k < 4; k++)
    draw_panel(cr, (k % 2) * PANEL_W, (k / 2) * PANEL_H, &p[k]);
  free(smoothed);
  return cairo_status(cr);
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

static cairo_status_t draw_on(cairo_surface_t *surface, const plot_table *t) {
  cairo_status_t st = cairo_surface_status(surface);
  if (st != CAIRO_STATUS_SUCCESS)
    return st;
  cairo_t *cr = cairo_create(surface);
  st = cairo_status(cr);
  if (st == CAIRO_STATUS_SUCCESS)
    st = draw_figure(cr, t);
  cairo_destroy(cr);
  cairo_surface_flush(surface);
  return st != CAIRO_STATUS_SUCCESS ? st : cairo_surface_status(surface);
}

static cairo_status_t render(const plot_table *t, format fmt, sink *s) {
  cairo_surface_t *surface;
  cairo_status_t st;
  if (fmt == FORMAT_PNG) {
    surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, FIG_W, FIG_H);
    st = draw_on(surface, t);
#if CAIRO_HAS_PNG_FUNCTIONS
    if (st == CAIRO_STATUS_SUCCESS)
      st = cairo_surface_write_to_png_stream(surface, write_chunk, s);
#endif
  } else {
#if CAIRO_HAS_SVG_SURFACE
    surface = cairo_svg_surface_create_for_stream(write_chunk, s, FIG_W, FIG_H);
    st = draw_on(surface, t);
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

/* OUT's format from its extension; EXIT_USAGE after cli_error when it has
 * none this cairo can write. */
static int output_format(const char *out, format *fmt) {
  const char *base = strrchr(out, '/');
  const char *dot = strrchr(base ? base + 1 : out, '.');
  bool png = dot && !strcasecmp(dot, ".png") && can_png;
  bool svg = dot && !strcasecmp(dot, ".svg") && can_svg;
  if (!png && !svg) {
    cli_error("plot: cannot tell the format of %s: the file name must end "
              "in .png or .svg",
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

/* A new file OUT.tmp-PID[-K] beside OUT: a rename within a directory
 * replaces OUT whole, and a crash leaves at worst a stray temporary file.
 * Created with 0666 so the umask decides, as for any other output. */
static FILE *create_temp(const char *out, char **tmp) {
  size_t size = strlen(out) + 48;
  if (!(*tmp = malloc(size)))
    return NULL;
  for (int k = 0; k < 100; k++) {
    snprintf(*tmp, size, k ? "%s.tmp-%ld-%d" : "%s.tmp-%ld", out,
             (long)getpid(), k);
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST)
      continue; /* left by a crashed process that had our pid */
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f) {
      int err = errno;
      close(fd);
      remove(*tmp);
      errno = err;
    }
    return f;
  }
  return NULL;
}

/* Flushes, syncs and closes F; 0 or the errno of the first failure. */
static int close_temp(FILE *f) {
  int err = 0;
  if (fflush(f) != 0 || fsync(fileno(f)) != 0)
    err = errno;
  if (fclose(f) != 0 && !err)
    err = errno;
  return err;
}

static int write_figure(const plot_table *t, const char *out, format fmt) {
  char *tmp = NULL;
  sink s = {create_temp(out, &tmp), 0};
  if (!s.f) {
    cli_error("plot: cannot write %s: %s", out, strerror(errno));
    free(tmp);
    return EXIT_FAILED;
  }
  cairo_status_t st = render(t, fmt, &s);
  int err = close_temp(s.f);
  bool ok = false;
  if (s.err || (st == CAIRO_STATUS_SUCCESS && err))
    cli_error("plot: cannot write %s: %s", out, strerror(s.err ? s.err : err));
  else if (st != CAIRO_STATUS_SUCCESS)
    cli_error("plot: cannot draw %s: %s", out, cairo_status_to_string(st));
  else if (rename(tmp, out) != 0)
    cli_error("plot: cannot rename %s to %s: %s", tmp, out, strerror(errno));
  else
    ok = true;
  if (!ok)
    remove(tmp);
  free(tmp);
  return ok ? 0 : EXIT_FAILED;
}

/* 0; EXIT_USAGE after cli_error when RUN_DIR, its metrics.csv or OUT's
 * format is wrong; EXIT_FAILED after cli_error when drawing or writing
 * fails. */
static int plot_curves(const char *run_dir, const char *out) {
  struct stat st;
  format fmt;
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
  if (output_format(out, &fmt) != 0)
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
  rc = write_figure(&t, out, fmt);
  plot_table_free(&t);
  return rc;
}

int cli_plot_curves(const char *run_dir, const char *out) {
  int rc = plot_curves(run_dir, out);
  return rc == 0 ? 0 : EXIT_FAILED;
}

bool cli_plot_available(void) {
  return true;
}

/* RUN_DIR and FILE of plot RUN_DIR [-o FILE]; -1 after cli_error. */
static int parse_args(int argc, char **argv, const char **run_dir,
                      const char **out) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      if (i + 1 >= argc) {
        cli_error("plot: %s needs a file name; %s", a, usage);
        return -1;
      }
      *out = argv[++i];
    } else if (!strncmp(a, "--output=", 9))
      *out = a + 9;
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
  const char *run_dir = NULL, *out = NULL;
  if (parse_args(argc, argv, &run_dir, &out) != 0)
    return EXIT_USAGE;
  char *path = out ? NULL : join(run_dir, "curves.png");
  if (!out && !path) {
    cli_error("plot: out of memory");
    return EXIT_FAILED;
  }
  int rc = plot_curves(run_dir, out ? out : path);
  if (rc == 0)
    printf("wrote %s\n", out ? out : path);
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
