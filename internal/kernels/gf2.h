// Arithmetic of CRC-32 remainders, for crc.cu and inflate.cu: a
// remainder is a polynomial over GF(2) of degree below 32, bit-reversed
// as hash/crc32 keeps them (bit 31 is x^0), modulo a reversed polynomial.
// Include after __device__ is defined.

// mulmod returns a*b modulo the reversed polynomial poly.
static __device__ inline u32 mulmod(u32 a, u32 b, u32 poly) {
	u32 p = 0;
	for (u32 m = 1u << 31; m != 0 && a != 0; m >>= 1) {
		if (a & m) {
			p ^= b;
			a ^= m;
		}
		b = (b & 1) ? (b >> 1) ^ poly : b >> 1;
	}
	return p;
}

// xpow8 returns x^(8n) modulo poly: what n zero bytes after a message
// multiply its raw CRC by.
static __device__ inline u32 xpow8(u64 n, u32 poly) {
	u32 p = 1u << 31, b = 1u << 23; // x^0, x^8
	for (; n != 0; n >>= 1) {
		if (n & 1) {
			p = mulmod(p, b, poly);
		}
		b = mulmod(b, b, poly);
	}
	return p;
}
