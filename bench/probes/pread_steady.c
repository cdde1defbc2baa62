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
//   PS_MODES=pread,mmap how bytes reach the GPUs, each mode in turn:
//                       pread: into the bounce buffers, then copied (the
//                       bytes cross host memory three times: the kernel
//                       reads the page cache and writes the buffer, the
//                       DMA reads the buffer); mmap: the file mapped
//                       (MAP_SHARED|MAP_POPULATE) and registered
//                       (cuMemHostRegister, read-only) once per GPU count,
//                       outside the clock and timed apart, and each chunk
//                       copied from the mapping (one crossing: the DMA
//                       reads the page cache). Default pread.
//   PS_PART=k/N         move only part k of N of the file (the share that
//                       this probe's split over N GPUs gives GPU k), so
//                       that N processes each moving a part move the file
//                       once
//   PS_START_AT=S       with PS_SLOT_MS=D: start repetition r at Unix time
//                       S + r*D ms (processes given the same values run
//                       in step) and print each repetition's GB/s
// GPU g's share is [g*n/G, (g+1)*n/G) of the file (of the part), each cut
// moved down to a chunk boundary, for any G up to 8 (the shares once
// assumed G of 1, 2 or 4: at 3 GPUs the last share overran its
// allocation, CUDA_ERROR_INVALID_VALUE).
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
#include "probe.h"

static size_t TASK = (size_t)4 << 20; // PS_TASK_KIB

static const char *path;
static size_t n, part0, part1; // the file's size; the part moved (PS_PART)
static int T, G, ownfd, sharedfd, usemap;
static CUcontext ctx[8];
static CUdeviceptr dev[8];
static size_t bound[9]; // GPU g's share of the part: [bound[g], bound[g+1])
static char *map;       // the registered mapping of the part (PS_MODES=mmap)
static size_t mapoff;   // the file offset of map[0]: the part's start, down to a page
static size_t maplen;   // the mapping's length, whole pages
static pthread_barrier_t start, stop;
static int poolC;
typedef struct { char *buf[2]; } pair;
static pair *stack[256];
static int depth;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

// split sets bound[0..k] so that piece i of [lo, hi) in k pieces is
// [bound[i], bound[i+1]): the even split, each cut moved down to a
// multiple of TASK from lo, so that no piece is more than TASK smaller
// than the others, for any k.
static void split(size_t lo, size_t hi, int k, size_t *b) {
  for (int i = 0; i < k; i++) b[i] = lo + (size_t)((unsigned __int128)(hi - lo) * i / k) / TASK * TASK;
  b[k] = hi;
}

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
  long rank = id / ng, per = (T - g + ng - 1) / ng; // this thread's index among its GPU's threads, and their count
  size_t lo = bound[g], hi = bound[g + 1];
  CK(cuCtxSetCurrent(ctx[g]));
  pair own = {{NULL, NULL}}, *pr = &own;
  if (!usemap) {
    own.buf[0] = pinned(), own.buf[1] = pinned();
    if (poolC) push(&own); // the stack holds every thread's pair
  }
  CUstream s;
  CUevent ev[2];
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 2; i++) CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
  int fd = ownfd && !usemap ? open(path, O_RDONLY) : sharedfd;
  pthread_barrier_wait(&start);
  int cur = 0;
  size_t chunks = 0;
  for (size_t off = lo + rank * TASK; off < hi; off += per * TASK) {
    size_t len = off + TASK > hi ? hi - off : TASK;
    if (usemap) { // one crossing: the copy engine reads the page cache
      CK(cuMemcpyHtoDAsync(dev[g] + (off - lo), map + (off - mapoff), len, s));
      continue;
    }
    if (poolC && chunks % poolC == 0) pr = pop();
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
  if (fd != sharedfd) close(fd);
  for (int i = 0; i < 2; i++) {
    cuEventDestroy(ev[i]);
    if (own.buf[i]) {
      cuMemHostUnregister(own.buf[i]);
      free(own.buf[i]);
    }
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

// waitUntil sleeps until Unix time t.
static void waitUntil(double t) {
  struct timespec w;
  clock_gettime(CLOCK_REALTIME, &w);
  double left = t - (w.tv_sec + w.tv_nsec / 1e9);
  if (left < -0.001) fprintf(stderr, "pread_steady: a repetition starts %.0f ms after its PS_START_AT/PS_SLOT_MS time\n", -left * 1e3);
  if (left <= 0) return;
  w.tv_sec = (time_t)left;
  w.tv_nsec = (long)((left - w.tv_sec) * 1e9);
  nanosleep(&w, NULL);
}

// mapFile maps the file and registers the mapping, printing how long each
// step took.
static void mapFile(void) {
  size_t page = sysconf(_SC_PAGESIZE);
  mapoff = part0 / page * page;
  size_t len = maplen = (part1 - mapoff + page - 1) / page * page; // the last page is mapped whole
  double t0 = now();
  map = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, sharedfd, mapoff);
  if (map == MAP_FAILED) { perror("mmap"); exit(1); }
  double t1 = now();
  CK(cuCtxSetCurrent(ctx[0]));
  CK(cuMemHostRegister(map, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY));
  double t2 = now();
  printf("GPUs=%d mmap+populate %.1f ms, cuMemHostRegister %.1f ms (%.1f GB/s) of %.2f GB\n", G, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
         len / (t2 - t1) / 1e9, len / 1e9);
}

static void unmapFile(void) {
  double t0 = now();
  CK(cuCtxSetCurrent(ctx[0]));
  CK(cuMemHostUnregister(map));
  munmap(map, maplen);
  printf("GPUs=%d cuMemHostUnregister and munmap %.1f ms\n", G, (now() - t0) * 1e3);
  map = NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: pread_steady FILE\n"); return 2; }
  path = argv[1];
  if (getenv("PS_TASK_KIB")) TASK = (size_t)atoi(getenv("PS_TASK_KIB")) << 10;
  if (getenv("PS_POOL")) poolC = atoi(getenv("PS_POOL"));
  if (TASK == 0 || poolC < 0) { fprintf(stderr, "PS_TASK_KIB and PS_POOL: want positive sizes\n"); return 2; }
  sharedfd = open(path, O_RDONLY);
  struct stat st;
  if (sharedfd < 0 || fstat(sharedfd, &st)) { perror(path); return 1; }
  n = st.st_size;
  part0 = 0, part1 = n;
  if (getenv("PS_PART")) {
    int k, of;
    size_t b[9];
    if (sscanf(getenv("PS_PART"), "%d/%d", &k, &of) != 2 || of < 1 || of > 8 || k < 0 || k >= of) {
      fprintf(stderr, "PS_PART=%s: want k/N with 0 <= k < N <= 8\n", getenv("PS_PART"));
      return 2;
    }
    split(0, n, of, b);
    part0 = b[k], part1 = b[k + 1];
  }
  double startAt = getenv("PS_START_AT") ? atof(getenv("PS_START_AT")) : 0;
  double slot = getenv("PS_SLOT_MS") ? atof(getenv("PS_SLOT_MS")) / 1e3 : 0;
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
  const char *modes = getenv("PS_MODES") ? getenv("PS_MODES") : "pread";
  int rep0 = 0; // repetitions so far, for PS_START_AT
  for (int mi = 0; mi < 2; mi++) {
    usemap = mi;
    if (!strstr(modes, mi ? "mmap" : "pread")) continue;
    for (int fi = 0; fi < 2; fi++) {
      ownfd = fi;
      if (usemap ? fi : !strstr(fds, fi ? "own" : "shared")) continue; // mmap reads no descriptor: once
      for (int gi = 0; gi < ng; gi++) {
        G = gs[gi];
        if (G > ndev || G < 0 || (usemap && G == 0)) continue;
        split(part0, part1, G ? G : 1, bound);
        for (int d = 0; d < G; d++) {
          CK(cuCtxSetCurrent(ctx[d]));
          CK(cuMemAlloc(&dev[d], bound[d + 1] > bound[d] ? bound[d + 1] - bound[d] : 1));
        }
        if (usemap) mapFile();
        for (int ti = 0; ti < nt; ti++) {
          T = ts[ti];
          if (T > 256 || T < (G ? G : 1)) continue;
          double best = 0, sum = 0, reps[5];
          for (int rep = 0; rep < 5; rep++) {
            pthread_t th[256];
            pthread_barrier_init(&start, NULL, T + 1);
            pthread_barrier_init(&stop, NULL, T + 1);
            for (long i = 0; i < T; i++) pthread_create(&th[i], NULL, worker, (void *)i);
            if (slot > 0) waitUntil(startAt + rep0++ * slot);
            pthread_barrier_wait(&start);
            double t0 = now();
            pthread_barrier_wait(&stop);
            double g = (part1 - part0) / (now() - t0) / 1e9;
            pthread_barrier_wait(&stop);
            depth = 0;
            for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
            pthread_barrier_destroy(&start);
            pthread_barrier_destroy(&stop);
            if (g > best) best = g;
            sum += g;
            reps[rep] = g;
          }
          printf("task %5zu KiB pool %d T=%3d GPUs=%d fds=%-6s mode=%-5s best %6.2f GB/s, mean %6.2f", TASK >> 10, poolC, T, G,
                 usemap ? "-" : fi ? "own" : "shared", usemap ? "mmap" : "pread", best, sum / 5);
          if (slot > 0)
            for (int r = 0; r < 5; r++) printf("%s%.2f", r ? " " : "; each: ", reps[r]);
          printf("\n");
          fflush(stdout);
        }
        if (usemap) unmapFile();
        for (int d = 0; d < G; d++) {
          CK(cuCtxSetCurrent(ctx[d]));
          CK(cuMemFree(dev[d]));
        }
      }
    }
  }
  return 0;
}
