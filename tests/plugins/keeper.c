/* keeper: a callback that keeps a checkpoint of its own, best.ckpt, in
 * the directory its option dir names, and says so with
 * lk_host_keep_checkpoints: its options are none of the bundled
 * checkpoint's (dirpath, filename, monitor, save_top_k), so that the host
 * knows what it keeps only from what it declares (tests/cli/keepers.sh).
 * Its "best" is the latest validation's. */
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct keeper {
  lk_host *host;
  const char *dir; /* NULL: checkpoints */
} keeper;

static int create(lk_host *host, const lk_options *o, void **self) {
  keeper *k = calloc(1, sizeof *k);
  if (!k)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  const char *dir = lk_opt_string(o, "dir");
  k->host = host;
  k->dir = dir && *dir ? dir : NULL;
  int rc = lk_opt_bool(o, "declare")
               ? lk_host_keep_checkpoints(host, k->dir, lk_opt_bool(o, "best"))
               : 0;
  if (rc != 0) {
    free(k);
    return rc;
  }
  *self = k;
  return 0;
}

static int on_validation_end(void *self, const lk_step_result *result) {
  keeper *k = self;
  (void)result;
  return lk_host_save_checkpoint_in(k->host, k->dir, "best.ckpt");
}

static const lk_callback_ops callback_ops = {
    .on_validation_end = on_validation_end,
};

static const lk_option options[] = {
    {"dir", LK_OPT_STRING, "", "where best.ckpt goes (\"\": checkpoints)",
     NULL},
    {"declare", LK_OPT_BOOL, "true", "say what it keeps", NULL},
    {"best", LK_OPT_BOOL, "true", "say that best.ckpt is among it", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "keeper",
    .version = "1.0",
    .summary = "keeps best.ckpt where it says it does",
    .options = options,
    .create = create,
    .destroy = free,
    .callback = &callback_ops,
};
