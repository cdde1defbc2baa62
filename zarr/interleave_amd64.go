package zarr

import "golang.org/x/sys/cpu"

// vectorInterleave: the byte shuffles of 2-, 4- and 8-byte elements
// use AVX2 (interleave_amd64.s), 10-30x the loops of blosc.go on a
// block in cache; tests turn it off to compare.
var vectorInterleave = cpu.X86.HasAVX2

// interleave4 writes the first elements of four planes of bytes into d,
// byte k of element i from r[k][i], 32 at once with AVX2 where the CPU
// has it, and returns how many it wrote (0 without AVX2).
func interleave4(d, r0, r1, r2, r3 []byte) int {
	blocks := len(r0) / 32
	if !vectorInterleave || blocks == 0 {
		return 0
	}
	n := 32 * blocks
	_, _, _, _ = d[4*n-1], r1[n-1], r2[n-1], r3[n-1] // bounds the assembly relies on
	interleave4AVX2(&d[0], &r0[0], &r1[0], &r2[0], &r3[0], blocks)
	return n
}

//go:noescape
func interleave4AVX2(dst, p0, p1, p2, p3 *byte, blocks int)

// deinterleave4 writes the bytes of the first elements of s into four
// planes, byte k of element i to r[k][i], 32 elements at once with AVX2
// where the CPU has it, and returns how many it wrote (0 without AVX2).
func deinterleave4(r0, r1, r2, r3, s []byte) int {
	blocks := len(r0) / 32
	if !vectorInterleave || blocks == 0 {
		return 0
	}
	n := 32 * blocks
	_, _, _, _ = s[4*n-1], r1[n-1], r2[n-1], r3[n-1] // bounds the assembly relies on
	deinterleave4AVX2(&r0[0], &r1[0], &r2[0], &r3[0], &s[0], blocks)
	return n
}

//go:noescape
func deinterleave4AVX2(p0, p1, p2, p3, src *byte, blocks int)

// interleave2 is interleave4 for 2-byte elements.
func interleave2(d, r0, r1 []byte) int {
	blocks := len(r0) / 32
	if !vectorInterleave || blocks == 0 {
		return 0
	}
	n := 32 * blocks
	_, _ = d[2*n-1], r1[n-1] // bounds the assembly relies on
	interleave2AVX2(&d[0], &r0[0], &r1[0], blocks)
	return n
}

// deinterleave2 is deinterleave4 for 2-byte elements.
func deinterleave2(r0, r1, s []byte) int {
	blocks := len(r0) / 32
	if !vectorInterleave || blocks == 0 {
		return 0
	}
	n := 32 * blocks
	_, _ = s[2*n-1], r1[n-1] // bounds the assembly relies on
	deinterleave2AVX2(&r0[0], &r1[0], &s[0], blocks)
	return n
}

//go:noescape
func interleave2AVX2(dst, p0, p1 *byte, blocks int)

//go:noescape
func deinterleave2AVX2(p0, p1, src *byte, blocks int)

// interleave8 is interleave4 for 8-byte elements, whose planes are
// src[k*n+i0:] (the caller's bounds: 8 planes of m bytes from i0).
func interleave8(d, src []byte, n, i0, m int) int {
	blocks := m / 32
	if !vectorInterleave || blocks == 0 {
		return 0
	}
	k := 32 * blocks
	_, _ = d[8*k-1], src[7*n+i0+k-1] // bounds the assembly relies on
	interleave8AVX2(&d[0], &src[i0], n, blocks)
	return k
}

//go:noescape
func interleave8AVX2(dst, p *byte, n, blocks int)

// deinterleave8 is deinterleave4 for 8-byte elements, whose planes are
// dst[k*n+i0:] (the caller's bounds: 8 planes of m bytes from i0).
func deinterleave8(dst []byte, n, i0 int, s []byte, m int) int {
	blocks := m / 32
	if !vectorInterleave || blocks == 0 {
		return 0
	}
	k := 32 * blocks
	_, _ = s[8*k-1], dst[7*n+i0+k-1] // bounds the assembly relies on
	deinterleave8AVX2(&dst[i0], n, &s[0], blocks)
	return k
}

//go:noescape
func deinterleave8AVX2(p *byte, n int, src *byte, blocks int)
