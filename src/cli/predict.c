/* loopkit predict: a checkpoint's model on every sample of the test split
 * (the config's, or the data file --set gives the data plugin), as a CSV
 * file with a header and one row a sample, in the split's order:
 *
 *   index,pred,p0,p1,...   a classifier (predict_step's tensor is named
 *                          "logits"): the class with the largest logit
 *                          (the first on ties) and the softmax of the
 *                          logits;
 *   index,y0,y1,...        anything else (a regression): the outputs.
 *
 * Numbers are round-trip (%.17g for f64 and the probabilities, computed
 * in double; %.9g for f32 outputs). -o FILE is written as every output
 * is (lk_output_open): a regular file atomically, so that a failed
 * prediction leaves no partial file; - the standard output; a device or a
 * FIFO written through. The run that made the checkpoint is only read.
 *
 * --input FILE predicts the samples of FILE instead (.npy or CSV, no
 * labels: input.c), with the model alone (lk_model, loopkit/infer.h),
 * in batches of the data plugin's batch_size as the test split's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] = "usage: loopkit predict [CONFIG.ini] --ckpt CKPT "
                            "[--input FILE] [-o FILE] [--set S.K=V]...";

typedef struct writer {
  FILE *f;
  const char *name; /* the output, for messages */
  bool started, classify;
  bool reported; /* a failure of the writer's, already told */
  lk_dtype dtype;
  size_t width; /* values a sample */
  size_t rows;
  double *p; /* [width]: a row's probabilities */
} writer;

static double value_at(const lk_tensor *t, size_t i) {
  return t->dtype == LK_F32 ? (double)((const float *)t->data)[i]
                            : ((const double *)t->data)[i];
}

/* The header, from the first batch's output: what every batch must give. */
static int start(writer *w, const lk_tensor *out) {
  w->classify = out->name && strcmp(out->name, "logits") == 0;
  w->dtype = out->dtype;
  w->width = out->numel / out->shape[0];
  if (out->dtype != LK_F32 && out->dtype != LK_F64) {
    cli_error("predict: the model's predict_step gives %s values: expected "
              "f32 or f64",
              lk_dtype_name(out->dtype) ? lk_dtype_name(out->dtype) : "?");
    w->reported = true;
    return LK_EPLUGIN;
  }
  if (w->classify && !(w->p = malloc(w->width * sizeof *w->p))) {
    cli_error("predict: out of memory");
    w->reported = true;
    return LK_ENOMEM;
  }
  fputs(w->classify ? "index,pred" : "index", w->f);
  for (size_t j = 0; j < w->width; j++)
    fprintf(w->f, ",%s%zu", w->classify ? "p" : "y", j);
  fputc('\n', w->f);
  w->started = true;
  return 0;
}

/* One classifier row from LOGITS[i*width ...]: argmax and softmax, from the
 * row's maximum so that exp never overflows. */
static int classify_row(writer *w, const lk_tensor *out, size_t i) {
  size_t arg = 0, base = i * w->width;
  for (size_t j = 0; j < w->width; j++) {
    double z = value_at(out, base + j);
    if (!isfinite(z)) {
      cli_error("predict: logit %zu of sample %zu is %g", j, w->rows, z);
      w->reported = true;
      return LK_ENONFINITE;
    }
    if (z > value_at(out, base + arg))
      arg = j;
  }
  double top = value_at(out, base + arg), sum = 0;
  for (size_t j = 0; j < w->width; j++)
    sum += w->p[j] = exp(value_at(out, base + j) - top);
  fprintf(w->f, "%zu,%zu", w->rows, arg);
  for (size_t j = 0; j < w->width; j++)
    fprintf(w->f, ",%.17g", w->p[j] / sum);
  fputc('\n', w->f);
  return 0;
}

static int each(void *user, const lk_batch *batch, const lk_tensor *out) {
  writer *w = user;
  (void)batch;
  int rc = w->started ? 0 : start(w, out);
  if (rc != 0)
    return rc;
  if (out->dtype != w->dtype || out->numel / out->shape[0] != w->width ||
      (out->name && strcmp(out->name, "logits") == 0) != w->classify) {
    cli_error("predict: the model's predict_step gave %zu values a sample "
              "at sample %zu, %zu before",
              out->numel / out->shape[0], w->rows, w->width);
    w->reported = true;
    return LK_EPLUGIN;
  }
  for (size_t i = 0; i < out->shape[0]; i++, w->rows++) {
    if (w->classify) {
      if ((rc = classify_row(w, out, i)) != 0)
        return rc;
      continue;
    }
    fprintf(w->f, "%zu", w->rows);
    for (size_t j = 0; j < w->width; j++)
      fprintf(w->f, w->dtype == LK_F32 ? ",%.9g" : ",%.17g",
              value_at(out, i * w->width + j));
    fputc('\n', w->f);
  }
  if (ferror(w->f)) {
    cli_error("predict: cannot write %s: %s", w->name, strerror(errno));
    w->reported = true;
    return LK_EIO;
  }
  return 0;
}

/* -o FILE must not be a file the prediction reads. */
static int check_out(const cli_model_args *a, const char *input) {
  struct stat o, s;
  if (stat(a->out, &o) != 0)
    return 0;
  const char *inputs[] = {a->ckpt, a->config, input};
  const char *what[] = {"checkpoint", "config", "--input file"};
  for (int i = 0; i < 3; i++)
    if (inputs[i] && stat(inputs[i], &s) == 0 && s.st_dev == o.st_dev &&
        s.st_ino == o.st_ino) {
      cli_error("predict: -o %s is the %s itself: refusing to overwrite it",
                a->out, what[i]);
      return -1;
    }
  return 0;
}

/* --input FILE taken out of ARGV (*ARGC shortened) into *INPUT: 0, or -1
 * after cli_error. */
static int take_input(int *argc, char **argv, const char **input) {
  int k = 0;
  for (int i = 0; i < *argc; i++) {
    if (strcmp(argv[i], "--input") != 0) {
      argv[k++] = argv[i];
      continue;
    }
    if (i + 1 >= *argc || *input) {
      cli_error("predict: %s; %s",
                *input ? "--input given twice" : "--input needs a value",
                usage);
      return -1;
    }
    *input = argv[++i];
  }
  *argc = k;
  return 0;
}

/* The samples of INPUT through M into W, BATCH at a time; the status. */
static int predict_samples(lk_model *m, const void *x, size_t n, size_t batch,
                           writer *w) {
  size_t ndim, dims[LK_MAX_DIMS], width = 1;
  const char *name;
  lk_model_input_shape(m, NULL, &ndim, dims);
  size_t in = 1;
  for (size_t i = 0; i < ndim; i++)
    in *= dims[i];
  lk_model_output_shape(m, &ndim, dims, &name);
  for (size_t i = 0; i < ndim; i++)
    width *= dims[i];
  size_t cap = batch < n ? batch : n;
  float *y = malloc(cap * width * sizeof *y);
  if (!y) {
    cli_error("predict: out of memory");
    return EXIT_FAILED;
  }
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i += cap) {
    size_t k = n - i < cap ? n - i : cap;
    lk_tensor out = {.name = name,
                     .dtype = LK_F32,
                     .ndim = 2,
                     .shape = {k, width},
                     .numel = k * width,
                     .data = y};
    rc = lk_model_forward(m, (const char *)x + i * in * sizeof(float), k, y);
    if (rc != 0)
      cli_error("predict: %s", lk_last_error());
    else
      rc = each(w, NULL, &out);
  }
  free(y);
  return rc == 0 ? 0 : EXIT_FAILED;
}

/* predict --input: the model alone, on the file's samples. */
static int predict_input(const cli_model_args *a, const char *input,
                         writer *w) {
  lk_model *m = NULL;
  size_t batch, n = 0;
  void *x = NULL;
  int status = cli_open_infer(a, &m, &batch);
  if (status == 0 && cli_read_samples(input, m, &x, &n) != 0)
    status = EXIT_USAGE;
  if (status == 0)
    status = predict_samples(m, x, n, batch, w);
  free(x);
  lk_model_close(m);
  return status;
}

/* Predicts into W->f; the status. */
static int predict(lk_run *run, writer *w, const char *config) {
  int rc = lk_run_predict_split(run, LK_SPLIT_TEST, each, w);
  if (rc != 0) {
    if (!w->reported)
      cli_error("predict: %s", lk_last_error());
    /* Once rows are written or the model's outputs are wrong, the
     * prediction started and failed. */
    return w->rows || w->reported ? EXIT_FAILED : cli_model_status(rc);
  }
  if (w->rows == 0) {
    const lk_descriptor *d = NULL;
    lk_run_instance(run, "data", &d);
    cli_error("predict: data plugin %s has no test split in %s: give it a "
              "data file with --set (see loopkit inspect %s)",
              d ? d->name : "?", config, d ? d->name : "NAME");
    return EXIT_USAGE;
  }
  return 0;
}

int cli_predict(int argc, char **argv) {
  cli_model_args a = {0};
  const char *input = NULL;
  if (take_input(&argc, argv, &input) != 0 ||
      cli_model_args_parse("predict", usage, argc, argv, true, &a) != 0 ||
      (a.out && check_out(&a, input) != 0))
    return EXIT_USAGE;
  lk_run *run = NULL;
  if (!input && cli_open_model(&a, &run) != 0)
    return EXIT_USAGE;
  lk_output *o;
  if (lk_output_open(a.out ? a.out : "-", NULL, &o) != 0) {
    cli_error("predict: %s", lk_last_error());
    lk_run_free(run);
    return EXIT_USAGE;
  }
  writer w = {.f = lk_output_stream(o),
              .name =
                  a.out && strcmp(a.out, "-") ? a.out : "the standard output"};
  int status =
      input ? predict_input(&a, input, &w) : predict(run, &w, a.config);
  if (lk_output_close(o, status == 0) != 0 && status == 0) {
    cli_error("predict: %s", lk_last_error());
    status = EXIT_FAILED;
  }
  free(w.p);
  lk_run_free(run);
  return status;
}
