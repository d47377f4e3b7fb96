/* mpi: data-parallel training over MPI processes (mpirun -np K loopkit
 * train ...). Every process holds the whole model; setup broadcasts the
 * parameters and the state from rank 0, and after every backward the
 * gradients are averaged with one MPI_Allreduce per dtype over a packed
 * buffer, so that K processes with batches of B train as one process with
 * batches of K*B.
 *
 * Every call goes through a communicator of our own (a duplicate of
 * MPI_COMM_WORLD) whose error handler returns codes, so that an MPI
 * failure becomes an lk_fail naming the call instead of a silent abort. */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

/* One dtype's share of the gradients, packed for a single reduction. */
typedef struct pack {
  lk_dtype dtype;
  MPI_Datatype mpi_type;
  size_t count; /* elements */
  void *buf;
} pack;

typedef struct mpi {
  lk_host *host;
  MPI_Comm comm;
  int rank, world;
  bool initialized_mpi; /* we called MPI_Init, so we finalize */
  void *libmpi;         /* libmpi promoted to RTLD_GLOBAL */
  size_t n_params;      /* as at setup */
  pack packs[2];        /* f64, f32 */
  uint64_t reduces;     /* reduce_gradients calls that reduced */
  double reduce_seconds;
} mpi;

static int mpi_fail(mpi *m, const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    len = 0;
  text[len] = '\0';
  if (m->world == 0) /* before the rank is known */
    return lk_fail(m->host, LK_EPLUGIN, "%s failed: %s", call,
                   len ? text : "unknown MPI error");
  return lk_fail(m->host, LK_EPLUGIN, "%s failed on rank %d of %d: %s", call,
                 m->rank, m->world, len ? text : "unknown MPI error");
}

/* Open MPI's components are shared objects that libmpi opens itself and
 * that resolve libmpi's symbols globally; loopkit opens this plugin, and so
 * libmpi, RTLD_LOCAL, which would hide them. Reopening libmpi with
 * RTLD_NOLOAD | RTLD_GLOBAL makes its symbols (and its dependencies')
 * global without loading anything new. RTLD_NODELETE keeps it mapped after
 * the plugin is unloaded: MPI cannot start twice in a process anyway, and
 * the leak checkers' reports at exit need its code to name the callers. */
static void *promote_libmpi(void) {
  const int mode = RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD | RTLD_NODELETE;
  Dl_info info;
  void *h = NULL;
  if (dladdr((void *)MPI_Init, &info) && info.dli_fname)
    h = dlopen(info.dli_fname, mode);
  if (!h)
    h = dlopen("libmpi.so.40", mode);
  if (!h)
    h = dlopen("libmpi.so", mode);
  return h;
}

static int start_mpi(mpi *m) {
  int done = 0, rc;
  if ((rc = MPI_Finalized(&done)) != MPI_SUCCESS)
    return mpi_fail(m, "MPI_Finalized", rc);
  if (done)
    return lk_fail(m->host, LK_EPLUGIN,
                   "MPI was already finalized in this process: it cannot "
                   "start again (initialize MPI before the first run and "
                   "finalize it after the last)");
  if ((rc = MPI_Initialized(&done)) != MPI_SUCCESS)
    return mpi_fail(m, "MPI_Initialized", rc);
  if (done)
    return 0; /* the program runs MPI itself and finalizes it */
  m->libmpi = promote_libmpi();
  if (!m->libmpi)
    lk_log(m->host, LK_LOG_WARN,
           "libmpi not promoted to global symbols (%s): MPI_Init may "
           "fail to load its components",
           dlerror());
  int provided = 0;
  if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) !=
      MPI_SUCCESS)
    return mpi_fail(m, "MPI_Init_thread", rc);
  m->initialized_mpi = true;
  return 0;
}

/* The line bench/mpi reads: keep its format. */
static void report(const mpi *m) {
  size_t bytes = 0;
  for (int i = 0; i < 2; i++)
    bytes += m->packs[i].count * lk_dtype_size(m->packs[i].dtype);
  double each = m->reduces ? m->reduce_seconds / (double)m->reduces : 0;
  lk_log(m->host, LK_LOG_INFO,
         "%d ranks; %llu gradient allreduces of %zu bytes, %.3f µs each "
         "(mean), total %.6f s",
         m->world, (unsigned long long)m->reduces, bytes, each * 1e6,
         m->reduce_seconds);
}

static void destroy(void *self) {
  mpi *m = self;
  if (m->world > 0 && m->rank == 0)
    report(m);
  for (int i = 0; i < 2; i++)
    free(m->packs[i].buf);
  /* A program that runs MPI itself may have finalized it already. */
  int finalized = 1;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS)
    finalized = 1;
  if (!finalized && m->comm != MPI_COMM_NULL &&
      MPI_Comm_free(&m->comm) != MPI_SUCCESS)
    lk_log(m->host, LK_LOG_WARN, "MPI_Comm_free failed");
  if (!finalized && m->initialized_mpi && MPI_Finalize() != MPI_SUCCESS)
    lk_log(m->host, LK_LOG_WARN, "MPI_Finalize failed");
  if (m->libmpi)
    dlclose(m->libmpi);
  free(m);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  (void)opts;
  mpi *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->comm = MPI_COMM_NULL;
  m->packs[0] = (pack){.dtype = LK_F64, .mpi_type = MPI_DOUBLE};
  m->packs[1] = (pack){.dtype = LK_F32, .mpi_type = MPI_FLOAT};
  int rc = start_mpi(m);
  if (rc == 0 && (rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm)) != MPI_SUCCESS)
    rc = mpi_fail(m, "MPI_Comm_dup", rc);
  if (rc == 0 &&
      (rc = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
    rc = mpi_fail(m, "MPI_Comm_set_errhandler", rc);
  if (rc == 0 && (rc = MPI_Comm_rank(m->comm, &m->rank)) != MPI_SUCCESS)
    rc = mpi_fail(m, "MPI_Comm_rank", rc);
  if (rc == 0 && (rc = MPI_Comm_size(m->comm, &m->world)) != MPI_SUCCESS)
    rc = mpi_fail(m, "MPI_Comm_size", rc);
  if (rc != 0) {
    destroy(m);
    return rc;
  }
  *self = m;
  return 0;
}

/* MPI counts are ints: larger buffers go in slices. */
static const size_t max_slice = INT_MAX;

static int bcast_bytes(mpi *m, unsigned char *buf, size_t n) {
  for (size_t at = 0; at < n; at += max_slice) {
    size_t len = n - at < max_slice ? n - at : max_slice;
    int rc = MPI_Bcast(buf + at, (int)len, MPI_BYTE, 0, m->comm);
    if (rc != MPI_SUCCESS)
      return mpi_fail(m, "MPI_Bcast", rc);
  }
  return 0;
}

static int allreduce_sum(mpi *m, void *buf, size_t count, MPI_Datatype type,
                         size_t elem) {
  for (size_t at = 0; at < count; at += max_slice) {
    size_t len = count - at < max_slice ? count - at : max_slice;
    int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + at * elem, (int)len,
                           type, MPI_SUM, m->comm);
    if (rc != MPI_SUCCESS)
      return mpi_fail(m, "MPI_Allreduce", rc);
  }
  return 0;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ c[i]) * 1099511628211u;
  return h;
}

static uint64_t layout_hash(uint64_t h, lk_tensor *const *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t d = (uint64_t)t[i]->dtype, numel = t[i]->numel;
    h = fnv1a(h, t[i]->name, strlen(t[i]->name) + 1);
    h = fnv1a(h, &d, sizeof d);
    h = fnv1a(h, &numel, sizeof numel);
  }
  return h;
}

static size_t count_values(lk_tensor *const *t, size_t n) {
  size_t sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += t[i]->numel;
  return sum;
}

/* A process with other tensors (another config, another plugin version)
 * would make every broadcast and reduction below mismatch: every process
 * compares its layout with the others' and they all fail together. */
static int check_layout(mpi *m, lk_tensor *const *params, size_t n,
                        lk_tensor *const *states, size_t ns) {
  uint64_t h =
      layout_hash(layout_hash(14695981039346656037u, params, n), states, ns);
  uint64_t v[2] = {h, ~h}; /* max of ~h is ~(min of h) */
  int rc = MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, m->comm);
  if (rc != MPI_SUCCESS)
    return mpi_fail(m, "MPI_Allreduce", rc);
  if (v[0] != ~v[1])
    return lk_fail(m->host, LK_ECONFIG,
                   "the %d processes do not have the same parameters and "
                   "state (rank %d has %zu parameters of %zu values and %zu "
                   "state tensors): run the same config everywhere",
                   m->world, m->rank, n, count_values(params, n), ns);
  return 0;
}

static size_t tensor_bytes(const lk_tensor *t) {
  return t->numel * lk_dtype_size(t->dtype);
}

/* Rank 0's parameters and state, everywhere, in one broadcast. */
static int broadcast_tensors(mpi *m, lk_tensor *const *params, size_t n,
                             lk_tensor *const *states, size_t ns) {
  lk_tensor *const *lists[2] = {params, states};
  size_t counts[2] = {n, ns}, total = 0;
  for (int l = 0; l < 2; l++)
    for (size_t i = 0; i < counts[l]; i++)
      total += tensor_bytes(lists[l][i]);
  if (total == 0)
    return 0;
  unsigned char *buf = malloc(total), *at = buf;
  if (!buf)
    return lk_fail(m->host, LK_ENOMEM, "out of memory (%zu bytes)", total);
  for (int l = 0; m->rank == 0 && l < 2; l++)
    for (size_t i = 0; i < counts[l]; i++) {
      memcpy(at, lists[l][i]->data, tensor_bytes(lists[l][i]));
      at += tensor_bytes(lists[l][i]);
    }
  int rc = bcast_bytes(m, buf, total);
  at = buf;
  for (int l = 0; rc == 0 && m->rank != 0 && l < 2; l++)
    for (size_t i = 0; i < counts[l]; i++) {
      memcpy(lists[l][i]->data, at, tensor_bytes(lists[l][i]));
      at += tensor_bytes(lists[l][i]);
    }
  free(buf);
  return rc;
}

static pack *pack_of(mpi *m, lk_dtype dtype) {
  for (int i = 0; i < 2; i++)
    if (m->packs[i].dtype == dtype)
      return &m->packs[i];
  return NULL;
}

static int alloc_packs(mpi *m, lk_tensor *const *params, size_t n) {
  for (int i = 0; i < 2; i++) { /* a second setup starts afresh */
    free(m->packs[i].buf);
    m->packs[i].buf = NULL;
    m->packs[i].count = 0;
  }
  m->n_params = 0;
  for (size_t i = 0; i < n; i++) {
    pack *p = pack_of(m, params[i]->dtype);
    if (!p)
      return lk_fail(m->host, LK_EINVAL,
                     "parameter %s is %s: only f32 and f64 gradients can be "
                     "averaged",
                     params[i]->name, lk_dtype_name(params[i]->dtype));
    p->count += params[i]->numel;
  }
  for (int i = 0; i < 2; i++) {
    pack *p = &m->packs[i];
    if (p->count && !(p->buf = malloc(p->count * lk_dtype_size(p->dtype))))
      return lk_fail(m->host, LK_ENOMEM, "out of memory (%zu %s gradients)",
                     p->count, lk_dtype_name(p->dtype));
  }
  m->n_params = n;
  return 0;
}

static int setup(void *self, lk_tensor *const *params, size_t n) {
  mpi *m = self;
  size_t ns = 0;
  lk_tensor *const *states = lk_host_states(m->host, &ns);
  int rc = check_layout(m, params, n, states, ns);
  if (rc == 0)
    rc = broadcast_tensors(m, params, n, states, ns);
  if (rc == 0)
    rc = alloc_packs(m, params, n);
  return rc;
}

/* Copies every gradient of P's dtype into P's buffer (in) or back. */
static void move_grads(pack *p, lk_tensor *const *params, size_t n, bool in) {
  size_t elem = lk_dtype_size(p->dtype);
  char *at = p->buf;
  for (size_t i = 0; i < n; i++) {
    if (params[i]->dtype != p->dtype)
      continue;
    size_t len = params[i]->numel * elem;
    if (in)
      memcpy(at, params[i]->grad, len);
    else
      memcpy(params[i]->grad, at, len);
    at += len;
  }
}

static void divide(pack *p, int world) {
  if (p->dtype == LK_F64) {
    double *g = p->buf;
    for (size_t i = 0; i < p->count; i++)
      g[i] /= (double)world;
  } else {
    float *g = p->buf;
    for (size_t i = 0; i < p->count; i++)
      g[i] /= (float)world;
  }
}

static int reduce_gradients(void *self, lk_tensor *const *params, size_t n) {
  mpi *m = self;
  if (n != m->n_params)
    return lk_fail(m->host, LK_ESTATE,
                   "reduce_gradients got %zu parameters, setup had %zu", n,
                   m->n_params);
  if (m->world == 1)
    return 0;
  for (int i = 0; i < 2; i++)
    if (m->packs[i].count)
      move_grads(&m->packs[i], params, n, true);
  double t0 = MPI_Wtime();
  for (int i = 0; i < 2; i++) {
    pack *p = &m->packs[i];
    int rc = p->count ? allreduce_sum(m, p->buf, p->count, p->mpi_type,
                                      lk_dtype_size(p->dtype))
                      : 0;
    if (rc != 0)
      return rc;
  }
  m->reduce_seconds += MPI_Wtime() - t0;
  m->reduces++;
  for (int i = 0; i < 2; i++)
    if (m->packs[i].count) {
      divide(&m->packs[i], m->world);
      move_grads(&m->packs[i], params, n, false);
    }
  return 0;
}

static int reduce_metrics(void *self, double *values, size_t n) {
  return allreduce_sum(self, values, n, MPI_DOUBLE, sizeof(double));
}

static int rank(void *self) {
  return ((mpi *)self)->rank;
}

static int world_size(void *self) {
  return ((mpi *)self)->world;
}

static void stop_all(void *self, int status, const char *message) {
  mpi *m = self;
  lk_log(m->host, LK_LOG_ERROR, "rank %d of %d: %s", m->rank, m->world,
         message);
  MPI_Abort(MPI_COMM_WORLD, status);
  _Exit(status); /* MPI_Abort returned: stop this process at least */
}

static const lk_strategy_ops strategy_ops = {
    .setup = setup,
    .reduce_gradients = reduce_gradients,
    .reduce_metrics = reduce_metrics,
    .rank = rank,
    .world_size = world_size,
    .abort = stop_all,
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_DESCRIPTOR(
        .name = "mpi",
        .summary =
            "data parallel over MPI processes (mpirun -np K): parameters "
            "broadcast, gradients averaged",
        .create = create, .destroy = destroy, .strategy = &strategy_ops);
