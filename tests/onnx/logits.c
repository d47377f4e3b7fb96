/* logits: a language model's next-token logits after PROMPT, through the
 * public API as loopkit generate gets them (lk_run_predict), for
 * tests/cli/onnx.sh to hold the exported ONNX model's against:
 *
 *   logits CONFIG.ini CKPT PROMPT
 *
 * prints the V logits on one line, comma separated, 9 significant digits
 * (run.js --last prints ONNX Runtime's the same way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

static int run_predict(lk_run *run, const char *prompt) {
  size_t n = strlen(prompt);
  int32_t *ctx = malloc((n ? n : 1) * sizeof *ctx);
  if (!ctx)
    return -1;
  for (size_t i = 0; i < n; i++)
    ctx[i] = (unsigned char)prompt[i];
  lk_batch b = {.split = LK_SPLIT_TEST,
                .size = 1,
                .x = {.name = "x",
                      .dtype = LK_I32,
                      .ndim = 2,
                      .shape = {1, n},
                      .numel = n,
                      .data = ctx}};
  lk_tensor out;
  int rc = lk_run_predict(run, &b, &out);
  for (size_t v = 0; rc == 0 && v < out.numel; v++)
    printf("%s%.9g", v ? "," : "", (double)((const float *)out.data)[v]);
  if (rc == 0)
    printf("\n");
  free(ctx);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: logits CONFIG.ini CKPT PROMPT\n");
    return 2;
  }
  lk_config *cfg = NULL;
  lk_run *run = NULL;
  lk_run_options ro = {.no_run_dir = true, .verbosity = LK_LOG_WARN};
  int rc = lk_config_load(argv[1], &cfg);
  if (rc == 0)
    rc = lk_run_new(cfg, &ro, &run);
  lk_config_free(cfg);
  if (rc == 0)
    rc = lk_run_load_params(run, argv[2]);
  if (rc == 0)
    rc = run_predict(run, argv[3]);
  if (rc != 0)
    fprintf(stderr, "logits: %s\n", lk_last_error());
  lk_run_free(run);
  return rc ? 1 : 0;
}
