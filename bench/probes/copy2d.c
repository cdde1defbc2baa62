// copy2d measures the copies a Zarr device read makes (issue 40): chunks
// of W bytes x H rows in pinned host memory, each copied into its place
// in a device array whose rows are P bytes apart, three ways:
//   2d:   one cuMemcpy2DAsync per chunk, host to device (the DMA engine
//         moves W-byte rows);
//   flat: one cuMemcpyHtoDAsync per chunk into a contiguous device buffer
//         (the PCIe ceiling of the same bytes, nothing placed);
//   d2d:  flat, then one device-to-device cuMemcpy2DAsync per chunk from
//         there into place (the placing moved into device memory).
// S streams take the chunks in turn. 1 GiB moved per repetition, best of 5.
//   C2_W=64,128,256,512,2048,8192   row widths; H = 1 MiB / W rows per chunk
//   C2_STREAMS=1,2,4
// Build: gcc -O2 copy2d.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o copy2d
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "probe.h"


enum { CHUNK = 1 << 20, TOTAL = 1 << 30, HOSTBUF = 64 << 20 };

int main(void) {
  const char *ws = getenv("C2_W") ? getenv("C2_W") : "64,128,256,512,2048,8192";
  const char *ss = getenv("C2_STREAMS") ? getenv("C2_STREAMS") : "1,2,4";
  CUdevice d;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, d));
  CK(cuCtxSetCurrent(ctx));
  void *host;
  CK(cuMemHostAlloc(&host, HOSTBUF, 0));
  memset(host, 7, HOSTBUF);
  CUdeviceptr arr, flat;
  CK(cuMemAlloc(&arr, TOTAL));
  CK(cuMemAlloc(&flat, TOTAL));
  CUstream st[8];
  for (int i = 0; i < 8; i++) CK(cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING));
  const size_t P = 64 << 10; // a 16384-float32-wide array
  for (const char *w = ws; *w;) {
    size_t W = strtoul(w, (char **)&w, 10);
    if (*w == ',') w++;
    size_t H = CHUNK / W, across = P / W, nchunks = TOTAL / CHUNK;
    for (const char *s = ss; *s;) {
      int S = strtol(s, (char **)&s, 10);
      if (*s == ',') s++;
      for (int mode = 0; mode < 3; mode++) {
        double best = 1e9;
        for (int rep = 0; rep < 6; rep++) {
          CK(cuCtxSynchronize());
          double t0 = now();
          for (size_t c = 0; c < nchunks; c++) {
            CUstream q = st[c % S];
            char *src = (char *)host + (c * CHUNK) % HOSTBUF;
            size_t row = c / across, col = c % across;
            CUdeviceptr dst = arr + row * H * P + col * W;
            CUDA_MEMCPY2D m = {0};
            m.WidthInBytes = W;
            m.Height = H;
            m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            m.dstDevice = dst;
            m.dstPitch = P;
            if (mode == 0) {
              m.srcMemoryType = CU_MEMORYTYPE_HOST;
              m.srcHost = src;
              m.srcPitch = W;
              CK(cuMemcpy2DAsync(&m, q));
            } else {
              CK(cuMemcpyHtoDAsync(flat + c * CHUNK, src, CHUNK, q));
              if (mode == 2) {
                m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
                m.srcDevice = flat + c * CHUNK;
                m.srcPitch = W;
                CK(cuMemcpy2DAsync(&m, q));
              }
            }
          }
          CK(cuCtxSynchronize());
          double t = now() - t0;
          if (rep > 0 && t < best) best = t;
        }
        printf("W=%5zu streams=%d %-4s %6.2f GB/s\n", W, S, mode == 0 ? "2d" : mode == 1 ? "flat" : "d2d", TOTAL / best / 1e9);
      }
    }
  }
  return 0;
}
