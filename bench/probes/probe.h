// probe.h: what the CUDA probes of this folder share: CK, which exits
// with the driver's error name when a call fails, and now(), a monotonic
// clock in seconds.
#ifndef KVIK_PROBE_H
#define KVIK_PROBE_H
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_; \
  cuGetErrorName(r_, &s_); fprintf(stderr, "%s: %s\n", #x, s_); exit(1); } } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
#endif
