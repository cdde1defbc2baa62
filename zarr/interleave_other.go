//go:build !amd64

package zarr

// vectorInterleave is false: no vector code for this architecture.
var vectorInterleave = false

// interleave4 writes nothing (see the amd64 version) and returns 0.
func interleave4(d, r0, r1, r2, r3 []byte) int { return 0 }

// deinterleave4 writes nothing (see the amd64 version) and returns 0.
func deinterleave4(r0, r1, r2, r3, s []byte) int { return 0 }

// interleave2 writes nothing and returns 0.
func interleave2(d, r0, r1 []byte) int { return 0 }

// deinterleave2 writes nothing and returns 0.
func deinterleave2(r0, r1, s []byte) int { return 0 }

// interleave8 writes nothing and returns 0.
func interleave8(d, src []byte, n, i0, m int) int { return 0 }

// deinterleave8 writes nothing and returns 0.
func deinterleave8(dst []byte, n, i0 int, s []byte, m int) int { return 0 }

// prefetchLines does nothing (see the amd64 version).
func prefetchLines(p *byte, n int) {}
