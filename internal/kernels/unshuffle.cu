// Kernels of package kernels, in CUDA C. unshuffle.ptx is made from this
// file by go generate (clang's NVPTX back end; nvcc -ptx makes an
// equivalent one) and embedded: the driver compiles the PTX for the GPU
// it runs on when the module is loaded.

#include "kernels.h"

// put stores b at byte p of the output: rows of width bytes, dpitch
// apart, from dst.
static __attribute__((device)) inline void put(u8 *dst, u32 width, u64 dpitch, u32 p, u8 b) {
	dst[(u64)(p / width) * dpitch + p % width] = b;
}

// unshuffle undoes Blosc's byte shuffle of the n bytes at src, blocks of
// bs bytes (the last may be shorter) of ts-byte elements: within a block
// of len bytes, byte j of element i lies at j*(len/ts)+i, and the len%ts
// bytes after the whole elements are as they were. The unshuffled bytes
// go to dst in rows of width bytes, dpitch apart (a chunk's rows in a
// region; width n for one run). Block k of the grid's blocks is part
// k%parts of Blosc block k/parts, a thread per element.
extern "C" __global__ void unshuffle(const u8 *src, u8 *dst, u32 n, u32 bs, u32 ts, u32 parts, u32 width, u64 dpitch) {
	u32 block = CTA_X / parts;
	u32 i = CTA_X % parts * NTID_X + TID_X;
	u32 start = block * bs;
	if (start >= n) {
		return;
	}
	u32 len = n - start < bs ? n - start : bs;
	u32 neb = len / ts;
	if (i < neb) {
		u32 q = start + i * ts;
		for (u32 j = 0; j < ts; j++) {
			put(dst, width, dpitch, q + j, src[start + j * neb + i]);
		}
	}
	if (i < len - neb * ts) {
		u32 p = start + neb * ts + i;
		put(dst, width, dpitch, p, src[p]);
	}
}
