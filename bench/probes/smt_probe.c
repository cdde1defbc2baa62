// smt_probe looks for CPUs of this machine that slow each other down
// (issue 40): vCPUs of a virtual machine that are two hardware threads of
// one host core. zarr_s3.sh's split mode pins versitygw to some CPUs and
// the bench to the others; a decode ceiling measured while the server is
// idle reads slower per byte beside a busy server if the server's CPUs
// share cores with the bench's.
//
// A kernel that looks like a decode (table look-ups in 256 KiB, bytes
// written through 1 MiB) runs pinned to each CPU alone, then to each
// pair at once: a pair whose rates drop well below their lone rates
// shares a core. Then every CLIENT CPU runs it, with the SERVER CPUs idle
// and busy in turn (three rounds): the client's summed rate with a busy
// server over its rate with an idle one.
//   SMT_CLIENT=0-11 SMT_SERVER=12-15 (taskset lists; default: the last
//   quarter of the online CPUs is the server) SMT_MS=60 (per pair);
//   SMT_SPIN=S: only run the kernel on the SERVER CPUs for S seconds (a
//   busy server beside another program's run)
// Build: gcc -O2 -pthread smt_probe.c -o smt_probe
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { TAB = 256 << 10, OUTB = 1 << 20, MAXCPU = 1024 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

struct job {
  int cpu;
  double secs;
  volatile int *stop; // spin until *stop when secs is 0
  double rate;        // kernel steps per second
};

static void *work(void *arg) {
  struct job *j = arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(j->cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  uint8_t *tab = malloc(TAB), *out = malloc(OUTB);
  for (int i = 0; i < TAB; i++) tab[i] = (uint8_t)(i * 131 + 7);
  memset(out, 1, OUTB);
  uint64_t x = 88172645463325252ull ^ (uint64_t)j->cpu, n = 0;
  size_t o = 0;
  double start = now(), end = start + j->secs, t;
  for (;;) {
    for (int k = 0; k < 8192; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      out[o] = tab[x & (TAB - 1)] + out[(o + 4093) & (OUTB - 1)];
      o = (o + 1) & (OUTB - 1);
    }
    n += 8192;
    t = now();
    if (j->secs > 0 ? t >= end : *j->stop) break;
  }
  j->rate = n / (t - start) + out[x & (OUTB - 1)] * 1e-12; // keep out live
  free(tab), free(out);
  return NULL;
}

// run runs the kernel on cpus[0..n) for secs each, at once, into rates.
static void run(const int *cpus, int n, double secs, double *rates) {
  pthread_t th[MAXCPU];
  struct job jobs[MAXCPU];
  for (int i = 0; i < n; i++) {
    jobs[i] = (struct job){.cpu = cpus[i], .secs = secs};
    pthread_create(&th[i], NULL, work, &jobs[i]);
  }
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    rates[i] = jobs[i].rate;
  }
}

// parse reads a taskset list ("0-11,14") into cpus and returns the count.
static int parse(const char *s, int *cpus) {
  int n = 0;
  while (*s) {
    char *e;
    long a = strtol(s, &e, 10), b = a;
    if (e == s) break;
    if (*e == '-') b = strtol(e + 1, &e, 10);
    for (long c = a; c <= b && n < MAXCPU; c++) cpus[n++] = (int)c;
    s = *e == ',' ? e + 1 : e;
    if (e == s && *e) break;
  }
  return n;
}

int main(void) {
  static int all[MAXCPU], client[MAXCPU], server[MAXCPU];
  static double alone[MAXCPU], r[MAXCPU];
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  for (int i = 0; i < ncpu; i++) all[i] = i;
  int k = (ncpu + 3) / 4, nc, ns;
  char def[64];
  snprintf(def, sizeof def, "0-%d", ncpu - k - 1);
  nc = parse(getenv("SMT_CLIENT") ? getenv("SMT_CLIENT") : def, client);
  snprintf(def, sizeof def, "%d-%d", ncpu - k, ncpu - 1);
  ns = parse(getenv("SMT_SERVER") ? getenv("SMT_SERVER") : def, server);
  double secs = (getenv("SMT_MS") ? atof(getenv("SMT_MS")) : 60) / 1000;
  if (getenv("SMT_SPIN")) {
    run(server, ns, atof(getenv("SMT_SPIN")), r);
    return 0;
  }

  for (int i = 0; i < ncpu; i++) run(&all[i], 1, secs, &alone[i]);
  printf("pairs slower than 0.85 of their lone rates (cpu cpu: rates):\n");
  int shared = 0;
  for (int i = 0; i < ncpu; i++)
    for (int j = i + 1; j < ncpu; j++) {
      int p[2] = {i, j};
      run(p, 2, secs, r);
      double a = r[0] / alone[i], b = r[1] / alone[j];
      if (a < 0.85 || b < 0.85) printf("  %d %d: %.2f %.2f\n", i, j, a, b), shared++;
    }
  printf("%d of %d pairs\n", shared, ncpu * (ncpu - 1) / 2);

  // The client's rate with the server idle and busy, three rounds.
  int both[2 * MAXCPU];
  memcpy(both, client, nc * sizeof(int));
  memcpy(both + nc, server, ns * sizeof(int));
  double idle = 0, busy = 0;
  for (int round = 0; round < 3; round++) {
    double s = 0;
    run(client, nc, 0.5, r);
    for (int i = 0; i < nc; i++) s += r[i];
    idle += s;
    s = 0;
    run(both, nc + ns, 0.5, r);
    for (int i = 0; i < nc; i++) s += r[i];
    busy += s;
    printf("round %d: client %d cpus, server %d cpus busy / idle: %.3f\n", round, nc, ns, s / (idle / (round + 1)));
  }
  printf("SMT_RESULT client_busy_server_over_idle %.3f\n", busy / idle);
  return 0;
}
