/* loopkit generate: text sampled from a trained language model.
 *
 * The config's plugins are created without a run directory (as gradcheck
 * does), the checkpoint's parameters loaded into them, and then, token by
 * token as nanoGPT's sample.py does: the step plugin's predict_step gives
 * the next token's logits for the context (the prompt and what has been
 * generated; the model crops it to its block size), they are divided by
 * the temperature, all but the top k set to -inf, and the next token drawn
 * from their softmax with a generator seeded with --seed. Tokens are
 * bytes, written as they come: the same seed writes the same text. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct gen_opts {
  cli_model_args m; /* [CONFIG] --ckpt CKPT [--set S.K=V]... */
  const char *prompt;
  long long tokens, top_k;
  double temperature;
  unsigned long long seed;
} gen_opts;

static const char usage[] =
    "usage: loopkit generate [CONFIG.ini] --ckpt CKPT [--prompt TEXT] "
    "[--tokens N] [--temperature T] [--top-k K] [--seed S] [--set S.K=V]...";

static int whole(const char *opt, const char *s, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < 0) {
    cli_error("generate: %s \"%s\": expected a whole number >= 0", opt, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* generate's own options here; the rest (the config, --ckpt, --set) as
 * every command that uses a trained model takes them. */
static int parse(int argc, char **argv, gen_opts *o) {
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  if (!rest) {
    cli_error("generate: out of memory");
    return -1;
  }
  int n_rest = 0, rc = 0;
  for (int i = 0; i < argc && rc == 0; i++) {
    const char *a = argv[i];
    bool own = !strcmp(a, "--prompt") || !strcmp(a, "--tokens") ||
               !strcmp(a, "--temperature") || !strcmp(a, "--top-k") ||
               !strcmp(a, "--seed");
    if (!own) {
      rest[n_rest++] = argv[i];
      if ((!strcmp(a, "--ckpt") || !strcmp(a, "--set")) && i + 1 < argc)
        rest[n_rest++] = argv[++i];
      continue;
    }
    if (i + 1 >= argc) {
      cli_error("generate: %s needs a value", a);
      rc = -1;
      break;
    }
    const char *v = argv[++i];
    long long n;
    if (!strcmp(a, "--prompt"))
      o->prompt = v;
    else if (!strcmp(a, "--tokens"))
      rc = whole(a, v, &o->tokens);
    else if (!strcmp(a, "--top-k"))
      rc = whole(a, v, &o->top_k);
    else if (!strcmp(a, "--seed")) {
      if ((rc = whole(a, v, &n)) == 0)
        o->seed = (unsigned long long)n;
    } else {
      char *end;
      o->temperature = strtod(v, &end);
      if (end == v || *end || !isfinite(o->temperature) || o->temperature < 0) {
        cli_error("generate: --temperature \"%s\": expected a number >= 0", v);
        rc = -1;
      }
    }
  }
  if (rc == 0)
    rc = cli_model_args_parse("generate", usage, n_rest, rest, false, &o->m);
  free(rest);
  if (rc == 0 && !o->prompt[0]) {
    cli_error("generate: --prompt is empty: the model needs at least one "
              "token of context (default: a newline)");
    rc = -1;
  }
  return rc;
}

static int descending(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

/* The next token from LOGITS [V]: the first maximum at temperature 0,
 * otherwise a draw from softmax(logits / temperature) over the top K
 * (K = 0 or >= V: all; ties with the K-th kept, as torch.topk's threshold
 * keeps them in nanoGPT). P and SORTED are [V] scratch. */
static int sample(const float *logits, int V, double temperature, long long k,
                  lk_rng *rng, double *p, double *sorted) {
  int arg = 0;
  for (int j = 1; j < V; j++)
    if (logits[j] > logits[arg])
      arg = j;
  if (temperature == 0)
    return arg;
  double floor_ = -INFINITY, top = (double)logits[arg] / temperature;
  for (int j = 0; j < V; j++)
    p[j] = (double)logits[j] / temperature;
  if (k > 0 && k < V) {
    memcpy(sorted, p, (size_t)V * sizeof *p);
    qsort(sorted, (size_t)V, sizeof *sorted, descending);
    floor_ = sorted[k - 1];
  }
  double sum = 0;
  for (int j = 0; j < V; j++) {
    p[j] = p[j] < floor_ ? 0 : exp(p[j] - top);
    sum += p[j];
  }
  double u = lk_rng_uniform(rng) * sum, c = 0;
  int last = arg;
  for (int j = 0; j < V; j++) {
    if (p[j] == 0)
      continue;
    c += p[j];
    last = j;
    if (u < c)
      return j;
  }
  return last; /* u rounded up to the sum */
}

/* Generates O's tokens after the prompt; EXIT_USAGE when the model fails
 * on the prompt (nothing generated), EXIT_FAILED later. */
static int generate(lk_run *run, const gen_opts *o) {
  size_t n = strlen(o->prompt);
  if ((unsigned long long)o->tokens > SIZE_MAX / sizeof(int32_t) - n) {
    cli_error("generate: --tokens %lld: more than this machine can hold",
              o->tokens);
    return EXIT_USAGE;
  }
  size_t total = n + (size_t)o->tokens; /* the whole context: the model crops */
  int32_t *ctx = malloc((total ? total : 1) * sizeof *ctx);
  double *p = NULL, *sorted = NULL;
  if (!ctx) {
    cli_error("generate: out of memory for %zu tokens", total);
    return EXIT_FAILED;
  }
  for (size_t i = 0; i < n; i++)
    ctx[i] = (unsigned char)o->prompt[i];
  fwrite(o->prompt, 1, n, stdout);
  lk_rng rng;
  lk_rng_seed(&rng, (uint64_t)o->seed, 0);
  int status = 0;
  for (long long t = 0; t < o->tokens && status == 0; t++) {
    lk_batch b = {.split = LK_SPLIT_TEST,
                  .size = 1,
                  .x = {.name = "x",
                        .dtype = LK_I32,
                        .ndim = 2,
                        .shape = {1, n},
                        .numel = n,
                        .data = ctx}};
    lk_tensor out;
    if (lk_run_predict(run, &b, &out) != 0) {
      cli_error("generate: %s", lk_last_error());
      status = t == 0 ? EXIT_USAGE : EXIT_FAILED;
      break;
    }
    int V = (int)(out.numel / out.shape[0]);
    if (out.dtype != LK_F32 || out.ndim != 2 || V < 1 || V > 256) {
      cli_error("generate: the model's predict_step gives %s [%zu, %d]: "
                "expected f32 logits of at most 256 tokens, the bytes "
                "generate writes",
                lk_dtype_name(out.dtype), out.shape[0], V);
      status = EXIT_USAGE;
      break;
    }
    if (!p && (!(p = malloc((size_t)V * sizeof *p)) ||
               !(sorted = malloc((size_t)V * sizeof *sorted)))) {
      cli_error("generate: out of memory");
      status = EXIT_FAILED;
      break;
    }
    const float *logits = out.data;
    for (int j = 0; j < V && status == 0; j++)
      if (!isfinite(logits[j])) {
        cli_error("generate: the model's logit of token %d is %g after %lld "
                  "tokens",
                  j, (double)logits[j], t);
        status = EXIT_FAILED;
      }
    if (status != 0)
      break;
    int next = sample(logits, V, o->temperature, o->top_k, &rng, p, sorted);
    ctx[n++] = next;
    putchar(next);
    fflush(stdout);
  }
  free(ctx);
  free(p);
  free(sorted);
  return status;
}

int cli_generate(int argc, char **argv) {
  gen_opts o = {.prompt = "\n",
                .tokens = 500,
                .top_k = 200,
                .temperature = 0.8,
                .seed = 1337};
  if (parse(argc, argv, &o) != 0)
    return EXIT_USAGE;
  lk_run *run = NULL;
  if (cli_open_model(&o.m, &run) != 0)
    return EXIT_USAGE;
  int status = generate(run, &o);
  lk_run_free(run);
  return status;
}
