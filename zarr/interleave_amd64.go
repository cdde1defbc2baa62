package zarr

import "golang.org/x/sys/cpu"

// vectorInterleave: the byte shuffles of 2-, 4- and 8-byte elements
// use AVX2 (interleave_amd64.s), 4-30x the loops of blosc.go on a block
// in cache; tests turn it off to compare. Each wrapper below checks the
// last byte the assembly touches before calling it.
var vectorInterleave = cpu.X86.HasAVX2

// vectorLen returns how many of n elements the vector code takes, 32
// at a time: a multiple of 32, or 0 where it is off.
func vectorLen(n int) int {
	if !vectorInterleave {
		return 0
	}
	return n &^ 31
}

// interleave4 writes the first elements of four planes of bytes into d,
// byte k of element i from r[k][i], 32 at once with AVX2 where the CPU
// has it, and returns how many it wrote (0 without AVX2).
func interleave4(d, r0, r1, r2, r3 []byte) int {
	n := vectorLen(len(r0))
	if n > 0 {
		_, _, _, _ = d[4*n-1], r1[n-1], r2[n-1], r3[n-1] // bounds the assembly relies on
		interleave4AVX2(&d[0], &r0[0], &r1[0], &r2[0], &r3[0], n/32)
	}
	return n
}

// deinterleave4 writes the bytes of the first elements of s into four
// planes, byte k of element i to r[k][i], 32 elements at once with AVX2
// where the CPU has it, and returns how many it wrote (0 without AVX2).
func deinterleave4(r0, r1, r2, r3, s []byte) int {
	n := vectorLen(len(r0))
	if n > 0 {
		_, _, _, _ = s[4*n-1], r1[n-1], r2[n-1], r3[n-1]
		deinterleave4AVX2(&r0[0], &r1[0], &r2[0], &r3[0], &s[0], n/32)
	}
	return n
}

// interleave2 is interleave4 for 2-byte elements.
func interleave2(d, r0, r1 []byte) int {
	n := vectorLen(len(r0))
	if n > 0 {
		_, _ = d[2*n-1], r1[n-1]
		interleave2AVX2(&d[0], &r0[0], &r1[0], n/32)
	}
	return n
}

// deinterleave2 is deinterleave4 for 2-byte elements.
func deinterleave2(r0, r1, s []byte) int {
	n := vectorLen(len(r0))
	if n > 0 {
		_, _ = s[2*n-1], r1[n-1]
		deinterleave2AVX2(&r0[0], &r1[0], &s[0], n/32)
	}
	return n
}

// interleave8 is interleave4 for 8-byte elements, whose m bytes of
// plane k are src[k*n+i0:].
func interleave8(d, src []byte, n, i0, m int) int {
	k := vectorLen(m)
	if k > 0 {
		_, _ = d[8*k-1], src[7*n+i0+k-1]
		interleave8AVX2(&d[0], &src[i0], n, k/32)
	}
	return k
}

// deinterleave8 is deinterleave4 for 8-byte elements, whose m bytes of
// plane k are dst[k*n+i0:].
func deinterleave8(dst []byte, n, i0 int, s []byte, m int) int {
	k := vectorLen(m)
	if k > 0 {
		_, _ = s[8*k-1], dst[7*n+i0+k-1]
		deinterleave8AVX2(&dst[i0], n, &s[0], k/32)
	}
	return k
}

// The routines of interleave_amd64.s, on blocks of 32 elements.

//go:noescape
func interleave4AVX2(dst, p0, p1, p2, p3 *byte, blocks int)

//go:noescape
func deinterleave4AVX2(p0, p1, p2, p3, src *byte, blocks int)

//go:noescape
func interleave2AVX2(dst, p0, p1 *byte, blocks int)

//go:noescape
func deinterleave2AVX2(p0, p1, src *byte, blocks int)

//go:noescape
func interleave8AVX2(dst, p *byte, n, blocks int)

//go:noescape
func deinterleave8AVX2(p *byte, n int, src *byte, blocks int)

// prefetchLines asks for the cache lines of the n bytes at p to be
// fetched into the caches (PREFETCHT0, which never faults); it returns
// at once.
//
//go:noescape
func prefetchLines(p *byte, n int)
