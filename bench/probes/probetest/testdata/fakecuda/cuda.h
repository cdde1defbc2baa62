/* A stand-in for the CUDA driver API (the part bench/probes uses), for
   testing the probes without CUDA: see fakecuda.c. */
#include <stddef.h>
typedef int CUresult; typedef int CUdevice; typedef void *CUcontext; typedef void *CUstream; typedef void *CUevent;
typedef unsigned long long CUdeviceptr;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DISABLE_TIMING 2
#define CU_MEMHOSTREGISTER_PORTABLE 1
#define CU_MEMHOSTREGISTER_DEVICEMAP 2
#define CU_MEMHOSTREGISTER_READ_ONLY 8
CUresult cuGetErrorName(CUresult, const char **);
CUresult cuInit(unsigned);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc(CUdeviceptr *, size_t);
CUresult cuMemFree(CUdeviceptr);
CUresult cuMemHostRegister(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamDestroy(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventDestroy(CUevent);
CUresult cuMemcpyHtoDAsync(CUdeviceptr, const void *, size_t, CUstream);
