/* killer: a profiler for tests that stop a run at a chosen moment: inside
 * a checkpoint write, a validation, the test, an optimizer step. The
 * environment, not the config, says when, so that a killed run and the
 * uninterrupted one it is compared with have the same config:
 *
 *   LK_KILL="ACTION[/end]:N[:DELAY_US[:SIGNAL]]"
 *
 * sends SIGNAL (KILL, INT or TERM; KILL by default) to this process at the
 * start (or with /end, the end) of the N-th call, from 1, of the profiler
 * action ACTION (checkpoint_save, validation, test, optimizer_step, ...),
 * at once or DELAY_US microseconds later from another thread, so that a
 * kill lands inside the action. LK_KILL_RANK limits it to one rank. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loopkit/loopkit.h>

#define MAX_ACTIONS 32

typedef struct killer {
  lk_host *host;
  char action[64];
  bool at_end;
  long nth, delay_us;
  int sig, rank; /* rank -1: any */
  int target;    /* action id, -1 until asked for */
  long seen;
  int n_actions;
} killer;

static int create(lk_host *host, const lk_options *o, void **self) {
  (void)o;
  killer *k = calloc(1, sizeof *k);
  if (!k)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  k->host = host;
  k->target = -1;
  k->rank = -1;
  k->sig = SIGKILL;
  const char *spec = getenv("LK_KILL"), *rank = getenv("LK_KILL_RANK");
  if (rank && *rank)
    k->rank = atoi(rank);
  if (spec && *spec) {
    char sig[16] = "";
    int n = sscanf(spec, "%63[^:/]", k->action);
    const char *rest = spec + strlen(k->action);
    if (!strncmp(rest, "/end", 4)) {
      k->at_end = true;
      rest += 4;
    }
    if (n != 1 ||
        sscanf(rest, ":%ld:%ld:%15s", &k->nth, &k->delay_us, sig) < 1 ||
        k->nth < 1) {
      free(k);
      return lk_fail(host, LK_ECONFIG,
                     "LK_KILL=\"%s\": expected ACTION[/end]:N[:DELAY_US[:SIG]]",
                     spec);
    }
    k->sig = !strcmp(sig, "INT")    ? SIGINT
             : !strcmp(sig, "TERM") ? SIGTERM
                                    : SIGKILL;
  }
  *self = k;
  return 0;
}

static void destroy(void *self) {
  free(self);
}

static int action(void *self, const char *name) {
  killer *k = self;
  int id = k->n_actions++;
  if (k->action[0] && !strcmp(name, k->action))
    k->target = id;
  return id;
}

typedef struct later {
  long delay_us;
  int sig;
} later;

static void *fire_later(void *arg) {
  later l = *(later *)arg;
  free(arg);
  struct timespec ts = {l.delay_us / 1000000, (l.delay_us % 1000000) * 1000};
  nanosleep(&ts, NULL);
  kill(getpid(), l.sig);
  return NULL;
}

static void fire(killer *k) {
  if (k->rank >= 0 && lk_host_rank(k->host) != k->rank)
    return;
  later *l = k->delay_us > 0 ? malloc(sizeof *l) : NULL;
  pthread_t t;
  if (l) {
    *l = (later){k->delay_us, k->sig};
    if (pthread_create(&t, NULL, fire_later, l) == 0) {
      pthread_detach(t);
      return;
    }
    free(l);
  }
  kill(getpid(), k->sig);
}

static void start(void *self, int id) {
  killer *k = self;
  if (id == k->target && !k->at_end && ++k->seen == k->nth)
    fire(k);
}

static void stop(void *self, int id) {
  killer *k = self;
  if (id == k->target && k->at_end && ++k->seen == k->nth)
    fire(k);
}

static const lk_profiler_ops profiler_ops = {
    .action = action, .start = start, .stop = stop};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "killer",
    .version = "1.0",
    .summary = "signals its own process at a chosen profiler action (tests)",
    .create = create,
    .destroy = destroy,
    .profiler = &profiler_ops,
};
