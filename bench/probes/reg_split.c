// reg_split measures loading a page-cached file onto GPUs by DMA straight
// from the page cache, with the cost of getting there counted (issue 41):
// T threads take the file in slices of S bytes; for each slice a thread
// maps it (MAP_SHARED, MAP_POPULATE unless RS_POPULATE=0), registers the
// mapping (cuMemHostRegister, read-only, portable), queues its copy to GPU
// (slice % G), and unregisters and unmaps the slice before last once that
// slice's copy is done, so that one slice's registration overlaps the
// previous one's copy. The clock covers everything: the figure is what a
// load on this path would reach. RS_COPY=0 registers and unregisters
// without copying (the registration's own rate).
//   RS_SLICE_MIB=16,64,256  RS_THREADS=1,2,4,8,16  RS_GPUS=1
// Build: gcc -O2 -pthread reg_split.c -I/usr/local/cuda/include
//   -L/usr/local/cuda/lib64 -lcuda -o reg_split
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "probe.h"


static int fd, G, populate = 1, copy = 1;
static size_t n, S, nslices;
static CUcontext ctx[8];
static CUdeviceptr dev[8];
static atomic_size_t next;
static pthread_barrier_t bar;

typedef struct { void *p; size_t len; CUevent ev; int g; } slot;

static void release(slot *s) {
  if (!s->p) return;
  CK(cuCtxSetCurrent(ctx[s->g]));
  if (copy) CK(cuEventSynchronize(s->ev));
  CK(cuMemHostUnregister(s->p));
  munmap(s->p, s->len);
  s->p = NULL;
}

static void *worker(void *arg) {
  (void)arg;
  CUstream st[8];
  slot sl[2] = {0};
  for (int g = 0; g < G; g++) {
    CK(cuCtxSetCurrent(ctx[g]));
    CK(cuStreamCreate(&st[g], CU_STREAM_NON_BLOCKING));
  }
  for (int k = 0; k < 2; k++) CK(cuEventCreate(&sl[k].ev, CU_EVENT_DISABLE_TIMING)); // on ctx[G-1]; events of any context are waited on
  pthread_barrier_wait(&bar);
  int k = 0;
  for (;;) {
    size_t i = atomic_fetch_add(&next, 1);
    if (i >= nslices) break;
    slot *s = &sl[k];
    release(s); // the slice before last
    size_t off = i * S, len = off + S > n ? n - off : S;
    int g = (int)(i % G);
    s->p = mmap(NULL, len, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, off);
    if (s->p == MAP_FAILED) { perror("mmap"); exit(1); }
    s->len = len;
    s->g = g;
    CK(cuCtxSetCurrent(ctx[g]));
    CK(cuMemHostRegister(s->p, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY));
    if (copy) {
      CK(cuMemcpyHtoDAsync(dev[g] + off, s->p, len, st[g]));
      CK(cuEventRecord(s->ev, st[g]));
    }
    k ^= 1;
  }
  release(&sl[0]);
  release(&sl[1]);
  pthread_barrier_wait(&bar);
  for (int g = 0; g < G; g++) { CK(cuCtxSetCurrent(ctx[g])); CK(cuStreamDestroy(st[g])); }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: reg_split FILE\n"); return 2; }
  fd = open(argv[1], O_RDONLY);
  struct stat stt;
  if (fd < 0 || fstat(fd, &stt)) { perror(argv[1]); return 1; }
  n = stt.st_size;
  G = getenv("RS_GPUS") ? atoi(getenv("RS_GPUS")) : 1;
  if (getenv("RS_POPULATE")) populate = atoi(getenv("RS_POPULATE"));
  if (getenv("RS_COPY")) copy = atoi(getenv("RS_COPY"));
  const char *ss = getenv("RS_SLICE_MIB") ? getenv("RS_SLICE_MIB") : "16,64,256";
  const char *ts = getenv("RS_THREADS") ? getenv("RS_THREADS") : "1,2,4,8,16";
  CK(cuInit(0));
  for (int g = 0; g < G; g++) {
    CUdevice d;
    CK(cuDeviceGet(&d, g));
    CK(cuDevicePrimaryCtxRetain(&ctx[g], d));
    CK(cuCtxSetCurrent(ctx[g]));
    if (copy) CK(cuMemAlloc(&dev[g], n));
  }
  for (const char *s = ss; *s;) {
    S = strtoul(s, (char **)&s, 10) << 20;
    if (*s == ',') s++;
    nslices = (n + S - 1) / S;
    for (const char *t = ts; *t;) {
      int T = strtol(t, (char **)&t, 10);
      if (*t == ',') t++;
      double best = 1e9, sum = 0;
      for (int rep = 0; rep < 4; rep++) {
        pthread_t th[64];
        pthread_barrier_init(&bar, NULL, T + 1);
        atomic_store(&next, 0);
        for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, worker, NULL);
        pthread_barrier_wait(&bar);
        double t0 = now();
        pthread_barrier_wait(&bar);
        double dt = now() - t0;
        for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&bar);
        if (rep == 0) continue; // warm-up
        sum += dt;
        if (dt < best) best = dt;
      }
      printf("GPUs=%d slice=%4zu MiB threads=%2d populate=%d copy=%d  best %6.1f GB/s  mean %6.1f GB/s\n", G, S >> 20, T,
             populate, copy, n / best / 1e9, n / (sum / 3) / 1e9);
      fflush(stdout);
    }
  }
  return 0;
}
