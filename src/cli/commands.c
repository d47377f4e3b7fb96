/* The commands and their options, declared once: loopkit --help prints
 * them and lk-manpage writes them into loopkit(1), so the two cannot
 * disagree. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const cli_option train_options[] = {
    {"--set", "SECTION.KEY=VALUE",
     "Override one key of the config (repeatable; later wins)."},
    {"--out", "DIR",
     "Write the run into DIR, which must not hold an earlier run (default: "
     "a new runs/CONFIG-N)."},
    {"--resume", "CKPT",
     "Continue exactly where checkpoint CKPT stopped: in its run directory "
     "when CKPT is that run's latest (DIR/checkpoints/last.ckpt), otherwise "
     "in a new run directory (or --out) whose metrics.csv starts with the "
     "rows CKPT had seen."},
    {"--quiet", NULL,
     "Print only errors and the final summary: no progress bar, no log "
     "lines."},
    {NULL, NULL, NULL}};

static const cli_option gradcheck_options[] = {
    {"--set", "SECTION.KEY=VALUE", "Override one key of the config."},
    {"--batches", "N", "Check on the first N training batches (default 2)."},
    {"--samples", "N",
     "Check at most N elements of each parameter, spread over it (default "
     "20)."},
    {"--tolerance", "T",
     "Exit 1 when a parameter's largest relative error exceeds T (default: "
     "report only)."},
    {NULL, NULL, NULL}};

static const cli_option plot_options[] = {
    {"-o", "FILE",
     "Write FILE instead of RUN_DIR/curves.png; .png or .svg by its "
     "extension (also --output FILE)."},
    {NULL, NULL, NULL}};

static const cli_option new_options[] = {
    {"--kind", "KIND",
     "What the plugin is (required): model (a step and its backward in one "
     "plugin), or one kind of plugin: step, backward, zero_grad, optimizer, "
     "scheduler, profiler, data, strategy, callback or precision."},
    {NULL, NULL, NULL}};

static const cli_option no_options[] = {{NULL, NULL, NULL}};

const cli_command cli_commands[] = {
    {"train", "CONFIG.ini", "train as CONFIG.ini says",
     "Load the plugins the config names, train, and write the run "
     "directory: config.ini (the effective config), metrics.csv, "
     "checkpoints/ and the profiler's output.",
     train_options},
    {"plugins", "", "every plugin on the search path",
     "List every plugin on the search path: name, kinds, version, path and "
     "summary. A plugin that cannot be loaded is listed with the reason, "
     "and the exit status is 1.",
     no_options},
    {"inspect", "NAME", "one plugin's kinds, version, path and options",
     "Print one plugin's kinds, version, path, summary, ABI version and each "
     "option with its type, default and help. NAME is a plugin name or a "
     "path to a .so.",
     no_options},
    {"dump", "CKPT", "every parameter in a checkpoint",
     "Print every parameter of checkpoint CKPT, one value a line: "
     "NAME[INDEX] VALUE (%.17g for f64, %.9g for f32).",
     no_options},
    {"export", "CKPT -o FILE", "a checkpoint's parameters as safetensors",
     "Write every parameter of checkpoint CKPT (not the optimizer's state) "
     "to FILE in the safetensors format, each with its name, dtype and "
     "shape, atomically (a temporary file, then a rename; CKPT itself is "
     "never overwritten), with __metadata__ format = pt, step, epoch and "
     "plugin (the step plugin named in the run directory's config.ini). "
     "torch and the Hugging Face tools read it, and a model's init option "
     "(mlp's) starts another run from it. -o is also --output.",
     no_options},
    {"gradcheck", "CONFIG.ini", "backward against central differences",
     "Compare the backward plugin's gradients with central differences of "
     "the step's loss and print each parameter's largest relative error.",
     gradcheck_options},
    {"plot", "RUN_DIR", "training curves from metrics.csv",
     "Draw the training loss per step (with a smoothed line), validation "
     "loss and accuracy per epoch and the learning rate from "
     "RUN_DIR/metrics.csv. Needs loopkit built with cairo.",
     plot_options},
    {"new", "NAME", "a new plugin project to start from",
     "Write the directory NAME with NAME.c, a commented plugin that does "
     "the job of KIND with every entry of it, a Makefile that uses only "
     "pkg-config loopkit, NAME.ini, a config that trains with it and "
     "bundled plugins, a README.md, and the data file the config reads, if "
     "it reads one: make && loopkit train NAME.ini works as generated. The "
     "files come from templates/ in loopkit's source, built into the "
     "command. An unknown KIND is refused with the list of kinds, an "
     "existing NAME without touching it: nothing is ever overwritten.",
     new_options},
    {NULL, NULL, NULL, NULL, NULL}};

/* "--set SECTION.KEY=VALUE" or "--quiet". */
static void option_synopsis(const cli_option *o, char *buf, size_t len) {
  snprintf(buf, len, "%s%s%s", o->flag, o->arg ? " " : "",
           o->arg ? o->arg : "");
}

void cli_print_usage(FILE *f, const char *plugin_dir) {
  fprintf(f, "usage: loopkit COMMAND [ARGUMENTS]\n\n");
  for (const cli_command *c = cli_commands; c->name; c++) {
    char head[64];
    snprintf(head, sizeof head, "%s %s", c->name, c->args);
    fprintf(f, "  loopkit %-22s %s\n", head, c->summary);
    for (const cli_option *o = c->options; o->flag; o++) {
      char syn[64];
      option_synopsis(o, syn, sizeof syn);
      fprintf(f, "      %s\n", syn);
    }
  }
  fprintf(f,
          "  loopkit --version | --help\n\n"
          "Plugins are searched in LOOPKIT_PLUGIN_PATH (colon separated), "
          "then in\n%s.\n"
          "Exit status: 0 success, 1 the run started and failed, 2 nothing "
          "was trained.\n"
          "See loopkit(1), loopkit.ini(5) and loopkit-plugin(7).\n",
          plugin_dir);
}

const cli_command *cli_command_named(const char *name) {
  for (const cli_command *c = cli_commands; c->name; c++)
    if (!strcmp(c->name, name))
      return c;
  return NULL;
}
