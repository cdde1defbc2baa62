// A stand-in for the CUDA driver, for testing bench/probes on a machine
// without a GPU (probes_test.go): device memory is host memory, a copy
// out of an allocation's bounds fails as the driver's does
// (CUDA_ERROR_INVALID_VALUE), and cuMemFree prints each allocation's size
// and the CRC-32 (IEEE) of its bytes, so that a test can check where
// every byte went. FAKE_GPUS sets the device count (default 4).
#include "cuda.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ndev = 4;
static struct { char *p; size_t n; } al[64];
static int nal;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread long cur = -1;

static unsigned crc32(const unsigned char *p, size_t n) {
  unsigned c = ~0u;
  while (n--) {
    c ^= *p++;
    for (int k = 0; k < 8; k++) c = c >> 1 ^ (0xEDB88320u & -(c & 1));
  }
  return ~c;
}

CUresult cuGetErrorName(CUresult r, const char **s) { *s = r == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN"; return 0; }
CUresult cuInit(unsigned f) { (void)f; if (getenv("FAKE_GPUS")) ndev = atoi(getenv("FAKE_GPUS")); return 0; }
CUresult cuDeviceGetCount(int *n) { *n = ndev; return 0; }
CUresult cuDeviceGet(CUdevice *d, int i) { *d = i; return i < ndev ? 0 : 1; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { *c = (void *)(long)(d + 1); return 0; }
CUresult cuCtxSetCurrent(CUcontext c) { cur = (long)c; return 0; }

CUresult cuMemAlloc(CUdeviceptr *p, size_t n) {
  if (n == 0 || cur < 0) return 1;
  char *b = calloc(1, n);
  pthread_mutex_lock(&mu);
  al[nal].p = b, al[nal++].n = n;
  pthread_mutex_unlock(&mu);
  *p = (CUdeviceptr)b;
  return 0;
}

CUresult cuMemFree(CUdeviceptr p) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nal; i++)
    if (al[i].p == (char *)p) {
      fprintf(stderr, "fake: free %zu bytes crc %08x\n", al[i].n, crc32((unsigned char *)al[i].p, al[i].n));
      free(al[i].p);
      al[i] = al[--nal];
      pthread_mutex_unlock(&mu);
      return 0;
    }
  pthread_mutex_unlock(&mu);
  return 1;
}

CUresult cuMemHostRegister(void *p, size_t n, unsigned f) { (void)p, (void)n, (void)f; return cur < 0; }
CUresult cuMemHostUnregister(void *p) { (void)p; return 0; }
CUresult cuStreamCreate(CUstream *s, unsigned f) { (void)f; *s = malloc(1); return 0; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return 0; }
CUresult cuStreamDestroy(CUstream s) { free(s); return 0; }
CUresult cuEventCreate(CUevent *e, unsigned f) { (void)f; *e = malloc(1); return 0; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e, (void)s; return 0; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return 0; }
CUresult cuEventDestroy(CUevent e) { free(e); return 0; }

CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void *src, size_t n, CUstream s) {
  (void)s;
  char *p = (char *)d;
  int ok = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nal; i++)
    if (p >= al[i].p && p + n <= al[i].p + al[i].n) ok = 1;
  pthread_mutex_unlock(&mu);
  if (!ok) return 1;
  memcpy(p, src, n);
  return 0;
}
