// alloc_probe times what a load pays before its first read and after its
// last: allocating and freeing gigabytes of device memory, as one
// cuMemAlloc and as virtual memory management pieces (cuMemCreate +
// cuMemMap + cuMemSetAccess per piece), on GPU 0 alone and on every GPU
// at once (one thread per GPU). Build on the GPU machine:
//   gcc -O2 -pthread alloc_probe.c -I/usr/local/cuda/include
//     -L/usr/local/cuda/lib64 -lcuda -o alloc_probe
//   ./alloc_probe [GiB per GPU, default 4]
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
  const char *s_; cuGetErrorName(r_, &s_); fprintf(stderr, "%s: %s\n", #x, s_); exit(1); } } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

typedef struct {
  int dev;
  size_t size, piece; // piece 0: one cuMemAlloc
  CUcontext ctx;
  double alloc_ms, free_ms;
} job;

static void *run(void *arg) {
  job *j = arg;
  CK(cuCtxSetCurrent(j->ctx));
  double t0 = now();
  if (j->piece == 0) {
    CUdeviceptr p;
    CK(cuMemAlloc(&p, j->size));
    j->alloc_ms = 1e3 * (now() - t0);
    t0 = now();
    CK(cuMemFree(p));
    j->free_ms = 1e3 * (now() - t0);
    return NULL;
  }
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = j->dev;
  CUmemAccessDesc acc = {0};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t n = j->size / j->piece;
  CUdeviceptr base;
  CK(cuMemAddressReserve(&base, j->size, 0, 0, 0));
  CUmemGenericAllocationHandle *h = calloc(n, sizeof *h);
  for (size_t i = 0; i < n; i++) {
    CK(cuMemCreate(&h[i], j->piece, &prop, 0));
    CK(cuMemMap(base + i * j->piece, j->piece, 0, h[i], 0));
    CK(cuMemSetAccess(base + i * j->piece, j->piece, &acc, 1));
  }
  j->alloc_ms = 1e3 * (now() - t0);
  t0 = now();
  CK(cuMemUnmap(base, j->size));
  for (size_t i = 0; i < n; i++) CK(cuMemRelease(h[i]));
  CK(cuMemAddressFree(base, j->size));
  j->free_ms = 1e3 * (now() - t0);
  free(h);
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void measure(job *jobs, int ndev, size_t size, size_t piece, const char *what) {
  enum { R = 5 };
  double a[R], f[R];
  for (int r = 0; r < R; r++) {
    pthread_t t[16];
    for (int d = 0; d < ndev; d++) {
      jobs[d].size = size, jobs[d].piece = piece;
      pthread_create(&t[d], NULL, run, &jobs[d]);
    }
    a[r] = f[r] = 0;
    for (int d = 0; d < ndev; d++) {
      pthread_join(t[d], NULL);
      if (jobs[d].alloc_ms > a[r]) a[r] = jobs[d].alloc_ms;
      if (jobs[d].free_ms > f[r]) f[r] = jobs[d].free_ms;
    }
  }
  qsort(a, R, sizeof a[0], cmp);
  qsort(f, R, sizeof f[0], cmp);
  printf("%-32s GPUs %d, %5.2f GiB each: alloc %7.2f ms (best %7.2f), free %7.2f ms (best %7.2f)\n",
         what, ndev, size / 1073741824.0, a[R / 2], a[0], f[R / 2], f[0]);
}

int main(int argc, char **argv) {
  double gib = argc > 1 ? atof(argv[1]) : 4;
  CK(cuInit(0));
  int ndev;
  CK(cuDeviceGetCount(&ndev));
  if (ndev > 16) ndev = 16;
  job jobs[16] = {0};
  for (int d = 0; d < ndev; d++) {
    CUdevice dev;
    CK(cuDeviceGet(&dev, d));
    CK(cuDevicePrimaryCtxRetain(&jobs[d].ctx, dev));
    jobs[d].dev = d;
  }
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  size_t gran;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  size_t size = (size_t)(gib * 1073741824.0) / gran * gran;
  printf("granularity %zu bytes\n", gran);
  size_t pieces[] = {0, size, 1u << 30, 256u << 20, 64u << 20};
  const char *names[] = {"cuMemAlloc", "VMM, one piece", "VMM, 1 GiB pieces", "VMM, 256 MiB pieces", "VMM, 64 MiB pieces"};
  for (int counts = 0; counts < 2; counts++) {
    int n = counts == 0 ? 1 : ndev;
    if (counts == 1 && ndev == 1) break;
    for (int i = 0; i < 5; i++) measure(jobs, n, size, pieces[i], names[i]);
  }
  return 0;
}
