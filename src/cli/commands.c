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
     "a new runs/CONFIG-N); DIR is made with its parents when missing. -, "
     "a symbolic link, or anything but a directory is refused with status "
     "2."},
    {"--resume", "CKPT|RUN_DIR",
     "Continue exactly where checkpoint CKPT stopped: in its run directory "
     "when CKPT is that run's latest (DIR/checkpoints/last.ckpt), otherwise "
     "in a new run directory (or --out) whose metrics.csv starts with the "
     "rows CKPT had seen. A run directory stands for its "
     "checkpoints/last.ckpt. Without CONFIG.ini the run's own config.ini "
     "is the config (loopkit train --resume RUN_DIR, as printed when a run "
     "is interrupted or fails), and a --set changes only what it names and "
     "is recorded in config.ini."},
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
     "by the parameter's dtype, 1e-6 for f64 and 1e-2 for f32, what central "
     "differences in it are good to; inf: report only)."},
    {NULL, NULL, NULL}};

static const cli_option generate_options[] = {
    {"--ckpt", "CKPT",
     "The checkpoint whose parameters the model takes (required): it must "
     "hold exactly the parameters the config's model has. Without "
     "CONFIG.ini, the config is the one CKPT was trained with: the "
     "config.ini of the run directory CKPT is in (see RUN DIRECTORY)."},
    {"--prompt", "TEXT",
     "The context to continue, as bytes (default: a newline); printed "
     "first."},
    {"--tokens", "N", "Generate N tokens (default 500)."},
    {"--temperature", "T",
     "Divide the logits by T before sampling (default 0.8; 0: always the "
     "most likely token)."},
    {"--top-k", "K",
     "Sample among the K most likely tokens only (default 200; 0: all)."},
    {"--seed", "S",
     "Seed of the sampling generator (default 1337): the same seed gives "
     "the same text."},
    {"--set", "SECTION.KEY=VALUE",
     "Override one key of the config (loop.threads, say)."},
    {NULL, NULL, NULL}};

static const cli_option eval_options[] = {
    {"--ckpt", "CKPT",
     "The checkpoint whose parameters (and the model's states, such as batch "
     "norm's running statistics) the model takes (required): it must hold "
     "exactly those the config's model has; when it does not, the first "
     "tensor that differs is named with both shapes, and the config.ini "
     "CKPT was trained with. It is only read. Without CONFIG.ini, the "
     "config is that config.ini, of the run directory CKPT is in (RUN/"
     "checkpoints/NAME, or a link to one); a checkpoint in no run directory "
     "needs CONFIG.ini (exit status 2)."},
    {"--set", "SECTION.KEY=VALUE",
     "Override one key of the config (repeatable; later wins): another "
     "data file, say."},
    {NULL, NULL, NULL}};

static const cli_option predict_options[] = {
    {"--ckpt", "CKPT",
     "The checkpoint whose parameters the model takes (required), as for "
     "test: without CONFIG.ini, the config of the run directory it is "
     "in."},
    {"-o", "FILE",
     "Write the CSV to FILE instead of the standard output (also --output "
     "FILE), as every output is written (see OUTPUT FILES): - is the "
     "standard output, a regular file is replaced only when the whole "
     "prediction was written."},
    {"--input", "FILE",
     "Predict the samples of FILE instead of the test split, with the "
     "model alone (lk_model_open(3): the data plugin only tells the "
     "sample shape): a .npy file (any dtype and byte order the npy plugin "
     "reads; shape [N, sample...], the sample's dimensions the model's "
     "once those of 1 are left out) or a CSV file of numbers, one sample a "
     "line, no label column (a first line that is not all numbers is a "
     "header). The values are taken as they are, without the data "
     "plugin's normalization; a sample of another shape is refused "
     "naming both (exit status 2). Predicted in batches of the data "
     "plugin's batch_size, as the test split is; outputs are f32."},
    {"--set", "SECTION.KEY=VALUE",
     "Override one key of the config (repeatable): the data file to "
     "predict on, as the data plugin's test file (csv.test=FILE)."},
    {NULL, NULL, NULL}};

static const cli_option plot_options[] = {
    {"-o", "FILE",
     "Write FILE instead of RUN_DIR/curves.png; .png or .svg by its "
     "extension, PNG to - (the standard output), a device or a FIFO without "
     "one (also --output FILE). See OUTPUT FILES."},
    {"--metrics", "NAME,...",
     "A panel for each NAME, in this order, instead of one for every "
     "metric: the columns NAME, val_NAME and test_NAME that hold values "
     "(lr: the lr column, or the optimizer's constant lr from config.ini). "
     "A NAME with none is refused with the columns there are."},
    {"--log", NULL,
     "Draw every y axis on a log scale; values at or below 0 are left "
     "out."},
    {"--list", NULL,
     "Print the panels, one a line (the metric, then the columns it shows "
     "and a test result's value), instead of drawing them."},
    {NULL, NULL, NULL}};

static const cli_option new_options[] = {
    {"--kind", "KIND",
     "What the plugin is (required): model (a step and its backward in one "
     "plugin), or one kind of plugin: step, backward, zero_grad, optimizer, "
     "scheduler, profiler, data, strategy, callback or precision."},
    {NULL, NULL, NULL}};

static const cli_option no_options[] = {{NULL, NULL, NULL}};

static const cli_option summary_options[] = {
    {"--set", "SECTION.KEY=VALUE",
     "Override one key of the config (repeatable; later wins): another "
     "layers list, say."},
    {NULL, NULL, NULL}};

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
    {"export", "CKPT -o FILE",
     "a checkpoint's parameters as safetensors, or its model as ONNX",
     "Write every parameter of checkpoint CKPT (not the optimizer's state), "
     "then its model's buffers (batch norm's running_mean, running_var and "
     "num_batches_tracked, the last as I64), to FILE in the safetensors "
     "format, each with torch's state_dict() name, dtype and shape, as "
     "every output is written (see OUTPUT FILES: - is the standard output; "
     "CKPT itself is never overwritten), with __metadata__ format = pt, "
     "step, epoch and plugin (the step plugin named in the run directory's "
     "config.ini). torch's load_state_dict(strict=True) of the same "
     "nn.Sequential takes it, and a model's init option starts another run "
     "from it. Which states are buffers only the model knows: export builds "
     "the model from the run directory's config.ini, as predict does (its "
     "data must be readable), or from CONFIG given as loopkit export CONFIG "
     "--ckpt CKPT -o FILE (loopkit export --ckpt CKPT -o FILE is loopkit "
     "export CKPT -o FILE; the run directory is the one CKPT is in, "
     "RUN/checkpoints/NAME or a link to one); a checkpoint with neither "
     "gets its parameters only. FILE.onnx (the format follows the extension) is the model's "
     "forward in evaluation mode as an ONNX model instead, for ONNX Runtime "
     "and the tools that read ONNX: opset 17, IR version 8, the weights as "
     "initializers under their parameters' names, one input named input "
     "and one output named output whose first dimension, the batch, is "
     "given at run time (N); the output is a classifier's logits (apply a "
     "softmax for loopkit predict's probabilities) or a regression's "
     "output, the loss left out; batch norm uses its running statistics, "
     "dropout is the identity. A sequential net exports with every "
     "built-in layer, its blocks and joins; a layer plugin's layer when "
     "its table gives an ONNX lowering; a language model over tokens takes "
     "int64 tokens [N, T] and gives the logits at every position [N, T, "
     "V], and so does gpt, T up to its block_size. It needs the model: the run directory's config.ini or CONFIG. A "
     "model whose step cannot write ONNX (linear; a plugin built "
     "before ABI 1.7), or a layer without a lowering, is refused with "
     "status 2, naming it, and nothing is written. -o is also --output.",
     no_options},
    {"gradcheck", "CONFIG.ini", "backward against central differences",
     "Compare the backward plugin's gradients with central differences of "
     "the step's loss and print each parameter's largest relative error, "
     "PARAMETER MAX_REL_ERROR CHECKED, on the first N training batches "
     "(the one no-data batch without a data plugin); no run directory is "
     "written. Every loss is evaluated in train mode from the same "
     "generator state, so dropout draws the same masks each time. Each "
     "element w checked is differenced with a step h = 1e-6 * max(1, |w|) "
     "for f64 (3e-3 for f32) and with h / 8. A kink, a ReLU's zero or a "
     "max pooling's tie between w - h and w + h, shows as one-sided "
     "differences that disagree, or as central differences at h and h / 8 "
     "that disagree (a kink on each side): then h / 8's differences stand, "
     "and when its one-sided differences disagree too, the element is "
     "skipped: not judged, counted as \"(K skipped at kinks)\" on the "
     "parameter's line and in a note; a parameter all of whose elements "
     "were skipped fails. The relative error of a gradient a against the "
     "differences n is |a - n| / max(|a|, |n|, 1e-3, r / t), r the "
     "differences' own rounding (8 units of the dtype's rounding in each "
     "loss, over the step): the noise floor, below which a gradient is too "
     "small for f32 differences to resolve to t, the dtype's default "
     "tolerance. One-sided differences that part by more than t (f32) or "
     "0.1 (f64) count as a kink. A central difference is the mean of the "
     "derivative over its window, which moves where units flip inside it "
     "(ReLU after batch norm: one conv weight moves every unit of its "
     "channel): an element over t is judged again against the backward's "
     "own values at w - h, w - h/2, w, w + h/2 and w + h, its error the "
     "distance outside their range (0 inside). A parameter over T, or a "
     "NaN, exits 1 with gradcheck: FAILED; a wrong term in a backward is "
     "off by O(1) and fails; errors smaller than T cannot be seen.",
     gradcheck_options},
    {"generate", "[CONFIG.ini]", "text sampled from a trained language model",
     "Create the config's plugins (no run directory), load the parameters "
     "of checkpoint CKPT, and print the prompt followed by tokens sampled "
     "one at a time from the step plugin's predict_step, as nanoGPT's "
     "sample.py does: the context is the prompt and the tokens so far "
     "(the model crops it to its block size), the logits are divided by "
     "the temperature, all but the top K dropped, and the next token drawn "
     "from their softmax with a generator seeded with S. Tokens are bytes "
     "(the text plugin's). Exit status 2 when nothing could be generated: "
     "a bad argument or config, a checkpoint that does not hold the "
     "model's parameters, a step plugin without predict_step.",
     generate_options},
    {"test", "[CONFIG.ini]", "a checkpoint's metrics on the test split",
     "Create the config's plugins (no run directory), load checkpoint "
     "CKPT's model, evaluate the test split as training does after its "
     "last epoch (the step plugin's test_step, or validation_step, on "
     "every batch, averaged over the samples) and print each metric on a "
     "line, NAME VALUE (%.17g), named as metrics.csv names them: "
     "test_loss, test_acc. No callback runs and nothing is written: the "
     "run that made the checkpoint is never touched. Exit status 2 when "
     "nothing was evaluated: a bad argument or config, a checkpoint that "
     "cannot be read or does not hold the model's parameters (another "
     "model, another shape), a data plugin without a test split.",
     eval_options},
    {"validate", "[CONFIG.ini]",
     "a checkpoint's metrics on the validation "
     "split",
     "The same as test on the validation split (validation_step): "
     "val_loss, val_acc.",
     eval_options},
    {"predict", "[CONFIG.ini]", "a checkpoint's model's outputs, as CSV",
     "Create the config's plugins (no run directory), load checkpoint "
     "CKPT's model and write, for every sample of the test split in its "
     "order (the config's test file, or the one --set gives; or every "
     "sample of --input FILE, without labels), a CSV row of "
     "the step plugin's predict_step output, after a header. A classifier "
     "(its output is named logits: mlp, softmax, sequential) gives "
     "index,pred,p0,p1,...: the predicted class (the largest logit, the "
     "first on ties) and the softmax probabilities (%.17g); a regression "
     "(linear) gives index,y0,y1,...: its outputs (%.9g for f32). Exit "
     "status 2 when nothing was predicted (as for test, and a step plugin "
     "without predict_step), 1 when the prediction failed.",
     predict_options},
    {"summary", "CONFIG.ini", "the model's layers, shapes and parameters",
     "Create the config's plugins (no run directory, nothing trained) and "
     "print the model as Lightning's ModelSummary does: a row per layer in "
     "the order of its forward, with its name (the prefix of its tensors' "
     "names), its type, the output shape of one sample, and the elements "
     "of its parameters and buffers; then the totals: parameters "
     "(trainable: those an optimizer steps) and their size, buffers, and "
     "the activations a sample keeps for the backward (every layer's "
     "output, f32), the line loopkit train prints at start. A model that "
     "declares no layers (lk_host_add_layer) is listed by its tensors' "
     "names, a row per name's first part (h.0 for h.0.attn.weight), with "
     "no type or shape.",
     summary_options},
    {"plot", "RUN_DIR", "training curves from metrics.csv",
     "Draw RUN_DIR/metrics.csv as a grid of panels, one for every metric "
     "that has values (the GAN example's d_loss and g_loss too), the "
     "learning rate last, per step: a metric's training values (raw, and "
     "smoothed with a debiased moving average of weight 0.9), its val_ "
     "points and its test_ result (a dashed level, its value in the "
     "legend) in one panel. Without an lr column (no scheduler) the "
     "learning rate is the optimizer's lr in RUN_DIR/config.ini, drawn "
     "flat. Needs loopkit built with cairo.",
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
