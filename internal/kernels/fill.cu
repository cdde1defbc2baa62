// The fill-value scan of package kernels, in CUDA C; fill.ptx is made
// from this file by go generate, as unshuffle.ptx is from unshuffle.cu.

#include "kernels.h"

// differs sets flags[c] to 1 where chunk c, the n bytes at base +
// offs[c], holds a byte that is not the fill value's at its place (byte
// i against fill[i % es]), and leaves it as it is elsewhere. Block y of
// the grid scans chunk y, its threads striding over it together; a
// thread stops at the first byte that differs.
extern "C" __global__ void differs(const u8 *base, const u64 *offs, u64 n, const u8 *fill, u32 es, u32 *flags) {
	u32 c = CTA_Y;
	const u8 *p = base + offs[c];
	u64 step = (u64)NCTA_X * NTID_X;
	u64 i = (u64)CTA_X * NTID_X + TID_X;
	if (i >= n) {
		return;
	}
	// The place in the fill value moves by step % es a stride, so that
	// no 64-bit division is made per byte.
	u32 j = (u32)(i % es), d = (u32)(step % es);
	for (; i < n; i += step) {
		if (p[i] != fill[j]) {
			flags[c] = 1;
			return;
		}
		j += d;
		if (j >= es) {
			j -= es;
		}
	}
}
