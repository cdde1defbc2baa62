// pread_steady measures the steady state of what kvik's staged device
// reads do, outside Go: T threads read a page-cached file in 4 MiB tasks
// into pinned (2 MiB-aligned, huge-page, cuMemHostRegister'ed) bounce
// buffers and, with PS_GPUS=G > 0, copy each task to device memory on
// GPU t % G (two buffers per thread, an event each: the read of task i+1
// overlaps the copy of task i). Unlike ../shared/probes/pread_dest.c,
// everything a thread sets up (buffers, registration, stream) is made
// before the clock starts, so the figure is the reads and copies alone.
//   PS_THREADS=16,32    thread counts
//   PS_GPUS=0,1,2       0: pread only; G: copy to G GPUs, each its share
//   PS_FDS=shared,own   one descriptor for all threads, or one per thread
//   PS_TASK_KIB=4096    the chunk (and each buffer's) size
//   PS_POOL=C           as kvik's pool does: a thread takes tasks of C
//                       chunks, each with a buffer pair popped from one
//                       shared last-in-first-out stack, and pushes it back
//                       after waiting for the task's copies; 0 (default):
//                       each thread keeps its own pair throughout
// Build on the GPU machine:
//   gcc -O2 -pthread pread_steady.c -I/usr/local/cuda/include
//     -L/usr/local/cuda/lib64 -lcuda -o pread_steady
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static size_t TASK = (size_t)4 << 20; // PS_TASK_KIB
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_; \
  cuGetErrorName(r_, &s_); fprintf(stderr, "%s: %s\n", #x, s_); exit(1); } } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static const char *path;
static size_t n;
static int T, G, ownfd, sharedfd;
static CUcontext ctx[8];
static CUdeviceptr dev[8];
static pthread_barrier_t start, stop;
static int poolC;
typedef struct { char *buf[2]; } pair;
static pair *stack[256];
static int depth;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static pair *pop(void) {
  pthread_mutex_lock(&mu);
  pair *p = stack[--depth];
  pthread_mutex_unlock(&mu);
  return p;
}

static void push(pair *p) {
  pthread_mutex_lock(&mu);
  stack[depth++] = p;
  pthread_mutex_unlock(&mu);
}

static void rd(int fd, char *dst, size_t len, size_t off) {
  while (len) {
    ssize_t r = pread(fd, dst, len, off);
    if (r <= 0) { perror("pread"); exit(1); }
    dst += r, len -= r, off += r;
  }
}

static char *pinned(void) {
  char *b = aligned_alloc(2 << 20, TASK);
  madvise(b, TASK, MADV_HUGEPAGE);
  memset(b, 1, TASK);
  CK(cuMemHostRegister(b, TASK, CU_MEMHOSTREGISTER_PORTABLE));
  return b;
}

static void *worker(void *arg) {
  long id = (long)arg;
  int g = G ? id % G : 0, ng = G ? G : 1;
  long rank = id / ng, per = (T - g + ng - 1) / ng; // this thread's index among its GPU's threads
  size_t share = (n / ng) / TASK * TASK, lo = g * share, hi = g == ng - 1 ? n : lo + share;
  CK(cuCtxSetCurrent(ctx[g]));
  pair own = {{pinned(), pinned()}}, *pr = &own;
  if (poolC) push(&own); // the stack holds every thread's pair
  CUstream s;
  CUevent ev[2];
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 2; i++) CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
  int fd = ownfd ? open(path, O_RDONLY) : sharedfd;
  pthread_barrier_wait(&start);
  int cur = 0;
  size_t chunks = 0;
  for (size_t off = lo + rank * TASK; off < hi; off += per * TASK) {
    if (poolC && chunks % poolC == 0) pr = pop();
    size_t len = off + TASK > hi ? hi - off : TASK;
    if (G) CK(cuEventSynchronize(ev[cur]));
    rd(fd, pr->buf[cur], len, off);
    if (G) {
      CK(cuMemcpyHtoDAsync(dev[g] + (off - lo), pr->buf[cur], len, s));
      CK(cuEventRecord(ev[cur], s));
    }
    cur ^= 1;
    if (poolC && ++chunks % poolC == 0) {
      CK(cuStreamSynchronize(s));
      push(pr);
    }
  }
  CK(cuStreamSynchronize(s));
  if (poolC && chunks % poolC) push(pr);
  CK(cuStreamSynchronize(s));
  pthread_barrier_wait(&stop);
  pthread_barrier_wait(&stop); // every pair is back on the stack
  if (ownfd) close(fd);
  for (int i = 0; i < 2; i++) {
    cuEventDestroy(ev[i]);
    cuMemHostUnregister(own.buf[i]);
    free(own.buf[i]);
  }
  cuStreamDestroy(s);
  return NULL;
}

static int list(const char *env, const char *def, int *out) {
  const char *e = getenv(env);
  int k = 0;
  for (const char *q = e ? e : def; *q && k < 16;) {
    out[k++] = atoi(q);
    while (*q && *q != ',') q++;
    if (*q) q++;
  }
  return k;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: pread_steady FILE\n"); return 2; }
  path = argv[1];
  if (getenv("PS_TASK_KIB")) TASK = (size_t)atoi(getenv("PS_TASK_KIB")) << 10;
  if (getenv("PS_POOL")) poolC = atoi(getenv("PS_POOL"));
  sharedfd = open(path, O_RDONLY);
  struct stat st;
  if (sharedfd < 0 || fstat(sharedfd, &st)) { perror(path); return 1; }
  n = st.st_size;
  CK(cuInit(0));
  int ndev;
  CK(cuDeviceGetCount(&ndev));
  if (ndev > 8) ndev = 8;
  for (int d = 0; d < ndev; d++) {
    CUdevice h;
    CK(cuDeviceGet(&h, d));
    CK(cuDevicePrimaryCtxRetain(&ctx[d], h));
  }
  int ts[16], gs[16];
  int nt = list("PS_THREADS", "16,32", ts), ng = list("PS_GPUS", "0,1,2", gs);
  const char *fds = getenv("PS_FDS") ? getenv("PS_FDS") : "shared,own";
  for (int fi = 0; fi < 2; fi++) {
    ownfd = fi;
    if (!strstr(fds, fi ? "own" : "shared")) continue;
    for (int gi = 0; gi < ng; gi++) {
      G = gs[gi];
      if (G > ndev) continue;
      for (int d = 0; d < G; d++) {
        CK(cuCtxSetCurrent(ctx[d]));
        CK(cuMemAlloc(&dev[d], n / G + TASK));
      }
      for (int ti = 0; ti < nt; ti++) {
        T = ts[ti];
        if (T > 256 || T < (G ? G : 1)) continue;
        double best = 0, sum = 0;
        for (int rep = 0; rep < 5; rep++) {
          pthread_t th[256];
          pthread_barrier_init(&start, NULL, T + 1);
          pthread_barrier_init(&stop, NULL, T + 1);
          for (long i = 0; i < T; i++) pthread_create(&th[i], NULL, worker, (void *)i);
          pthread_barrier_wait(&start);
          double t0 = now();
          pthread_barrier_wait(&stop);
          double g = n / (now() - t0) / 1e9;
          pthread_barrier_wait(&stop);
          depth = 0;
          for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
          pthread_barrier_destroy(&start);
          pthread_barrier_destroy(&stop);
          if (g > best) best = g;
          sum += g;
        }
        printf("task %5zu KiB pool %d T=%3d GPUs=%d fds=%-6s best %6.2f GB/s, mean %6.2f\n", TASK >> 10, poolC, T, G, fi ? "own" : "shared", best, sum / 5);
        fflush(stdout);
      }
      for (int d = 0; d < G; d++) {
        CK(cuCtxSetCurrent(ctx[d]));
        CK(cuMemFree(dev[d]));
      }
    }
  }
  return 0;
}
