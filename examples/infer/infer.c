/* A trained Fashion-MNIST classifier run from C with loopkit's inference
 * API (loopkit/infer.h): no training loop, no run directory, no
 * optimizer. Prints the class and its probability for the first N test
 * images of Debian's dataset-fashion-mnist, read here (gunzipped by
 * gzip -dc) and scaled as the idx data plugin scales them (x / 255).
 *
 *   ./infer CONFIG WEIGHTS [N]
 *
 * CONFIG is the training config; WEIGHTS a checkpoint of its model or
 * what `loopkit export CKPT -o FILE.safetensors` wrote. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#define IMAGES "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

static const char *const names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

static unsigned long be32(const unsigned char *b) {
  return (unsigned long)b[0] << 24 | (unsigned long)b[1] << 16 |
         (unsigned long)b[2] << 8 | b[3];
}

/* The first N images (28 x 28 bytes each) of the IDX file, as floats. */
static float *read_images(size_t n) {
  FILE *f = popen("gzip -dc " IMAGES, "r");
  if (!f)
    return NULL;
  unsigned char head[16], px[28 * 28];
  float *x = malloc(n * sizeof px * sizeof *x);
  int ok = x && fread(head, 1, sizeof head, f) == sizeof head &&
           be32(head) == 0x803 && be32(head + 4) >= n && be32(head + 8) == 28 &&
           be32(head + 12) == 28;
  for (size_t i = 0; ok && i < n; i++) {
    ok = fread(px, 1, sizeof px, f) == sizeof px;
    for (size_t j = 0; ok && j < sizeof px; j++)
      x[i * sizeof px + j] = (float)px[j] / 255.0f;
  }
  /* The rest is not read: gzip gets SIGPIPE, which is fine. */
  pclose(f);
  if (!ok) {
    free(x);
    return NULL;
  }
  return x;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s CONFIG WEIGHTS [N]\n", argv[0]);
    return 2;
  }
  size_t n = argc == 4 ? strtoul(argv[3], NULL, 10) : 5;
  lk_model *m;
  if (lk_model_open(argv[1], argv[2], &m) != 0) {
    fprintf(stderr, "infer: %s\n", lk_last_error());
    return 1;
  }
  size_t ndim, dims[LK_MAX_DIMS], classes = 1;
  const char *name;
  lk_model_output_shape(m, &ndim, dims, &name);
  for (size_t i = 0; i < ndim; i++)
    classes *= dims[i];
  float *x = read_images(n), *logits = malloc(n * classes * sizeof *logits);
  int rc = 1;
  if (strcmp(name, "logits") != 0 || classes != 10)
    fprintf(stderr, "infer: the model gives %zu %s a sample, not 10 logits\n",
            classes, name);
  else if (!x || !logits)
    fprintf(stderr, "infer: cannot read %zu images from %s\n", n, IMAGES);
  else if (lk_model_forward(m, x, n, logits) != 0)
    fprintf(stderr, "infer: %s\n", lk_last_error());
  else
    rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    /* The softmax, in double from the largest logit, as loopkit predict. */
    const float *z = logits + i * classes;
    size_t arg = 0;
    for (size_t j = 1; j < classes; j++)
      if (z[j] > z[arg])
        arg = j;
    double sum = 0;
    for (size_t j = 0; j < classes; j++)
      sum += exp((double)z[j] - z[arg]);
    printf("image %zu: class %zu (%s), probability %.17g\n", i, arg, names[arg],
           1 / sum);
  }
  free(x);
  free(logits);
  lk_model_close(m);
  return rc;
}
