// The Blosc LZ4 encoder of package kernels, in CUDA C; lz4.ptx is made
// from this file by go generate, as zstd.ptx is from zstd.cu. It writes
// chunks that lie in device memory (rows of a region) as Blosc 1 chunks
// of unsplit LZ4 blocks, the format zarr's CPU encoder writes, in three
// launches: bshuffle gathers each chunk's elements into its blocks,
// byte-shuffled where asked, and notes whether any is not the fill
// value; bcompress compresses each block with one warp (below); bpack
// lays each chunk's blocks out after its header and offsets, or stores
// the chunk as a plain copy where that is no larger, as Blosc does.
//
// LZ4 looks for a match at one position after another; here the 32
// lanes of a warp look at 32 positions at once, each hashing its 4
// bytes into the warp's table and checking the earlier position found
// there, and the first lane with a match wins: the positions before it
// are literals. The match is extended 32 bytes at a time. A position is
// so compared with those of earlier windows only (a match closer than
// the window goes unseen, one further back is found). The table has
// 1,024 entries (4 KiB of shared memory; LZ4's default is 4,096): on
// the H200 the 4,096 of 16 KiB left so little of each SM's memory to
// its cache and so few warps that a launch of 1 GiB took 59 ms to
// compress where 1,024 take 21, and zarrbench's field shrinks as much
// as Blosc's level 5 shrinks it (2.48x; 2.58x with 4,096). Windows
// without a match are looked at ever more sparsely, as LZ4 does. The
// blocks are valid LZ4 (the last match ends 5 bytes before the block's
// end and starts 12 before it; the block ends with literals), and a
// block that does not shrink is stored as it is, as Blosc does.
//
// Built with LZ4_HOST, the same code is plain C for one thread (lane 0
// of 1, a window of one position: LZ4's own search): the package's
// tests run it on the CPU under AddressSanitizer and decode its blocks.

#ifdef LZ4_HOST
#include <stdint.h>
#include <string.h>
typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;
#define __device__
#define SYNC()
#define SHFL(v, k) (v)
#define BALLOT(p) ((u32)((p) != 0))
#define ATOMIC_MAX(p, v) (*(p) = *(p) > (v) ? *(p) : (v))
#define WARP_SUM64(v) (v)
#else
#include "kernels.h"
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define SYNC() __nvvm_bar_warp_sync(0xffffffffu)
#define SHFL(v, k) ((u32)__nvvm_shfl_sync_idx_i32(0xffffffffu, (int)(v), (int)(k), 0x1f))
#define SHFL_XOR(v, o) ((u32)__nvvm_shfl_sync_bfly_i32(0xffffffffu, (int)(v), (o), 0x1f))
#define BALLOT(p) ((u32)__nvvm_vote_ballot_sync(0xffffffffu, (p) != 0))
#define ATOMIC_MAX(p, v) __nvvm_atom_max_gen_ui((p), (v))
static __device__ inline u64 WARP_SUM64(u64 v) {
	for (int o = 16; o != 0; o >>= 1) {
		v += (u64)SHFL_XOR((u32)v, o) | (u64)SHFL_XOR((u32)(v >> 32), o) << 32;
	}
	return v;
}
#endif

// A chunk to encode (the Go side's 80-byte descriptor): rows of width
// bytes, pitch apart, from src; its blocks of bs bytes (the last may be
// shorter) of ts-byte elements. width, bs and the chunk's size are whole
// elements, ts at most 8.
struct bchunk {
	const u8 *src;
	u8 *shuf;  // the chunk's size: its blocks, shuffled
	u8 *slots; // per block 4 + bs bytes: its stored size, its bytes
	u8 *out;   // the chunk's size + 16: the Blosc chunk
	u64 pitch;
	u64 fill;  // the fill value's ts bytes, little-endian
	u32 rows, width, bs, ts;
	u32 flags;   // Blosc's flags byte (shuffle, unsplit, LZ4)
	u32 differs; // set where an element is not the fill value
	u32 size;    // set by bpack: the Blosc chunk's bytes
	u32 pad;
};

// LOWEST is the index of b's lowest set bit (b not 0).
#define LOWEST(b) ((u32)__builtin_ctz(b))

#define BLOSC_SHUFFLE 1
#define BLOSC_MEMCPY 2

static __device__ inline u32 rd32(const u8 *p) {
	return p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}

static __device__ inline void put32(u8 *p, u32 v) {
	p[0] = (u8)v;
	p[1] = (u8)(v >> 8);
	p[2] = (u8)(v >> 16);
	p[3] = (u8)(v >> 24);
}

// copyBytes copies n bytes from src to dst with lane of lanes, eight
// loads of a lane in flight at once (a warp copying byte by byte waits
// on each load otherwise).
static __device__ void copyBytes(u8 *dst, const u8 *src, u32 n, u32 lane, u32 lanes) {
	for (u32 i = lane; i < n; i += 8 * lanes) {
		u8 v[8];
#pragma unroll
		for (u32 x = 0; x < 8; x++) {
			if (i + x * lanes < n) {
				v[x] = src[i + x * lanes];
			}
		}
#pragma unroll
		for (u32 x = 0; x < 8; x++) {
			if (i + x * lanes < n) {
				dst[i + x * lanes] = v[x];
			}
		}
	}
}

// The hash table: positions + 1 (0: none) by the hash of their 4 bytes.
#ifndef HT_LOG
#define HT_LOG 10
#endif
#define HT_SIZE (1 << HT_LOG)

// MISS_SHIFT sets how soon windows without a match are skipped.
#ifndef MISS_SHIFT
#define MISS_SHIFT 3
#endif

static __device__ inline u32 hash4(u32 v) {
	return (v * 2654435761u) >> (32 - HT_LOG);
}

// lenBytes returns how many bytes follow the token for a length len
// (base less than the token's nibble holds: 4 for a match's): where the
// nibble is 15, one for each 255 of the rest and one for what remains.
static __device__ inline u32 lenBytes(u32 len, u32 base) {
	return len >= base + 15 ? (len - base - 15) / 255 + 1 : 0;
}

// putLen writes the x bytes of lenBytes(len, base) at out.
static __device__ void putLen(u8 *out, u32 x, u32 len, u32 base, u32 lane, u32 lanes) {
	for (u32 i = lane; i + 1 < x; i += lanes) {
		out[i] = 255;
	}
	if (x && lane == 0) {
		out[x - 1] = (u8)((len - base - 15) % 255);
	}
}

// emitSeq writes at out+o a sequence of ll literals from lit and, where
// ml is not 0, a match of ml bytes at offset off: the new o, or cap+1
// where it does not fit in cap bytes.
static __device__ u32 emitSeq(u8 *out, u32 o, u32 cap, const u8 *lit, u32 ll, u32 off, u32 ml, u32 lane, u32 lanes) {
	u32 lx = lenBytes(ll, 0), mx = lenBytes(ml, 4);
	if ((u64)o + 1 + lx + ll + (ml ? 2 + mx : 0) > cap) {
		return cap + 1;
	}
	if (lane == 0) {
		out[o] = (u8)((ll < 15 ? ll : 15) << 4 | (ml == 0 ? 0 : ml - 4 < 15 ? ml - 4 : 15));
	}
	putLen(out + o + 1, lx, ll, 0, lane, lanes);
	o += 1 + lx;
	copyBytes(out + o, lit, ll, lane, lanes);
	o += ll;
	if (ml) {
		if (lane == 0) {
			out[o] = (u8)off;
			out[o + 1] = (u8)(off >> 8);
		}
		putLen(out + o + 2, mx, ml, 4, lane, lanes);
		o += 2 + mx;
	}
	return o;
}

// lz4Block compresses in[0, n) into out as an LZ4 block of at most cap
// bytes with lane of lanes: its size, or 0 where it does not fit.
static __device__ u32 lz4Block(const u8 *in, u32 n, u8 *out, u32 cap, u32 *ht, u32 lane, u32 lanes) {
	for (u32 i = lane; i < HT_SIZE; i += lanes) {
		ht[i] = 0;
	}
	SYNC();
	u32 o = 0, anchor = 0;
	if (n >= 13) {
		u32 last = n - 12; // the last position a match may start at
		u32 end = n - 5;   // where a match ends at the latest
		u32 misses = 0; // windows without a match since the last one
		for (u32 p = 0; p <= last;) {
			u32 pos = p + lane, v = 0, h = 0, cand = 0;
			int live = pos <= last, hit = 0;
			if (live) {
				v = rd32(in + pos);
				h = hash4(v);
				cand = ht[h];
				// Entries are of earlier positions (those of a window
				// past its first match are not entered); an offset
				// beyond LZ4's 65,535 is no match, nor would be 0.
				u32 off = pos - (cand - 1);
				hit = cand != 0 && off - 1 < 65535 && rd32(in + cand - 1) == v;
			}
			u32 b = BALLOT(hit);
			u32 w = b ? LOWEST(b) : lanes;
			SYNC(); // every lane's look before any lane's entry
			// The positions up to the first match enter the table, once
			// every lane has looked (those after it are the match's).
			if (live && lane <= w) {
				ATOMIC_MAX(&ht[h], pos + 1);
			}
			SYNC();
			if (b == 0) {
				// Data that does not compress is looked at ever more
				// sparsely, as LZ4 does: a window further on each
				// 2^MISS_SHIFT windows without a match.
				p += lanes * (1 + (misses++ >> MISS_SHIFT));
				continue;
			}
			misses = 0;
			u32 mp = p + w, mr = SHFL(cand, w) - 1, ml = 4;
			while (mp > anchor && mr > 0 && in[mp - 1] == in[mr - 1]) { // the match reaches back
				mp--;
				mr--;
				ml++;
			}
			for (;;) {
				u32 q = mp + ml + lane;
				u32 s = BALLOT(q >= end || in[q] != in[mr + ml + lane]);
				if (s) {
					ml += LOWEST(s);
					break;
				}
				ml += lanes;
			}
			o = emitSeq(out, o, cap, in + anchor, mp - anchor, mp - mr, ml, lane, lanes);
			if (o > cap) {
				return 0;
			}
			p = anchor = mp + ml;
			if (lane == 0 && p - 2 <= last) { // as LZ4, the position two before the match's end
				ATOMIC_MAX(&ht[hash4(rd32(in + p - 2))], p - 1);
			}
			SYNC();
		}
	}
	o = emitSeq(out, o, cap, in + anchor, n - anchor, 0, 0, lane, lanes);
	return o > cap ? 0 : o;
}

// compressBlock writes block j of chunk c to its slot: the LZ4 block and
// its size, or the block as it is and its own size where LZ4 does not
// make it smaller.
static __device__ void compressBlock(struct bchunk *c, u32 j, u32 *ht, u32 lane, u32 lanes) {
	u32 n = c->rows * c->width, start = j * c->bs;
	u32 len = n - start < c->bs ? n - start : c->bs;
	const u8 *in = c->shuf + start;
	u8 *slot = c->slots + (u64)j * (4 + c->bs);
	u32 z = lz4Block(in, len, slot + 4, len - 1, ht, lane, lanes);
	SYNC();
	if (z == 0) {
		copyBytes(slot + 4, in, len, lane, lanes);
		z = len;
	}
	if (lane == 0) {
		put32(slot, z);
	}
}

// packChunk writes chunk c's Blosc chunk to c->out: the header, each
// block's offset, the blocks' slots; or, where that is not smaller than
// the chunk, the header and the chunk's bytes as they are (a plain
// copy). It sets c->size.
static __device__ void packChunk(struct bchunk *c, u32 lane, u32 lanes) {
	u32 n = c->rows * c->width, nb = (n + c->bs - 1) / c->bs, flags = c->flags;
	u64 sum = 0;
	for (u32 j = lane; j < nb; j += lanes) {
		sum += 4 + rd32(c->slots + (u64)j * (4 + c->bs));
	}
	u64 total = 16 + 4 * (u64)nb + WARP_SUM64(sum);
	u8 *o = c->out;
	if (total >= (u64)n + 16) {
		flags |= BLOSC_MEMCPY;
		for (u32 i = lane; i < n; i += lanes) {
			o[16 + i] = c->src[(u64)(i / c->width) * c->pitch + i % c->width];
		}
		total = (u64)n + 16;
	} else {
		u32 at = 16 + 4 * nb;
		for (u32 j = 0; j < nb; j++) {
			const u8 *s = c->slots + (u64)j * (4 + c->bs);
			u32 z = 4 + rd32(s);
			if (lane == 0) {
				put32(o + 16 + 4 * j, at);
			}
			copyBytes(o + at, s, z, lane, lanes);
			at += z;
		}
	}
	if (lane == 0) {
		o[0] = 2;
		o[1] = 1;
		o[2] = (u8)flags;
		o[3] = (u8)c->ts;
		put32(o + 4, n);
		put32(o + 8, c->bs);
		put32(o + 12, (u32)total);
		c->size = (u32)total;
	}
}

// shuffleElement moves element e of chunk c (ts bytes, loaded at once:
// a chunk's rows start at whole elements) to its block, byte k of
// element i of a block of m elements at k*m+i where c shuffles, else as
// it is: whether it is not the fill value.
static __device__ int shuffleElement(const struct bchunk *c, u32 e) {
	u32 ts = c->ts, b = e * ts;
	const u8 *p = c->src + (u64)(b / c->width) * c->pitch + b % c->width;
	u32 start = b / c->bs * c->bs, n = c->rows * c->width;
	u32 m = (n - start < c->bs ? n - start : c->bs) / ts, i = (b - start) / ts;
	u64 v = 0;
	switch (ts) {
	case 1:
		v = *p;
		break;
	case 2:
		v = *(const unsigned short *)p;
		break;
	case 4:
		v = *(const u32 *)p;
		break;
	case 8:
		v = *(const u64 *)p;
		break;
	default:
		for (u32 k = 0; k < ts; k++) {
			v |= (u64)p[k] << (8 * k);
		}
	}
	u8 *dst = c->shuf + start;
	int shuffled = c->flags & BLOSC_SHUFFLE;
	for (u32 k = 0; k < ts; k++) {
		dst[shuffled ? k * m + i : i * ts + k] = (u8)(v >> (8 * k));
	}
	return ts == 8 ? v != c->fill : v != (c->fill & ((1ull << (8 * ts)) - 1));
}

#ifdef LZ4_HOST
// encodeChunk is the three kernels for one chunk, one thread.
static void encodeChunk(struct bchunk *c, u32 *ht) {
	u32 n = c->rows * c->width, nb = (n + c->bs - 1) / c->bs;
	for (u32 e = 0; e < n / c->ts; e++) {
		c->differs |= (u32)shuffleElement(c, e);
	}
	for (u32 j = 0; j < nb; j++) {
		compressBlock(c, j, ht, 0, 1);
	}
	packChunk(c, 0, 1);
}
#else
// bshuffle: the threads of block row y shuffle the elements of chunk y,
// thread x elements x, x + the row's threads, and so on (a thread an
// element made a million blocks of a gibibyte, whose scheduling took
// 10 ms). The descriptor is read once, into registers, and written once
// a block at most: thousands of threads a chunk reading a line of
// memory that others write ran 40 times as long.
extern "C" __global__ void bshuffle(struct bchunk *cs) {
	struct bchunk c = cs[CTA_Y];
	u32 count = c.rows * c.width / c.ts, step = NCTA_X * NTID_X;
	int differs = 0;
	for (u32 e = CTA_X * NTID_X + TID_X; e < count; e += step) {
		differs |= shuffleElement(&c, e);
	}
	if (__nvvm_bar0_or(differs) && TID_X == 0) {
		cs[CTA_Y].differs = 1;
	}
}

// bcompress: block w of the grid, one warp, compresses block
// blocks[w] & 0xffffffff of chunk blocks[w] >> 32.
extern "C" __global__ void bcompress(struct bchunk *cs, const u64 *blocks, u32 n) {
	__shared__ u32 ht[HT_SIZE];
	u32 w = CTA_X;
	if (w < n) {
		compressBlock(&cs[blocks[w] >> 32], (u32)blocks[w], ht, TID_X & 31, 32);
	}
}

// bpack: block w of the grid, one warp, packs chunk w.
extern "C" __global__ void bpack(struct bchunk *cs, u32 n) {
	if (CTA_X < n) {
		packChunk(&cs[CTA_X], TID_X & 31, 32);
	}
}
#endif
