// What the kernels of package kernels share: the special registers under
// nvcc's names or clang's NVPTX builtins, and short integer types.

#ifdef __NVCC__
#define CTA_X blockIdx.x
#define CTA_Y blockIdx.y
#define NCTA_X gridDim.x
#define NTID_X blockDim.x
#define TID_X threadIdx.x
#else
#define __global__ __attribute__((global))
#define CTA_X __nvvm_read_ptx_sreg_ctaid_x()
#define CTA_Y __nvvm_read_ptx_sreg_ctaid_y()
#define NCTA_X __nvvm_read_ptx_sreg_nctaid_x()
#define NTID_X __nvvm_read_ptx_sreg_ntid_x()
#define TID_X __nvvm_read_ptx_sreg_tid_x()
#endif

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
