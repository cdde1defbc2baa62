// The deflate decoder of package kernels, in CUDA C; inflate.ptx is made
// from this file by go generate, as zstd.ptx is from zstd.cu. It decodes
// streams as RFC 1951 describes them, raw or wrapped as gzip (RFC 1952)
// or zlib (RFC 1950) streams, one warp a stream. Huffman decoding is
// serial, so every lane of the warp decodes the same symbols in step (the
// same loads, no divergence), lane 0 writing the literals; matches are
// copied 32 at a time, a lane each, and a stored block by all lanes at
// once. One warp decodes a megabyte in about 115 ms (H200), bound by the
// latency of its instructions (Nsight Compute: 4.6 cycles an
// instruction, mostly waiting on arithmetic; nvcc's code of the same
// source ran 1.3x as fast as clang's), so a launch wants hundreds of
// streams. A stream's checksum
// (gzip's CRC-32 and size, zlib's Adler-32) is verified over the output,
// each lane summing a slice and the slices joined. A stream the decoder
// does not take (a preset dictionary, a gzip header CRC, more bytes after
// the stream, a Huffman code that zlib and Go's decoder would judge
// differently) or that does not add up ends in an error code, and the
// caller decodes that one on the CPU, which names the error. Every read
// is bounded by the stream's bytes, every write by the destination's.
//
// Built with INFLATE_HOST, the same code is plain C for one thread (lane
// 0 of 1): the package's tests run it on the CPU against Go's decoders.

#ifdef INFLATE_HOST
#include <stdint.h>
#include <string.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
#define __device__
#define SYNC()
#define WARP_XOR32(v) (v)
#define WARP_SUM64(v) (v)
#define SHFL(v, k) (v)
#define SHFL64(v, k) (v)
#define BALLOT(p) ((u32)((p) != 0))
#else
#include "kernels.h"
typedef unsigned short u16;
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define SYNC() __nvvm_bar_warp_sync(0xffffffffu)
#define SHFL_XOR(v, o) ((u32)__nvvm_shfl_sync_bfly_i32(0xffffffffu, (int)(v), (o), 0x1f))
#define SHFL(v, k) ((u32)__nvvm_shfl_sync_idx_i32(0xffffffffu, (int)(v), (int)(k), 0x1f))
#define SHFL64(v, k) ((u64)SHFL((u32)(v), k) | (u64)SHFL((u32)((v) >> 32), k) << 32)
#define BALLOT(p) ((u32)__nvvm_vote_ballot_sync(0xffffffffu, (p) != 0))
static __device__ inline u32 WARP_XOR32(u32 v) {
	for (int o = 16; o != 0; o >>= 1) {
		v ^= SHFL_XOR(v, o);
	}
	return v;
}
static __device__ inline u64 WARP_SUM64(u64 v) {
	for (int o = 16; o != 0; o >>= 1) {
		v += (u64)SHFL_XOR((u32)v, o) | (u64)SHFL_XOR((u32)(v >> 32), o) << 32;
	}
	return v;
}
#endif

#include "gf2.h"

// Results: the decoded size, or one of these (as u64, from the top).
#define IN_ERR_FORMAT 1  // not a stream this decoder takes
#define IN_ERR_CORRUPT 2 // the stream does not add up
#define IN_ERR_DST 3     // more bytes than the destination holds
#define IN_ERR(e) (~(u64)0 - (e) + 1)

// The wrappers a batch's streams are in.
#define IN_RAW 0
#define IN_GZIP 1
#define IN_ZLIB 2

// A stream to decode: src bytes into dst's cap bytes.
struct ijob {
	const u8 *src;
	u8 *dst;
	u64 srcSize, dstCap;
};

// A Huffman code: how many codes of each length, the symbols in code
// order (canonical: by length, then symbol).
struct huff {
	u16 count[16];
	u16 sym[288];
};

// The table bits: a code of up to this many bits is found with one
// lookup; a longer one (rare) is decoded bit by bit from count and sym.
#ifndef LIT_BITS
#define LIT_BITS 10
#define DIST_BITS 8
#endif

// A warp's tables, in shared memory. A lookup entry holds the code's
// length (bits 0-3: 0 for a longer code, or none), the symbol's extra
// bits (4-7), its kind (8-9: a literal, a length or distance, the end of
// the block, a symbol the format does not use) and its value (16-31:
// the literal byte, or the length's or distance's base).
#define E_LIT 0
#define E_BASE 1
#define E_END 2
#define E_BAD 3
struct itab {
	u32 lit[1 << LIT_BITS];
	u32 dist[1 << DIST_BITS];
	struct huff hl, hd;
	u8 lens[288 + 32];
	u32 crc[256];
};

// The bit reader: the stream's bytes p[0, n), read from pos into buf
// (cnt bits); past the end it reads zeros, pos counting on, and the
// stream is corrupt where it uses them.
struct bits {
	const u8 *p;
	u64 n, pos, buf;
	u32 cnt;
};

// refill tops buf up to more than 56 bits: from 8 bytes loaded at once
// (one wait for all) where the stream has them.
static __device__ inline void refill(struct bits *b) {
	if (b->cnt > 56) {
		return;
	}
	if (b->pos + 8 <= b->n) {
		const u8 *q = b->p + b->pos;
		u64 v = (u64)q[0] | (u64)q[1] << 8 | (u64)q[2] << 16 | (u64)q[3] << 24 | (u64)q[4] << 32 | (u64)q[5] << 40 |
		        (u64)q[6] << 48 | (u64)q[7] << 56;
		u32 k = (64 - b->cnt) >> 3; // the bytes that fit
		b->buf |= v << b->cnt;
		b->pos += k;
		b->cnt += 8 * k;
		return;
	}
	while (b->cnt <= 56) {
		u64 v = b->pos < b->n ? b->p[b->pos] : 0;
		b->buf |= v << b->cnt;
		b->pos++;
		b->cnt += 8;
	}
}

static __device__ inline void drop(struct bits *b, u32 k) {
	b->buf >>= k;
	b->cnt -= k;
}

// overrun reports whether more bits were used than the stream has.
static __device__ inline int overrun(const struct bits *b) {
	return b->pos * 8 - b->cnt > b->n * 8;
}

// slowDecode decodes a symbol of h bit by bit from the low bits of buf
// (RFC 1951's codes go in from their first bit): the symbol and its
// length above bit 9, or 0 where none of up to max bits is a code.
static __device__ u32 slowDecode(u64 buf, const struct huff *h, u32 max) {
	int code = 0, first = 0, index = 0;
	for (u32 len = 1; len <= max; len++) {
		code |= (int)(buf & 1);
		buf >>= 1;
		int count = h->count[len];
		if (code - count < first) {
			return h->sym[index + (code - first)] | len << 9;
		}
		index += count;
		first += count;
		first <<= 1;
		code <<= 1;
	}
	return 0;
}

// Lengths 3-258 and distances 1-32768: bases and extra bits.
static __device__ const u16 lenBase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static __device__ const u8 lenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static __device__ const u16 distBase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static __device__ const u8 distExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

// symEntry returns the lookup entry of symbol and length s (as
// slowDecode returns them) of the literal/length code, or of the
// distance code where dist; 0 for s 0 (no code).
static __device__ u32 symEntry(u32 s, int dist) {
	u32 sym = s & 511, len = s >> 9;
	if (s == 0) {
		return 0;
	}
	if (dist) {
		return sym < 30 ? len | (u32)distExtra[sym] << 4 | E_BASE << 8 | (u32)distBase[sym] << 16 : len | E_BAD << 8;
	}
	if (sym < 256) {
		return len | E_LIT << 8 | sym << 16;
	}
	if (sym == 256) {
		return len | E_END << 8;
	}
	sym -= 257;
	return sym < 29 ? len | (u32)lenExtra[sym] << 4 | E_BASE << 8 | (u32)lenBase[sym] << 16 : len | E_BAD << 8;
}

// entry returns the lookup entry of the next symbol of a code (b holds
// 15 bits or more) from its table lut of lbits, or where its code is
// longer, bit by bit: 0 where the bits are no code.
static __device__ inline u32 entry(const struct bits *b, const u32 *lut, u32 lbits, const struct huff *h, int dist) {
	u32 e = lut[b->buf & ((1u << lbits) - 1)];
	return e & 15 ? e : symEntry(slowDecode(b->buf, h, 15), dist);
}

// value returns the base of e plus its extra bits, which follow its
// code in b, and drops both.
static __device__ inline u32 value(struct bits *b, u32 e) {
	u32 len = e & 15, extra = e >> 4 & 15;
	u32 v = (e >> 16) + (u32)(b->buf >> len & ((1u << extra) - 1));
	drop(b, len + extra);
	return v;
}

// build makes code h, and its table lut of lbits (when lut is not null),
// from the lengths of n symbols. A code that uses more than the code
// space, or less but for one of a single bit or none at all (which zlib
// and Go's decoder take alike) gives -1. Every lane builds h the same;
// the lanes fill lut.
static __device__ int build(struct huff *h, u32 *lut, u32 lbits, const u8 *lens, u32 n, int dist, u32 lane, u32 lanes) {
	u16 count[16], offs[16];
	for (u32 i = 0; i < 16; i++) {
		count[i] = 0;
	}
	for (u32 s = 0; s < n; s++) {
		count[lens[s]]++;
	}
	int left = 1;
	u32 max = 0;
	for (u32 len = 1; len < 16; len++) {
		left = (left << 1) - count[len];
		if (left < 0) {
			return -1;
		}
		if (count[len]) {
			max = len;
		}
	}
	if (left > 0 && max > 1) {
		return -1;
	}
	offs[1] = 0;
	for (u32 len = 1; len < 15; len++) {
		offs[len + 1] = offs[len] + count[len];
	}
	for (u32 len = 0; len < 16; len++) {
		h->count[len] = count[len];
	}
	for (u32 s = 0; s < n; s++) {
		if (lens[s]) {
			h->sym[offs[lens[s]]++] = (u16)s;
		}
	}
	SYNC();
	if (lut) {
		for (u32 e = lane; e < (1u << lbits); e += lanes) {
			lut[e] = symEntry(slowDecode(e, h, lbits), dist);
		}
	}
	SYNC();
	return 0;
}

// The order of the code length code's lengths.
static __device__ const u8 clOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

// fixedTables builds the codes of a fixed Huffman block.
static __device__ void fixedTables(struct itab *t, u32 lane, u32 lanes) {
	u8 *l = t->lens;
	for (u32 s = 0; s < 288; s++) {
		l[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
	}
	for (u32 s = 288; s < 288 + 32; s++) { // 30 and 31 in the code, unused
		l[s] = 5;
	}
	build(&t->hl, t->lit, LIT_BITS, l, 288, 0, lane, lanes);
	build(&t->hd, t->dist, DIST_BITS, l + 288, 32, 1, lane, lanes);
}

// dynamicTables reads a dynamic block's code lengths and builds its
// codes: 0, or -1 for a header that does not add up.
static __device__ int dynamicTables(struct bits *b, struct itab *t, u32 lane, u32 lanes) {
	refill(b);
	u32 nlen = (u32)(b->buf & 31) + 257, ndist = (u32)(b->buf >> 5 & 31) + 1, ncode = (u32)(b->buf >> 10 & 15) + 4;
	drop(b, 14);
	if (nlen > 286 || ndist > 30) {
		return -1;
	}
	u8 cl[19];
	for (u32 i = 0; i < 19; i++) {
		cl[i] = 0;
	}
	refill(b);
	for (u32 i = 0; i < ncode; i++) { // at most 57 bits: one refill holds them
		cl[clOrder[i]] = (u8)(b->buf & 7);
		drop(b, 3);
	}
	// The code length code: decoded bit by bit (it is short, and used
	// for a few hundred symbols).
	if (build(&t->hl, 0, 0, cl, 19, 0, lane, lanes) < 0) {
		return -1;
	}
	// The literals' lengths go to lens[0, nlen), the distances' to
	// lens[288, 288+ndist), as fixedTables lays them out; a repeat may
	// cross from the one to the other.
	u8 *l = t->lens;
	u8 prev = 0;
	for (u32 i = 0; i < nlen + ndist;) {
		refill(b);
		u32 e = slowDecode(b->buf, &t->hl, 7);
		if (e == 0) {
			return -1;
		}
		drop(b, e >> 9);
		u32 sym = e & 511, rep = 1;
		u8 v = (u8)sym;
		if (sym == 16) {
			if (i == 0) {
				return -1;
			}
			v = prev;
			rep = 3 + (u32)(b->buf & 3);
			drop(b, 2);
		} else if (sym == 17) {
			v = 0;
			rep = 3 + (u32)(b->buf & 7);
			drop(b, 3);
		} else if (sym == 18) {
			v = 0;
			rep = 11 + (u32)(b->buf & 127);
			drop(b, 7);
		}
		if (rep > nlen + ndist - i) {
			return -1;
		}
		for (; rep > 0; rep--, i++) {
			l[i < nlen ? i : 288 + i - nlen] = v;
		}
		prev = v;
	}
	if (l[256] == 0) {
		return -1; // no end of block
	}
	SYNC();
	if (build(&t->hl, t->lit, LIT_BITS, l, nlen, 0, lane, lanes) < 0 || build(&t->hd, t->dist, DIST_BITS, l + 288, ndist, 1, lane, lanes) < 0) {
		return -1;
	}
	return 0;
}

// copyMatches copies the first n matches of a batch into dst, lane k
// match k (len bytes at o, from dist bytes before), in rounds: a match
// whose source holds output of an earlier match not yet copied waits for
// a later round. A match's byte i is byte i % dist of the dist bytes
// before it, all written before the match; a lane loads 8 of them, then
// stores them.
static __device__ void copyMatches(u8 *dst, u64 o, u32 len, u32 dist, u32 n, u32 lane) {
	SYNC(); // the literals and stored blocks so far written
	u32 pending = n >= 32 ? 0xffffffffu : (1u << n) - 1;
	u64 lo = o - dist, hi = lo + (dist < len ? dist : len); // the source bytes
	u64 first = SHFL64(o, 0);
	int mine = (pending >> lane) & 1;
	// Only a source that reaches the batch's first match may wait.
	u32 check = BALLOT(mine && hi > first);
	while (pending) {
		int ready = (pending >> lane) & 1;
		if (check) {
			for (u32 j = 0; j < n; j++) {
				u64 oj = SHFL64(o, j);
				u32 lj = SHFL(len, j);
				if (j < lane && (pending >> j & 1) && oj < hi && lo < oj + lj) {
					ready = 0;
				}
			}
		}
		if (ready) {
			u8 *d = dst + o;
			const u8 *s = dst + lo;
			for (u32 i = 0; i < len; i += 8) {
				u8 v[8];
				u32 k = len - i < 8 ? len - i : 8;
#pragma unroll
				for (u32 x = 0; x < 8; x++) {
					if (x < k) {
						v[x] = s[dist >= len ? i + x : (i + x) % dist];
					}
				}
#pragma unroll
				for (u32 x = 0; x < 8; x++) {
					if (x < k) {
						d[i + x] = v[x];
					}
				}
			}
		}
		SYNC();
		pending &= ~BALLOT(ready);
	}
}

// inflateBlocks decodes the blocks of a deflate stream into dst: the
// decoded size or an error code.
static __device__ u64 inflateBlocks(struct bits *b, struct itab *t, u8 *dst, u64 cap, u32 lane, u32 lanes) {
	u64 o = 0;
	// The matches decoded but not yet copied, match k's held by lane k.
	u64 qo = 0;
	u32 qlen = 0, qdist = 0, nq = 0;
	for (u32 last = 0; !last;) {
		SYNC(); // every lane done with the last block's tables
		refill(b);
		if (overrun(b)) {
			return IN_ERR(IN_ERR_CORRUPT);
		}
		last = (u32)(b->buf & 1);
		u32 type = (u32)(b->buf >> 1 & 3);
		drop(b, 3);
		if (type == 0) {
			// Stored: from the next byte, LEN and its complement, then
			// LEN bytes.
			drop(b, b->cnt & 7);
			u64 at = b->pos - b->cnt / 8;
			b->buf = 0;
			b->cnt = 0;
			if (at > b->n || b->n - at < 4) {
				return IN_ERR(IN_ERR_CORRUPT);
			}
			const u8 *p = b->p + at;
			u32 len = p[0] | (u32)p[1] << 8, nlen = p[2] | (u32)p[3] << 8;
			at += 4;
			if (len != (~nlen & 0xffff) || len > b->n - at) {
				return IN_ERR(IN_ERR_CORRUPT);
			}
			if (len > cap - o) {
				return IN_ERR(IN_ERR_DST);
			}
			for (u32 i = lane; i < len; i += lanes) {
				dst[o + i] = b->p[at + i];
			}
			o += len;
			b->pos = at + len;
			continue;
		}
		if (type == 1) {
			fixedTables(t, lane, lanes);
		} else if (type == 2) {
			if (dynamicTables(b, t, lane, lanes) < 0) {
				return IN_ERR(IN_ERR_CORRUPT);
			}
		} else {
			return IN_ERR(IN_ERR_CORRUPT);
		}
		for (;;) {
			refill(b);
			u32 e = entry(b, t->lit, LIT_BITS, &t->hl, 0);
			u32 kind = e >> 8 & 3;
			if (kind == E_LIT && e != 0) {
				drop(b, e & 15);
				if (o >= cap) {
					return IN_ERR(IN_ERR_DST);
				}
#ifdef LIT_ALL
				dst[o] = (u8)(e >> 16); // every lane the same byte: no branch
#else
				if (lane == 0) {
					dst[o] = (u8)(e >> 16);
				}
#endif
				o++;
				continue;
			}
			if (kind == E_END) {
				drop(b, e & 15);
				break;
			}
			if (kind != E_BASE) {
				return IN_ERR(IN_ERR_CORRUPT);
			}
			u32 len = value(b, e);
			refill(b);
			e = entry(b, t->dist, DIST_BITS, &t->hd, 1);
			if ((e >> 8 & 3) != E_BASE || e == 0) {
				return IN_ERR(IN_ERR_CORRUPT);
			}
			u32 dist = value(b, e);
			if (dist > o) {
				return IN_ERR(IN_ERR_CORRUPT);
			}
			if (len > cap - o) {
				return IN_ERR(IN_ERR_DST);
			}
			// Matches are copied 32 at a time, a lane each (copyMatches):
			// their sources' reads of global memory wait once for all.
			if (lane == nq) {
				qo = o;
				qlen = len;
				qdist = dist;
			}
			if (++nq == lanes) {
				copyMatches(dst, qo, qlen, qdist, nq, lane);
				nq = 0;
			}
			o += len;
		}
	}
	if (overrun(b)) {
		return IN_ERR(IN_ERR_CORRUPT);
	}
	copyMatches(dst, qo, qlen, qdist, nq, lane);
	return o;
}

// crc32Of returns the CRC-32 (IEEE, as gzip's) of dst[0, n), each lane
// summing a slice (t: the byte table, filled here).
static __device__ u32 crc32Of(struct itab *t, const u8 *dst, u64 n, u32 lane, u32 lanes) {
	const u32 poly = 0xedb88320u;
	for (u32 i = lane; i < 256; i += lanes) {
		u32 c = i;
		for (int k = 0; k < 8; k++) {
			c = c & 1 ? c >> 1 ^ poly : c >> 1;
		}
		t->crc[i] = c;
	}
	SYNC();
	u64 per = (n + lanes - 1) / lanes, lo = per * lane, hi = lo + per < n ? lo + per : n;
	u32 c = 0;
	for (u64 i = lo; i < hi; i++) {
		c = t->crc[(c ^ dst[i]) & 255] ^ c >> 8;
	}
	// Raw CRCs (no start value) add: each slice's moved over the bytes
	// after it; then the start value's, over all of them.
	if (lo < hi) {
		c = mulmod(c, xpow8(n - hi, poly), poly);
	}
	c = WARP_XOR32(c);
	return c ^ mulmod(0xffffffffu, xpow8(n, poly), poly) ^ 0xffffffffu;
}

// adler32Of returns the Adler-32 of dst[0, n), each lane summing a
// slice.
static __device__ u32 adler32Of(const u8 *dst, u64 n, u32 lane, u32 lanes) {
	const u64 mod = 65521;
	u64 per = (n + lanes - 1) / lanes, lo = per * lane, hi = lo + per < n ? lo + per : n;
	u64 a = 0, s = 0; // a: the sum of the bytes; s: of each byte times the bytes to the slice's end, from it
	for (u64 i = lo; i < hi;) {
		u64 end = i + 4096 < hi ? i + 4096 : hi;
		for (; i < end; i++) {
			a += dst[i];
			s += a;
		}
		a %= mod;
		s %= mod;
	}
	// Adler-32's b is n (its a starting at 1) plus each byte times the
	// bytes to the end from it.
	u64 after = lo < hi ? (n - hi) % mod : 0;
	u64 sa = WARP_SUM64(a), sb = WARP_SUM64((s + after * a) % mod);
	return (u32)((sb + n % mod) % mod) << 16 | (u32)((1 + sa) % mod);
}

static __device__ inline u32 le32(const u8 *p) {
	return p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}

// gzipHeader returns the length of the gzip header p[0, n) starts with,
// or 0 where it is none (or one with a header CRC: the CPU's).
static __device__ u64 gzipHeader(const u8 *p, u64 n) {
	if (n < 18 || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8 || (p[3] & 0xe2) != 0) {
		return 0;
	}
	u32 flg = p[3];
	u64 at = 10;
	if (flg & 4) { // FEXTRA
		u64 x = p[10] | (u32)p[11] << 8;
		at = 12 + x;
	}
	for (u32 f = 8; f <= 16; f <<= 1) { // FNAME, FCOMMENT: up to a zero byte
		if (flg & f) {
			while (at < n && p[at] != 0) {
				at++;
			}
			at++;
		}
	}
	return at + 8 <= n ? at : 0;
}

// inflateJob decodes job j in format (IN_RAW, IN_GZIP, IN_ZLIB) with
// lane of lanes: the decoded size, or an error code.
static __device__ u64 inflateJob(const struct ijob *j, u32 format, struct itab *t, u32 lane, u32 lanes) {
	const u8 *p = j->src;
	u64 n = j->srcSize, head = 0, tail = 0;
	if (format == IN_GZIP) {
		if ((head = gzipHeader(p, n)) == 0) {
			return IN_ERR(IN_ERR_FORMAT);
		}
		tail = 8;
	} else if (format == IN_ZLIB) {
		if (n < 6 || (p[0] & 15) != 8 || p[0] >> 4 > 7 || (p[0] << 8 | p[1]) % 31 != 0 || p[1] & 0x20) {
			return IN_ERR(IN_ERR_FORMAT);
		}
		head = 2;
		tail = 4;
	}
	struct bits b = {p + head, n - head - tail, 0, 0, 0};
	u64 o = inflateBlocks(&b, t, j->dst, j->dstCap, lane, lanes);
	if (o > j->dstCap) {
		return o;
	}
	// The stream ends in the byte of its last bit; the wrapper's
	// trailer, then nothing, follows.
	u64 end = head + (b.pos * 8 - b.cnt + 7) / 8;
	if (end + tail != n) {
		return IN_ERR(IN_ERR_FORMAT);
	}
	SYNC();
	if (format == IN_GZIP) {
		if (le32(p + end + 4) != (u32)o || le32(p + end) != crc32Of(t, j->dst, o, lane, lanes)) {
			return IN_ERR(IN_ERR_CORRUPT);
		}
	} else if (format == IN_ZLIB) {
		const u8 *q = p + end;
		u32 want = (u32)q[0] << 24 | (u32)q[1] << 16 | (u32)q[2] << 8 | q[3];
		if (want != adler32Of(j->dst, o, lane, lanes)) {
			return IN_ERR(IN_ERR_CORRUPT);
		}
	}
	return o;
}

#ifndef INFLATE_HOST
// inflate decodes job w of jobs (all in format) with block w of the
// grid, one warp, its tables in shared memory, and writes the result to
// out[w].
extern "C" __global__ void inflate(const struct ijob *jobs, u32 n, u32 format, u64 *out) {
	__shared__ struct itab t;
	u32 w = CTA_X;
	if (w >= n) {
		return;
	}
	u64 r = inflateJob(&jobs[w], format, &t, TID_X & 31, 32);
	if ((TID_X & 31) == 0) {
		out[w] = r;
	}
}
#endif
