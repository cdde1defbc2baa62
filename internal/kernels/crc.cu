// The CRC-32 of package kernels, in CUDA C; crc.ptx is made from this
// file by go generate, as unshuffle.ptx is from unshuffle.cu.
//
// A CRC without its start value and final inversion (a "raw" CRC) is
// linear: the raw CRC of a message is the XOR of the raw CRCs of its
// parts, each with the others' bytes zeroed, and zero bytes before a part
// change nothing. So a warp sums a segment of 256-byte rounds lane by
// lane, lane l taking the 8-byte word l of every round (reads of 256
// bytes a warp), and the segments' sums join by shifting each over the
// bytes after it. Polynomials are bit-reversed, as hash/crc32 keeps
// them: bit 31 is x^0.

#include "kernels.h"

#ifndef __NVCC__
#define __shared__ __attribute__((shared))
#define __device__ __attribute__((device))
#define __syncthreads() __nvvm_bar_sync(0)
#define __shfl_xor_sync(m, v, o) __nvvm_shfl_sync_bfly_i32(m, v, o, 0x1f)
#define atomicXor(p, v) __nvvm_atom_xor_gen_i((int *)(p), (int)(v))
#endif

#include "gf2.h"

// pows holds x^(8*2^j*s) for j < 32, s a segment's bytes.
struct pows {
	u32 v[32];
};

// crc32 XORs into *out the raw CRC of the nseg segments of rounds x 256
// bytes at base, each shifted over the segments after it (by pw). tabs
// holds T[k][v] (k < 8), the raw CRC of a round whose byte k is v and
// the rest zero, then K1[l] = x^(8(256-8l)) and K2[l] = x^(8(252-8l)),
// which take lane l's last word to the end of its segment. Warp w of the
// grid sums segments w, w+warps, ...
extern "C" __global__ void crc32(const u64 *base, u64 nseg, u32 rounds, const u32 *tabs, u32 poly, struct pows pw, u32 *out) {
	__shared__ u32 t[8 * 256];
	for (u32 i = TID_X; i < 8 * 256; i += NTID_X) {
		t[i] = tabs[i];
	}
	__syncthreads();
	u32 lane = TID_X & 31;
	u32 k1 = tabs[2048 + lane], k2 = tabs[2048 + 32 + lane];
	u64 warps = (u64)NCTA_X * (NTID_X >> 5);
	for (u64 s = (u64)CTA_X * (NTID_X >> 5) + (TID_X >> 5); s < nseg; s += warps) {
		const u64 *p = base + s * 32 * rounds + lane;
		u32 c = 0;
		u32 r = 0;
#pragma unroll 8
		for (; r + 1 < rounds; r++) {
			u64 w = p[(u64)r * 32];
			u32 lo = (u32)w ^ c, hi = (u32)(w >> 32);
			c = t[lo & 255] ^ t[256 + (lo >> 8 & 255)] ^ t[512 + (lo >> 16 & 255)] ^ t[768 + (lo >> 24)] ^
			    t[1024 + (hi & 255)] ^ t[1280 + (hi >> 8 & 255)] ^ t[1536 + (hi >> 16 & 255)] ^ t[1792 + (hi >> 24)];
		}
		// The last word: its low half (with the sum so far) is x^64 and
		// its high half x^32 before the word's end, then the bytes to
		// the segment's end.
		u64 w = p[(u64)r * 32];
		c = mulmod((u32)w ^ c, k1, poly) ^ mulmod((u32)(w >> 32), k2, poly);
		for (u32 o = 16; o != 0; o >>= 1) {
			c ^= (u32)__shfl_xor_sync(0xffffffffu, (int)c, o);
		}
		if (lane == 0) {
			// Shift over the nseg-1-s segments after this one.
			u64 e = nseg - 1 - s;
			for (u32 j = 0; e != 0; j++, e >>= 1) {
				if (e & 1) {
					c = mulmod(c, pw.v[j], poly);
				}
			}
			atomicXor(out, c);
		}
	}
}
