#include "textflag.h"

// func interleave4AVX2(dst, p0, p1, p2, p3 *byte, blocks int)
//
// For each block of 32 elements: byte k of element i is plane k's byte
// i. The bytes of planes 0-1 and 2-3 are interleaved (words: bytes 0-1
// and 2-3 of each element), those words interleaved (elements), then
// the 128-bit lanes put in order, since AVX2's unpacks work per lane.
TEXT ·interleave4AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), AX
	MOVQ p1+16(FP), BX
	MOVQ p2+24(FP), CX
	MOVQ p3+32(FP), DX
	MOVQ blocks+40(FP), SI
	XORQ R8, R8

loop:
	TESTQ SI, SI
	JZ    done
	VMOVDQU (AX)(R8*1), Y0
	VMOVDQU (BX)(R8*1), Y1
	VMOVDQU (CX)(R8*1), Y2
	VMOVDQU (DX)(R8*1), Y3
	VPUNPCKLBW Y1, Y0, Y4 // lanes: elements 0-7 | 16-23, bytes 0-1
	VPUNPCKHBW Y1, Y0, Y5 // 8-15 | 24-31
	VPUNPCKLBW Y3, Y2, Y6 // bytes 2-3
	VPUNPCKHBW Y3, Y2, Y7
	VPUNPCKLWD Y6, Y4, Y0 // elements 0-3 | 16-19
	VPUNPCKHWD Y6, Y4, Y1 // 4-7 | 20-23
	VPUNPCKLWD Y7, Y5, Y2 // 8-11 | 24-27
	VPUNPCKHWD Y7, Y5, Y3 // 12-15 | 28-31
	VPERM2I128 $0x20, Y1, Y0, Y4 // 0-7
	VPERM2I128 $0x20, Y3, Y2, Y5 // 8-15
	VPERM2I128 $0x31, Y1, Y0, Y6 // 16-23
	VPERM2I128 $0x31, Y3, Y2, Y7 // 24-31
	VMOVDQU Y4, (DI)
	VMOVDQU Y5, 32(DI)
	VMOVDQU Y6, 64(DI)
	VMOVDQU Y7, 96(DI)
	ADDQ  $32, R8
	ADDQ  $128, DI
	DECQ  SI
	JMP   loop

done:
	VZEROUPPER
	RET

// Within each 128-bit lane of four elements: byte 0 of each, then byte
// 1, 2 and 3 (a dword per byte of the element).
DATA lanePlanes<>+0(SB)/8, $0x0d0905010c080400
DATA lanePlanes<>+8(SB)/8, $0x0f0b07030e0a0602
DATA lanePlanes<>+16(SB)/8, $0x0d0905010c080400
DATA lanePlanes<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL lanePlanes<>(SB), RODATA|NOPTR, $32

// Dwords 0, 4, 1, 5, 2, 6, 3, 7: the two lanes' dwords of each byte side
// by side (a qword per byte of eight elements).
DATA pairLanes<>+0(SB)/8, $0x0000000400000000
DATA pairLanes<>+8(SB)/8, $0x0000000500000001
DATA pairLanes<>+16(SB)/8, $0x0000000600000002
DATA pairLanes<>+24(SB)/8, $0x0000000700000003
GLOBL pairLanes<>(SB), RODATA|NOPTR, $32

// func deinterleave4AVX2(p0, p1, p2, p3, src *byte, blocks int)
//
// The inverse of interleave4AVX2: for each block of 32 elements of src,
// byte k of element i goes to plane k's byte i. Each register of eight
// elements is sorted into a qword per byte, then the four registers'
// qwords transposed.
TEXT ·deinterleave4AVX2(SB), NOSPLIT, $0-48
	MOVQ p0+0(FP), AX
	MOVQ p1+8(FP), BX
	MOVQ p2+16(FP), CX
	MOVQ p3+24(FP), DX
	MOVQ src+32(FP), SI
	MOVQ blocks+40(FP), DI
	VMOVDQU lanePlanes<>(SB), Y14
	VMOVDQU pairLanes<>(SB), Y15
	XORQ R8, R8

dloop:
	TESTQ DI, DI
	JZ    ddone
	VMOVDQU (SI), Y0   // elements 0-7
	VMOVDQU 32(SI), Y1 // 8-15
	VMOVDQU 64(SI), Y2 // 16-23
	VMOVDQU 96(SI), Y3 // 24-31
	VPSHUFB Y14, Y0, Y0
	VPSHUFB Y14, Y1, Y1
	VPSHUFB Y14, Y2, Y2
	VPSHUFB Y14, Y3, Y3
	VPERMD  Y0, Y15, Y0 // qword k: byte k of elements 0-7
	VPERMD  Y1, Y15, Y1
	VPERMD  Y2, Y15, Y2
	VPERMD  Y3, Y15, Y3
	VPUNPCKLQDQ Y1, Y0, Y4 // bytes 0 | 2 of elements 0-15
	VPUNPCKHQDQ Y1, Y0, Y5 // bytes 1 | 3
	VPUNPCKLQDQ Y3, Y2, Y6 // bytes 0 | 2 of elements 16-31
	VPUNPCKHQDQ Y3, Y2, Y7 // bytes 1 | 3
	VPERM2I128 $0x20, Y6, Y4, Y0
	VPERM2I128 $0x20, Y7, Y5, Y1
	VPERM2I128 $0x31, Y6, Y4, Y2
	VPERM2I128 $0x31, Y7, Y5, Y3
	VMOVDQU Y0, (AX)(R8*1)
	VMOVDQU Y1, (BX)(R8*1)
	VMOVDQU Y2, (CX)(R8*1)
	VMOVDQU Y3, (DX)(R8*1)
	ADDQ  $32, R8
	ADDQ  $128, SI
	DECQ  DI
	JMP   dloop

ddone:
	VZEROUPPER
	RET

// func interleave2AVX2(dst, p0, p1 *byte, blocks int)
//
// interleave4AVX2 for 2-byte elements: the two planes' bytes
// interleaved, then the lanes put in order.
TEXT ·interleave2AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), AX
	MOVQ p1+16(FP), BX
	MOVQ blocks+24(FP), SI
	XORQ R8, R8

loop2:
	TESTQ SI, SI
	JZ    done2
	VMOVDQU (AX)(R8*1), Y0
	VMOVDQU (BX)(R8*1), Y1
	VPUNPCKLBW Y1, Y0, Y2 // elements 0-7 | 16-23
	VPUNPCKHBW Y1, Y0, Y3 // 8-15 | 24-31
	VPERM2I128 $0x20, Y3, Y2, Y4 // 0-15
	VPERM2I128 $0x31, Y3, Y2, Y5 // 16-31
	VMOVDQU Y4, (DI)
	VMOVDQU Y5, 32(DI)
	ADDQ  $32, R8
	ADDQ  $64, DI
	DECQ  SI
	JMP   loop2

done2:
	VZEROUPPER
	RET

// Within each 128-bit lane of eight elements: byte 0 of each, then
// byte 1 (a qword per byte of the element).
DATA lanePlanes2<>+0(SB)/8, $0x0e0c0a0806040200
DATA lanePlanes2<>+8(SB)/8, $0x0f0d0b0907050301
DATA lanePlanes2<>+16(SB)/8, $0x0e0c0a0806040200
DATA lanePlanes2<>+24(SB)/8, $0x0f0d0b0907050301
GLOBL lanePlanes2<>(SB), RODATA|NOPTR, $32

// func deinterleave2AVX2(p0, p1, src *byte, blocks int)
//
// The inverse of interleave2AVX2: each register of 16 elements sorted
// into a qword per byte and lane, the qwords of each byte side by side
// (VPERMQ 0, 2, 1, 3), then the two registers' halves paired.
TEXT ·deinterleave2AVX2(SB), NOSPLIT, $0-32
	MOVQ p0+0(FP), AX
	MOVQ p1+8(FP), BX
	MOVQ src+16(FP), SI
	MOVQ blocks+24(FP), DI
	VMOVDQU lanePlanes2<>(SB), Y14
	XORQ R8, R8

dloop2:
	TESTQ DI, DI
	JZ    ddone2
	VMOVDQU (SI), Y0   // elements 0-15
	VMOVDQU 32(SI), Y1 // 16-31
	VPSHUFB Y14, Y0, Y0
	VPSHUFB Y14, Y1, Y1
	VPERMQ  $0xd8, Y0, Y0 // byte 0 of 0-15 | byte 1 of 0-15
	VPERMQ  $0xd8, Y1, Y1 // the same of 16-31
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	VMOVDQU Y2, (AX)(R8*1)
	VMOVDQU Y3, (BX)(R8*1)
	ADDQ  $32, R8
	ADDQ  $64, SI
	DECQ  DI
	JMP   dloop2

ddone2:
	VZEROUPPER
	RET

// func interleave8AVX2(dst, p *byte, n, blocks int)
//
// interleave4AVX2 for 8-byte elements, from the planes p, p+n, ...
// p+7n: bytes of plane pairs interleaved (words), then words (dwords),
// then dwords (elements), then the lanes put in order.
TEXT ·interleave8AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p+8(FP), AX
	MOVQ n+16(FP), BX
	MOVQ blocks+24(FP), SI
	LEAQ (BX)(BX*2), CX // 3n
	LEAQ (AX)(BX*4), DX // plane 4

loop8:
	TESTQ SI, SI
	JZ    done8
	VMOVDQU (AX), Y0
	VMOVDQU (AX)(BX*1), Y1
	VMOVDQU (AX)(BX*2), Y2
	VMOVDQU (AX)(CX*1), Y3
	VMOVDQU (DX), Y4
	VMOVDQU (DX)(BX*1), Y5
	VMOVDQU (DX)(BX*2), Y6
	VMOVDQU (DX)(CX*1), Y7
	VPUNPCKLBW Y1, Y0, Y8  // elements 0-7 | 16-23, bytes 0-1
	VPUNPCKHBW Y1, Y0, Y9  // 8-15 | 24-31
	VPUNPCKLBW Y3, Y2, Y10 // bytes 2-3
	VPUNPCKHBW Y3, Y2, Y11
	VPUNPCKLBW Y5, Y4, Y12 // bytes 4-5
	VPUNPCKHBW Y5, Y4, Y13
	VPUNPCKLBW Y7, Y6, Y14 // bytes 6-7
	VPUNPCKHBW Y7, Y6, Y15
	VPUNPCKLWD Y10, Y8, Y0  // elements 0-3 | 16-19, bytes 0-3
	VPUNPCKHWD Y10, Y8, Y1  // 4-7 | 20-23
	VPUNPCKLWD Y11, Y9, Y2  // 8-11 | 24-27
	VPUNPCKHWD Y11, Y9, Y3  // 12-15 | 28-31
	VPUNPCKLWD Y14, Y12, Y4 // the same, bytes 4-7
	VPUNPCKHWD Y14, Y12, Y5
	VPUNPCKLWD Y15, Y13, Y6
	VPUNPCKHWD Y15, Y13, Y7
	VPUNPCKLDQ Y4, Y0, Y8  // elements 0-1 | 16-17
	VPUNPCKHDQ Y4, Y0, Y9  // 2-3 | 18-19
	VPUNPCKLDQ Y5, Y1, Y10 // 4-5 | 20-21
	VPUNPCKHDQ Y5, Y1, Y11 // 6-7 | 22-23
	VPUNPCKLDQ Y6, Y2, Y12 // 8-9 | 24-25
	VPUNPCKHDQ Y6, Y2, Y13 // 10-11 | 26-27
	VPUNPCKLDQ Y7, Y3, Y14 // 12-13 | 28-29
	VPUNPCKHDQ Y7, Y3, Y15 // 14-15 | 30-31
	VPERM2I128 $0x20, Y9, Y8, Y0
	VPERM2I128 $0x20, Y11, Y10, Y1
	VPERM2I128 $0x20, Y13, Y12, Y2
	VPERM2I128 $0x20, Y15, Y14, Y3
	VPERM2I128 $0x31, Y9, Y8, Y4
	VPERM2I128 $0x31, Y11, Y10, Y5
	VPERM2I128 $0x31, Y13, Y12, Y6
	VPERM2I128 $0x31, Y15, Y14, Y7
	VMOVDQU Y0, (DI)    // elements 0-3
	VMOVDQU Y1, 32(DI)  // 4-7
	VMOVDQU Y2, 64(DI)  // 8-11
	VMOVDQU Y3, 96(DI)  // 12-15
	VMOVDQU Y4, 128(DI) // 16-19
	VMOVDQU Y5, 160(DI)
	VMOVDQU Y6, 192(DI)
	VMOVDQU Y7, 224(DI)
	ADDQ  $32, AX
	ADDQ  $32, DX
	ADDQ  $256, DI
	DECQ  SI
	JMP   loop8

done8:
	VZEROUPPER
	RET

// Dwords 0, 2, 4, 6, 1, 3, 5, 7: the low halves of four 8-byte elements
// in the low lane, their high halves in the high one.
DATA halves<>+0(SB)/8, $0x0000000200000000
DATA halves<>+8(SB)/8, $0x0000000600000004
DATA halves<>+16(SB)/8, $0x0000000300000001
DATA halves<>+24(SB)/8, $0x0000000700000005
GLOBL halves<>(SB), RODATA|NOPTR, $32

// func deinterleave8AVX2(p *byte, n int, src *byte, blocks int)
//
// The inverse of interleave8AVX2: each register of four elements sorted
// into a dword per byte (their halves split between the lanes, then
// each lane's bytes sorted as for 4-byte elements), then the eight
// registers' dwords transposed.
TEXT ·deinterleave8AVX2(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), BX
	MOVQ src+16(FP), SI
	MOVQ blocks+24(FP), DI
	LEAQ (BX)(BX*2), CX // 3n
	LEAQ (AX)(BX*4), DX // plane 4
	VMOVDQU lanePlanes<>(SB), Y14
	VMOVDQU halves<>(SB), Y15

dloop8:
	TESTQ DI, DI
	JZ    ddone8
	VMOVDQU (SI), Y0    // elements 0-3
	VMOVDQU 32(SI), Y1  // 4-7
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQU 128(SI), Y4
	VMOVDQU 160(SI), Y5
	VMOVDQU 192(SI), Y6
	VMOVDQU 224(SI), Y7 // 28-31
	VPERMD  Y0, Y15, Y0
	VPERMD  Y1, Y15, Y1
	VPERMD  Y2, Y15, Y2
	VPERMD  Y3, Y15, Y3
	VPERMD  Y4, Y15, Y4
	VPERMD  Y5, Y15, Y5
	VPERMD  Y6, Y15, Y6
	VPERMD  Y7, Y15, Y7
	VPSHUFB Y14, Y0, Y0 // dword k: byte k of elements 0-3
	VPSHUFB Y14, Y1, Y1
	VPSHUFB Y14, Y2, Y2
	VPSHUFB Y14, Y3, Y3
	VPSHUFB Y14, Y4, Y4
	VPSHUFB Y14, Y5, Y5
	VPSHUFB Y14, Y6, Y6
	VPSHUFB Y14, Y7, Y7
	VPUNPCKLDQ Y1, Y0, Y8   // bytes 0-1 | 4-5 of elements 0-7
	VPUNPCKHDQ Y1, Y0, Y9   // bytes 2-3 | 6-7
	VPUNPCKLDQ Y3, Y2, Y10  // the same of 8-15
	VPUNPCKHDQ Y3, Y2, Y11
	VPUNPCKLDQ Y5, Y4, Y12  // 16-23
	VPUNPCKHDQ Y5, Y4, Y13
	VPUNPCKLDQ Y7, Y6, Y0   // 24-31
	VPUNPCKHDQ Y7, Y6, Y1
	VPUNPCKLQDQ Y10, Y8, Y2 // byte 0 | 4 of elements 0-15
	VPUNPCKHQDQ Y10, Y8, Y3 // 1 | 5
	VPUNPCKLQDQ Y11, Y9, Y4 // 2 | 6
	VPUNPCKHQDQ Y11, Y9, Y5 // 3 | 7
	VPUNPCKLQDQ Y0, Y12, Y6 // the same of 16-31
	VPUNPCKHQDQ Y0, Y12, Y7
	VPUNPCKLQDQ Y1, Y13, Y8
	VPUNPCKHQDQ Y1, Y13, Y9
	VPERM2I128 $0x20, Y6, Y2, Y10
	VMOVDQU Y10, (AX)        // plane 0
	VPERM2I128 $0x20, Y7, Y3, Y10
	VMOVDQU Y10, (AX)(BX*1)  // 1
	VPERM2I128 $0x20, Y8, Y4, Y10
	VMOVDQU Y10, (AX)(BX*2)  // 2
	VPERM2I128 $0x20, Y9, Y5, Y10
	VMOVDQU Y10, (AX)(CX*1)  // 3
	VPERM2I128 $0x31, Y6, Y2, Y10
	VMOVDQU Y10, (DX)        // 4
	VPERM2I128 $0x31, Y7, Y3, Y10
	VMOVDQU Y10, (DX)(BX*1)  // 5
	VPERM2I128 $0x31, Y8, Y4, Y10
	VMOVDQU Y10, (DX)(BX*2)  // 6
	VPERM2I128 $0x31, Y9, Y5, Y10
	VMOVDQU Y10, (DX)(CX*1)  // 7
	ADDQ  $32, AX
	ADDQ  $32, DX
	ADDQ  $256, SI
	DECQ  DI
	JMP   dloop8

ddone8:
	VZEROUPPER
	RET

// func prefetchLines(p *byte, n int)
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX

ploop:
	CMPQ       SI, CX
	JAE        pdone
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	JMP        ploop

pdone:
	RET
