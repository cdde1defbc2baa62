// The zstd decoder of package kernels, in CUDA C; zstd.ptx is made from
// this file by go generate, as unshuffle.ptx is from unshuffle.cu. It
// decodes frames as RFC 8878 describes them, one warp a frame, a group
// of up to GROUP blocks at a time: the lanes in step read the blocks'
// headers and tables (a block's new tables into its slot of global
// scratch memory), then decode the group's Huffman literal streams a
// lane each and its blocks' sequences a lane a block, then execute the
// blocks in order, 32 sequences at a time: offsets resolved in order,
// the literals copied by all lanes at once, the matches in rounds (each
// whose source is all written by then copied by its lane). A frame it
// does not take (a dictionary, a checksum to verify, more than one
// frame, a block of more than SEQ_CAP sequences) or that does not add up
// ends in an error code, and the caller decodes that one on the CPU,
// which names the error. Every read is bounded by the frame's bytes,
// every write by the destination's and the scratch memory's.
//
// Built with ZSTD_HOST, the same code is plain C for one thread (lane 0
// of 1): the package's tests run it on the CPU against libzstd.

#ifdef ZSTD_HOST
#include <stdint.h>
#include <string.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t i64;
#define __device__
#define SYNC()
#else
#include "kernels.h"
typedef unsigned short u16;
typedef long long i64;
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define SYNC() __nvvm_bar_warp_sync(0xffffffffu)
#endif

// Results: the decoded size, or one of these (as u64, from the top).
#define ZS_ERR_FORMAT 1      // not a frame this decoder takes
#define ZS_ERR_CORRUPT 2     // the frame does not add up
#define ZS_ERR_DST 3         // more bytes than the destination holds
#define ZS_ERR(e) (~(u64)0 - (e) + 1)

// A frame to decode: src bytes into dst's cap bytes; out receives the
// result.
struct zjob {
	const u8 *src;
	u8 *dst;
	u64 srcSize, dstCap;
};

// FSE decoding table entries.
struct fse {
	u16 next; // the next state's base
	u8 sym;
	u8 bits;
};

// One set of decoding tables: a block's, in global memory.
struct ztab {
	u16 huf[1 << 11]; // symbol | bits << 8
	struct fse ll[512], ml[512], of[256];
};

#ifndef GROUP
#define GROUP 8 // blocks of a frame decoded at once, a lane each
#endif
#define SEQ_CAP 24576    // a block's sequences the GPU takes (the format allows 43690: the CPU's)

// A sequence as the entropy decoding leaves it, in 64 bits: the offset
// value (repeat codes 1-3 unresolved; below 2^29: larger ones reach past
// any window the decoder takes) in bits 0-28, the literal length (below
// 2^17) in bits 29-45, the match length (below 2^18) in bits 46-63.
typedef u64 zseq;
#define SEQ_OF(q) ((u32)((q) & 0x1fffffff))
#define SEQ_LL(q) ((u32)((q) >> 29 & 0x1ffff))
#define SEQ_ML(q) ((u32)((q) >> 46))

// A block of a group, as the header pass leaves it.
struct zblk {
	const u8 *src;  // raw and RLE blocks: the bytes (the byte)
	const u8 *lit;  // the literals: raw bytes, the RLE byte, or the Huffman streams
	const u8 *seq;  // the sequences' bitstream
	u32 type;       // 0 raw, 1 RLE, 2 compressed
	u32 size;       // raw and RLE blocks: bytes decoded
	u32 litType;    // 0 raw, 1 RLE, 2-3 Huffman
	u32 nlit;       // literals decoded
	u32 streams;    // Huffman streams: 1 or 4
	u32 soff[4], slen[4]; // each stream's offset from lit and length
	u32 nseq, seqLen;
	u8 huf, ll, ml, of; // the slots of the tables it uses
	u8 hufLog, llLog, mlLog, ofLog;
};

// Per-frame scratch memory, in global memory: a group's literals,
// sequences, tables (a slot a block, one carried over from the last
// group) and block descriptors.
struct zscratch {
	u8 lits[GROUP][128 << 10];
	zseq seq[GROUP][SEQ_CAP];
	struct ztab tab[GROUP + 1];
	struct zblk blk[GROUP];
	u32 err; // set by any lane of a parallel step
};

#define MAX_BLOCK (128 << 10)

// Forward bit reader (FSE table descriptions): bits from the least
// significant of each byte, bytes in order.
struct fwd {
	const u8 *p;
	i64 n, bit; // bytes, bit position
};

static __device__ u32 fwdPeek(const struct fwd *f, int nb) {
	u64 v = 0;
	i64 b = f->bit >> 3;
	for (int k = 0; k < 5 && b + k < f->n; k++) {
		v |= (u64)f->p[b + k] << (8 * k);
	}
	v >>= (f->bit & 7);
	return (u32)(v & ((1ull << nb) - 1));
}

// Backward bit reader (Huffman streams, sequences): the stream's last
// byte's highest set bit marks its end; bits are read from there down,
// through a 64-bit window of the stream loaded 8 bytes at a time.
struct bwd {
	const u8 *p;
	i64 n;    // the stream's bytes
	i64 pos;  // bits left, [0, pos) of the stream
	i64 base; // c holds bits [base, base+64)
	u64 c;
	int over; // a read went past the start
};

// bwdLoad loads the window ending at the byte that holds bit pos-1.
static __device__ void bwdLoad(struct bwd *r) {
	i64 b = ((r->pos + 7) >> 3) - 8;
	if (b < 0) {
		b = 0;
	}
	u64 v = 0;
	for (int k = 0; k < 8; k++) {
		if (b + k < r->n) {
			v |= (u64)r->p[b + k] << (8 * k);
		}
	}
	r->base = b * 8;
	r->c = v;
}

static __device__ int bwdInit(struct bwd *r, const u8 *p, i64 n) {
	if (n <= 0 || p[n - 1] == 0) {
		return 0;
	}
	int hb = 7;
	while (!(p[n - 1] >> hb & 1)) {
		hb--;
	}
	r->p = p;
	r->n = n;
	r->pos = (n - 1) * 8 + hb;
	r->over = 0;
	bwdLoad(r);
	return 1;
}

// bwdPeek returns bits [pos-nb, pos) (nb at most 56), bit pos-1 the
// highest; bits before the start read as 0.
static __device__ u64 bwdPeek(struct bwd *r, int nb) {
	i64 from = r->pos - nb;
	if (from < r->base && r->base > 0) {
		bwdLoad(r);
	}
	u64 m = (1ull << nb) - 1;
	if (from >= r->base) {
		return (r->c >> (from - r->base)) & m;
	}
	return (r->c << (r->base - from)) & m; // base 0: zeros below the start
}

static __device__ u64 bwdRead(struct bwd *r, int nb) {
	if (nb == 0) {
		return 0;
	}
	u64 v = bwdPeek(r, nb);
	r->pos -= nb;
	if (r->pos < 0) {
		r->over = 1;
	}
	return v;
}

static __device__ int highbit(u32 v) {
	int n = -1;
	while (v) {
		v >>= 1;
		n++;
	}
	return n;
}

// fseTable reads a table description from src (n bytes) into t, for
// symbols up to maxSym and accuracy logs up to maxLog; it returns the
// bytes read, or -1.
static __device__ i64 fseRead(const u8 *src, i64 n, struct fse *t, int maxSym, int maxLog, int *log) {
	struct fwd f = {src, n, 0};
	short norm[64];
	if (n < 1) {
		return -1;
	}
	int al = (int)fwdPeek(&f, 4) + 5;
	f.bit = 4;
	if (al > maxLog) {
		return -1;
	}
	int remaining = (1 << al) + 1, threshold = 1 << al, nb = al + 1, sym = 0;
	int prev0 = 0;
	while (remaining > 1 && sym <= maxSym) {
		if (prev0) {
			int n0 = sym;
			for (;;) {
				if (f.bit + 2 > n * 8) {
					return -1;
				}
				u32 r = fwdPeek(&f, 2);
				f.bit += 2;
				n0 += (int)r;
				if (r != 3) {
					break;
				}
			}
			if (n0 > maxSym + 1) {
				return -1;
			}
			while (sym < n0) {
				norm[sym++] = 0;
			}
			if (sym > maxSym) {
				break;
			}
		}
		int max = (2 * threshold - 1) - remaining;
		int count;
		u32 v = fwdPeek(&f, nb);
		if ((int)(v & (threshold - 1)) < max) {
			count = (int)(v & (threshold - 1));
			f.bit += nb - 1;
		} else {
			count = (int)(v & (2 * threshold - 1));
			if (count >= threshold) {
				count -= max;
			}
			f.bit += nb;
		}
		if (f.bit > n * 8) {
			return -1;
		}
		count--;
		remaining -= count < 0 ? -count : count;
		norm[sym++] = (short)count;
		prev0 = count == 0;
		while (remaining < threshold && threshold > 1) {
			nb--;
			threshold >>= 1;
		}
	}
	if (remaining != 1 || sym > maxSym + 1) {
		return -1;
	}
	int nsym = sym;
	// Build the decoding table.
	int size = 1 << al, high = size - 1;
	u16 next[64];
	for (int s = 0; s < nsym; s++) {
		if (norm[s] == -1) {
			t[high--].sym = (u8)s;
			next[s] = 1;
		} else {
			next[s] = (u16)(norm[s] < 0 ? 0 : norm[s]);
		}
	}
	int step = (size >> 1) + (size >> 3) + 3, mask = size - 1, pos = 0;
	for (int s = 0; s < nsym; s++) {
		for (int i = 0; i < norm[s]; i++) {
			t[pos].sym = (u8)s;
			do {
				pos = (pos + step) & mask;
			} while (pos > high);
		}
	}
	if (pos != 0) {
		return -1;
	}
	for (int u = 0; u < size; u++) {
		int s = t[u].sym;
		u32 ns = next[s]++;
		if (ns == 0) {
			return -1;
		}
		int bits = al - highbit(ns);
		t[u].bits = (u8)bits;
		t[u].next = (u16)((ns << bits) - size);
	}
	*log = al;
	return (f.bit + 7) >> 3;
}

// fseBuild builds the table of a predefined distribution.
static __device__ void fsePredef(struct fse *t, const short *norm, int nsym, int al) {
	int size = 1 << al, high = size - 1;
	u16 next[64];
	for (int s = 0; s < nsym; s++) {
		if (norm[s] == -1) {
			t[high--].sym = (u8)s;
			next[s] = 1;
		} else {
			next[s] = (u16)norm[s];
		}
	}
	int step = (size >> 1) + (size >> 3) + 3, mask = size - 1, pos = 0;
	for (int s = 0; s < nsym; s++) {
		for (int i = 0; i < norm[s]; i++) {
			t[pos].sym = (u8)s;
			do {
				pos = (pos + step) & mask;
			} while (pos > high);
		}
	}
	for (int u = 0; u < size; u++) {
		int s = t[u].sym;
		u32 ns = next[s]++;
		int bits = al - highbit(ns);
		t[u].bits = (u8)bits;
		t[u].next = (u16)((ns << bits) - size);
	}
}

static __device__ const short llNorm[36] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
static __device__ const short mlNorm[53] = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
static __device__ const short ofNorm[29] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};
// Baselines and extra bits of literal length codes 16-35 and match
// length codes 32-52 (lower codes stand for themselves, plus 3 for
// match lengths).
static __device__ const u32 llBase[20] = {16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
static __device__ const u8 llBits[20] = {1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static __device__ const u32 mlBase[21] = {35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539};
static __device__ const u8 mlBits[21] = {1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// hufRead reads a Huffman tree description from src (n bytes) into h;
// it returns the bytes read, or -1, and the table's log in *log.
static __device__ i64 hufRead(const u8 *src, i64 n, u16 *h, int *log) {
	u8 w[256];
	int nw;
	i64 used;
	if (n < 1) {
		return -1;
	}
	int hb = src[0];
	if (hb < 128) {
		// Weights compressed with FSE: two states in turn over one
		// backward stream.
		struct fse t[64];
		int al;
		if (hb == 0 || hb + 1 > n) {
			return -1;
		}
		i64 d = fseRead(src + 1, hb, t, 11, 6, &al);
		if (d < 0 || d >= hb) {
			return -1;
		}
		struct bwd r;
		if (!bwdInit(&r, src + 1 + d, hb - d)) {
			return -1;
		}
		u32 s1 = (u32)bwdRead(&r, al), s2 = (u32)bwdRead(&r, al);
		nw = 0;
		for (;;) {
			if (r.over || nw > 253) {
				return -1;
			}
			w[nw++] = t[s1].sym;
			s1 = t[s1].next + (u32)bwdRead(&r, t[s1].bits);
			if (r.pos < 0) { // the stream ran out: one more from the other state
				w[nw++] = t[s2].sym;
				break;
			}
			w[nw++] = t[s2].sym;
			s2 = t[s2].next + (u32)bwdRead(&r, t[s2].bits);
			if (r.pos < 0) {
				w[nw++] = t[s1].sym;
				break;
			}
		}
		used = 1 + hb;
	} else {
		nw = hb - 127;
		used = 1 + (nw + 1) / 2;
		if (used > n) {
			return -1;
		}
		for (int i = 0; i < nw; i++) {
			u8 b = src[1 + i / 2];
			w[i] = (i & 1) ? (b & 15) : (b >> 4);
		}
	}
	if (nw > 255) {
		return -1;
	}
	u32 sum = 0;
	for (int i = 0; i < nw; i++) {
		if (w[i] > 11) {
			return -1;
		}
		if (w[i]) {
			sum += 1u << (w[i] - 1);
		}
	}
	if (sum == 0) {
		return -1;
	}
	int maxBits = highbit(sum) + 1;
	u32 total = 1u << maxBits, rest = total - sum;
	if (maxBits > 11 || (rest & (rest - 1)) != 0 || rest == 0) {
		return -1;
	}
	w[nw++] = (u8)(highbit(rest) + 1);
	// Fill the table: weights ascending, symbols in order.
	u32 start[13];
	u32 at = 0;
	for (int k = 1; k <= maxBits; k++) {
		start[k] = at;
		for (int i = 0; i < nw; i++) {
			if (w[i] == k) {
				at += (1u << k) >> 1;
			}
		}
	}
	if (at != total) {
		return -1;
	}
	for (int i = 0; i < nw; i++) {
		int k = w[i];
		if (!k) {
			continue;
		}
		u32 len = (1u << k) >> 1;
		u16 e = (u16)(i | ((maxBits + 1 - k) << 8));
		for (u32 j = 0; j < len; j++) {
			h[start[k] + j] = e;
		}
		start[k] += len;
	}
	*log = maxBits;
	return used;
}

// hufStream decodes n literals from the backward stream src (len bytes)
// into out; 0 if the stream does not decode to exactly them.
static __device__ int hufStream(const u8 *src, i64 len, const u16 *h, int log, u8 *out, u32 n) {
	struct bwd r;
	if (!bwdInit(&r, src, len)) {
		return 0;
	}
	for (u32 i = 0; i < n; i++) {
		u16 e = h[bwdPeek(&r, log)];
		out[i] = (u8)e;
		r.pos -= e >> 8;
		if (r.pos < 0) {
			return 0;
		}
	}
	return r.pos == 0;
}

// Frame state across blocks and groups.
struct frame {
	int hufLog; // 0: no Huffman table yet
	int llLog, mlLog, ofLog; // -1: no table yet
	int huf, ll, ml, of; // the slots of the tables in use
	u32 rep[3];
	u64 window; // the farthest a match may reach back
};

// litHeader parses a block's literals section at src (n bytes) into b,
// reading a new Huffman tree into slot k; it returns the section's
// size, or -1.
static __device__ i64 litHeader(const u8 *src, i64 n, struct zblk *b, struct zscratch *s, int k, struct frame *fr) {
	if (n < 1) {
		return -1;
	}
	int type = src[0] & 3, sf = (src[0] >> 2) & 3;
	b->litType = type;
	if (type < 2) { // raw, RLE
		u32 size;
		i64 hs;
		switch (sf) {
		case 0:
		case 2:
			size = src[0] >> 3;
			hs = 1;
			break;
		case 1:
			if (n < 2) {
				return -1;
			}
			size = (src[0] >> 4) + ((u32)src[1] << 4);
			hs = 2;
			break;
		default:
			if (n < 3) {
				return -1;
			}
			size = (src[0] >> 4) + ((u32)src[1] << 4) + ((u32)src[2] << 12);
			hs = 3;
		}
		if (size > MAX_BLOCK) {
			return -1;
		}
		b->nlit = size;
		b->lit = src + hs;
		if (type == 0) {
			return hs + size > n ? -1 : hs + size;
		}
		return hs + 1 > n ? -1 : hs + 1;
	}
	// Huffman-coded, with a new tree (2) or the last one (3).
	u32 regen, csize;
	i64 hs;
	int streams = sf == 0 ? 1 : 4;
	if (sf < 2) {
		if (n < 3) {
			return -1;
		}
		u32 h = src[0] | (u32)src[1] << 8 | (u32)src[2] << 16;
		regen = (h >> 4) & 0x3ff;
		csize = (h >> 14) & 0x3ff;
		hs = 3;
	} else if (sf == 2) {
		if (n < 4) {
			return -1;
		}
		u32 h = src[0] | (u32)src[1] << 8 | (u32)src[2] << 16 | (u32)src[3] << 24;
		regen = (h >> 4) & 0x3fff;
		csize = h >> 18;
		hs = 4;
	} else {
		if (n < 5) {
			return -1;
		}
		u64 h = src[0] | (u64)src[1] << 8 | (u64)src[2] << 16 | (u64)src[3] << 24 | (u64)src[4] << 32;
		regen = (u32)(h >> 4) & 0x3ffff;
		csize = (u32)(h >> 22) & 0x3ffff;
		hs = 5;
	}
	if (regen > MAX_BLOCK || hs + csize > n) {
		return -1;
	}
	const u8 *p = src + hs;
	i64 left = csize;
	if (type == 2) {
		int log;
		i64 d = hufRead(p, left, s->tab[k].huf, &log);
		if (d < 0) {
			return -1;
		}
		fr->hufLog = log;
		fr->huf = k;
		p += d;
		left -= d;
	} else if (fr->hufLog == 0) {
		return -1;
	}
	b->huf = (u8)fr->huf;
	b->hufLog = (u8)fr->hufLog;
	b->nlit = regen;
	b->lit = p;
	b->streams = streams;
	if (streams == 1) {
		b->soff[0] = 0;
		b->slen[0] = (u32)left;
		return hs + csize;
	}
	if (left < 6 || regen < 4) {
		return -1;
	}
	i64 len[4];
	len[0] = p[0] | p[1] << 8;
	len[1] = p[2] | p[3] << 8;
	len[2] = p[4] | p[5] << 8;
	len[3] = left - 6 - len[0] - len[1] - len[2];
	if (len[3] < 1) {
		return -1;
	}
	u32 per = (regen + 3) / 4;
	if (3 * per > regen) {
		return -1; // the fourth stream would have none
	}
	i64 off = 6;
	for (int i = 0; i < 4; i++) {
		b->soff[i] = (u32)off;
		b->slen[i] = (u32)len[i];
		off += len[i];
	}
	return hs + csize;
}

// table reads one of a block's sequence tables, in mode m, into t.
static __device__ i64 seqTable(const u8 *src, i64 n, int m, struct fse *t, int *log, const short *norm, int nnorm, int nsym, int al, int maxLog) {
	switch (m) {
	case 0:
		fsePredef(t, norm, nnorm, al);
		*log = al;
		return 0;
	case 1:
		if (n < 1 || src[0] >= nsym) {
			return -1;
		}
		t[0].sym = src[0];
		t[0].bits = 0;
		t[0].next = 0;
		*log = 0;
		return 1;
	case 2:
		return fseRead(src, n, t, nsym - 1, maxLog, log);
	}
	return *log < 0 ? -1 : 0; // repeat: the last table, if any
}

// blkHeader parses compressed block src (n bytes) into slot k of the
// group: its literals section and sequences section headers, their new
// tables into slot k. It returns 0, -1 (corrupt) or -2 (more sequences
// than SEQ_CAP: the CPU decodes it).
static __device__ int blkHeader(const u8 *src, i64 n, struct zscratch *s, int k, struct frame *fr) {
	struct zblk *b = &s->blk[k];
	i64 d = litHeader(src, n, b, s, k, fr);
	if (d < 0) {
		return -1;
	}
	src += d;
	n -= d;
	if (n < 1) {
		return -1;
	}
	u32 nseq = src[0];
	i64 hs = 1;
	if (nseq >= 128) {
		if (nseq < 255) {
			if (n < 2) {
				return -1;
			}
			nseq = ((nseq - 128) << 8) + src[1];
			hs = 2;
		} else {
			if (n < 3) {
				return -1;
			}
			nseq = src[1] + ((u32)src[2] << 8) + 0x7f00;
			hs = 3;
		}
	}
	src += hs;
	n -= hs;
	b->nseq = nseq;
	b->seqLen = 0;
	if (nseq == 0) {
		return n == 0 ? 0 : -1;
	}
	if (n < 1 || (src[0] & 3) != 0) {
		return -1;
	}
	if (nseq > SEQ_CAP) {
		return -2; // more than the GPU keeps: the CPU's
	}
	int mLL = src[0] >> 6, mOF = (src[0] >> 4) & 3, mML = (src[0] >> 2) & 3;
	src++;
	n--;
	struct ztab *t = &s->tab[k];
	int lg = fr->llLog;
	d = seqTable(src, n, mLL, mLL == 3 ? s->tab[fr->ll].ll : t->ll, &lg, llNorm, 36, 36, 6, 9);
	if (d < 0) {
		return -1;
	}
	fr->llLog = lg;
	fr->ll = mLL == 3 ? fr->ll : k;
	src += d;
	n -= d;
	lg = fr->ofLog;
	d = seqTable(src, n, mOF, mOF == 3 ? s->tab[fr->of].of : t->of, &lg, ofNorm, 29, 32, 5, 8);
	if (d < 0) {
		return -1;
	}
	fr->ofLog = lg;
	fr->of = mOF == 3 ? fr->of : k;
	src += d;
	n -= d;
	lg = fr->mlLog;
	d = seqTable(src, n, mML, mML == 3 ? s->tab[fr->ml].ml : t->ml, &lg, mlNorm, 53, 53, 6, 9);
	if (d < 0) {
		return -1;
	}
	fr->mlLog = lg;
	fr->ml = mML == 3 ? fr->ml : k;
	src += d;
	n -= d;
	if (n < 1 || src[n - 1] == 0) {
		return -1;
	}
	b->ll = (u8)fr->ll;
	b->ml = (u8)fr->ml;
	b->of = (u8)fr->of;
	b->llLog = (u8)fr->llLog;
	b->mlLog = (u8)fr->mlLog;
	b->ofLog = (u8)fr->ofLog;
	b->seq = src;
	b->seqLen = (u32)n;
	return 0;
}

// sequences entropy-decodes block b's sequences into out; 0 if they do
// not decode to exactly its bitstream.
static __device__ int sequences(const struct zblk *b, const struct zscratch *s, zseq *out) {
	struct bwd r;
	if (!bwdInit(&r, b->seq, b->seqLen)) {
		return 0;
	}
	const struct fse *tll = s->tab[b->ll].ll, *tml = s->tab[b->ml].ml, *tof = s->tab[b->of].of;
	u32 sLL = (u32)bwdRead(&r, b->llLog), sOF = (u32)bwdRead(&r, b->ofLog), sML = (u32)bwdRead(&r, b->mlLog);
	for (u32 i = 0; i < b->nseq; i++) {
		struct fse eo = tof[sOF], em = tml[sML], el = tll[sLL];
		u32 ofc = eo.sym, mlc = em.sym, llc = el.sym;
		if (ofc > 28 || mlc > 52 || llc > 35) {
			return 0;
		}
		u32 ofv = (1u << ofc) + (u32)bwdRead(&r, (int)ofc);
		u32 ml = mlc < 32 ? mlc + 3 : mlBase[mlc - 32] + (u32)bwdRead(&r, mlBits[mlc - 32]);
		u32 ll = llc < 16 ? llc : llBase[llc - 16] + (u32)bwdRead(&r, llBits[llc - 16]);
		if (i + 1 < b->nseq) {
			sLL = el.next + (u32)bwdRead(&r, el.bits);
			sML = em.next + (u32)bwdRead(&r, em.bits);
			sOF = eo.next + (u32)bwdRead(&r, eo.bits);
		}
		if (r.over) {
			return 0;
		}
		out[i] = (u64)ofv | (u64)ll << 29 | (u64)ml << 46;
	}
	return r.pos == 0;
}

// A batch of up to 32 sequences being executed: where each one's
// literals go (dst) and come from (lit), its literal and match lengths
// and its offset, resolved.
struct zbatch {
	u64 dst[32], off[32];
	u32 lit[32], ll[32], ml[32];
};

#ifdef ZSTD_HOST
#define SHFL(v, k) (v)
#else
#define SHFL(v, k) ((u32)__nvvm_shfl_sync_idx_i32(0xffffffffu, (int)(v), (int)(k), 0x1f))
#endif

// LONG_MATCH: a match longer than this is copied by the whole warp, a
// shorter one by its lane.
#define LONG_MATCH 64

// copyMatch copies match k of bt, its source all written, lanes of lanes.
static __device__ void copyMatch(const struct zbatch *bt, int k, u8 *out, u32 lane, u32 lanes) {
	u64 d = bt->dst[k] + bt->ll[k], off = bt->off[k];
	u32 ml = bt->ml[k];
	u64 from = d - off;
	if (off >= ml) {
		for (u32 j = lane; j < ml; j += lanes) {
			out[d + j] = out[from + j];
		}
	} else {
		u32 o32 = (u32)off; // below ml, so 32 bits
		for (u32 j = lane; j < ml; j += lanes) {
			out[d + j] = out[from + j % o32];
		}
	}
}

// matchReady reports whether match i of bt can be copied now: it is the
// first not yet copied (j0), or its source lies before limit, where j0's
// starts (all written).
static __device__ int matchReady(const struct zbatch *bt, u32 i, u32 j0, u64 limit) {
	u64 need = bt->off[i] < bt->ml[i] ? bt->off[i] : bt->ml[i];
	return i == j0 || bt->dst[i] + bt->ll[i] - bt->off[i] + need <= limit;
}

// execute makes block b's output from its literals and sequences at *op
// of out (below cap), 32 sequences at a time: their offsets resolved in
// order, their literals copied at once, then their matches in rounds,
// each match whose source is written by then (all before the first one
// not yet copied) copied by its lane.
static __device__ u64 execute(const struct zblk *b, const struct zscratch *s, int k, u8 *out, u64 *op, u64 cap, struct frame *fr, struct zbatch *bt, u32 lane, u32 lanes) {
	u64 o = *op;
	const u8 *lits = s->lits[k];
	const zseq *seq = s->seq[k];
	u32 nlit = b->nlit, lp = 0;
	for (u32 base = 0; base < b->nseq; base += 32) {
		u32 cnt = b->nseq - base < 32 ? b->nseq - base : 32;
#ifndef ZSTD_HOST
		zseq my = 0;
		if (lane < cnt) {
			my = seq[base + lane];
		}
		u32 myLL = SEQ_LL(my), myML = SEQ_ML(my), myOF = SEQ_OF(my);
#endif
		u32 lp0 = lp;
		for (u32 i = 0; i < cnt; i++) {
#ifdef ZSTD_HOST
			zseq my = seq[base + i];
			u32 myLL = SEQ_LL(my), myML = SEQ_ML(my), myOF = SEQ_OF(my);
#endif
			u32 ll = SHFL(myLL, i), ml = SHFL(myML, i), ofv = SHFL(myOF, i);
			u64 off;
			if (ofv > 3) {
				off = ofv - 3;
				fr->rep[2] = fr->rep[1];
				fr->rep[1] = fr->rep[0];
				fr->rep[0] = (u32)off;
			} else {
				u32 idx = ofv - 1 + (ll == 0);
				if (idx == 0) {
					off = fr->rep[0];
				} else {
					off = idx == 3 ? (u64)fr->rep[0] - 1 : fr->rep[idx];
					if (idx != 1) {
						fr->rep[2] = fr->rep[1];
					}
					fr->rep[1] = fr->rep[0];
					fr->rep[0] = (u32)off;
				}
			}
			if (ll > nlit - lp || off == 0 || off > o + ll || off > fr->window) {
				return ZS_ERR(ZS_ERR_CORRUPT);
			}
			if (ml > cap - o || ll > cap - o - ml) {
				return ZS_ERR(ZS_ERR_DST);
			}
			if (lane == 0) {
				bt->dst[i] = o;
				bt->off[i] = off;
				bt->lit[i] = lp;
				bt->ll[i] = ll;
				bt->ml[i] = ml;
			}
			lp += ll;
			o += ll + ml;
		}
		SYNC();
		// Literals: byte t of the batch's goes to the last sequence whose
		// literals start at or before it.
		for (u32 t = lane; t < lp - lp0; t += lanes) {
			u32 at = lp0 + t, lo = 0, hi = cnt - 1;
			while (lo < hi) {
				u32 mid = (lo + hi + 1) / 2;
				if (bt->lit[mid] <= at) {
					lo = mid;
				} else {
					hi = mid - 1;
				}
			}
			out[bt->dst[lo] + (at - bt->lit[lo])] = lits[at];
		}
		SYNC();
		// Matches: the bytes before the first match not yet copied are
		// all written.
		u32 all = cnt == 32 ? 0xffffffffu : (1u << cnt) - 1, done = 0;
		while (done != all) {
			u32 j0 = (u32)__builtin_ctz(~done);
			u64 limit = bt->dst[j0] + bt->ll[j0];
			u32 ready = 0, shorts = 0;
#ifdef ZSTD_HOST
			for (u32 i = j0; i < cnt; i++) {
				if (!(done >> i & 1) && matchReady(bt, i, j0, limit)) {
					ready |= 1u << i;
					shorts |= (u32)(bt->ml[i] <= LONG_MATCH) << i;
				}
			}
			for (u32 m = shorts; m; m &= m - 1) {
				copyMatch(bt, __builtin_ctz(m), out, 0, 1);
			}
#else
			int pred = lane < cnt && !(done >> lane & 1) && matchReady(bt, lane, j0, limit);
			ready = __nvvm_vote_ballot_sync(0xffffffffu, pred);
			shorts = __nvvm_vote_ballot_sync(0xffffffffu, pred && bt->ml[lane] <= LONG_MATCH);
			if (shorts >> lane & 1) {
				copyMatch(bt, lane, out, 0, 1);
			}
#endif
			for (u32 m = ready & ~shorts; m; m &= m - 1) {
				copyMatch(bt, __builtin_ctz(m), out, lane, lanes);
			}
			done |= ready;
			SYNC();
		}
	}
	u32 rest = nlit - lp;
	if (rest > cap - o) {
		return ZS_ERR(ZS_ERR_DST);
	}
	for (u32 j = lane; j < rest; j += lanes) {
		out[o + j] = lits[lp + j];
	}
	o += rest;
	SYNC();
	*op = o;
	return 0;
}

// copyTables carries the tables in use over to slot GROUP before a new
// group overwrites the others.
static __device__ void copyTables(struct zscratch *s, struct frame *fr, u32 lane, u32 lanes) {
	struct ztab *c = &s->tab[GROUP];
	if (fr->hufLog && fr->huf != GROUP) {
		for (u32 i = lane; i < (1 << 11); i += lanes) {
			c->huf[i] = s->tab[fr->huf].huf[i];
		}
		fr->huf = GROUP;
	}
	if (fr->llLog >= 0 && fr->ll != GROUP) {
		for (u32 i = lane; i < 512; i += lanes) {
			c->ll[i] = s->tab[fr->ll].ll[i];
		}
		fr->ll = GROUP;
	}
	if (fr->mlLog >= 0 && fr->ml != GROUP) {
		for (u32 i = lane; i < 512; i += lanes) {
			c->ml[i] = s->tab[fr->ml].ml[i];
		}
		fr->ml = GROUP;
	}
	if (fr->ofLog >= 0 && fr->of != GROUP) {
		for (u32 i = lane; i < 256; i += lanes) {
			c->of[i] = s->tab[fr->of].of[i];
		}
		fr->of = GROUP;
	}
	SYNC();
}

// decodeGroup decodes the nb blocks of s->blk: their literals (a lane a
// Huffman stream), their sequences (a lane a block), then, in order,
// their output.
static __device__ u64 decodeGroup(struct zscratch *s, int nb, u8 *out, struct zbatch *bt, u64 *op, u64 cap, u64 blockMax, struct frame *fr, u32 lane, u32 lanes) {
	if (lane == 0) {
		s->err = 0;
	}
	for (int k = 0; k < nb; k++) {
		const struct zblk *b = &s->blk[k];
		if (b->type == 2 && b->litType < 2) {
			for (u32 j = lane; j < b->nlit; j += lanes) {
				s->lits[k][j] = b->litType == 0 ? b->lit[j] : b->lit[0];
			}
		}
	}
	SYNC();
	for (u32 t = lane; t < 4 * (u32)nb; t += lanes) {
		const struct zblk *b = &s->blk[t / 4];
		u32 q = t % 4;
		if (b->type != 2 || b->litType < 2 || q >= b->streams) {
			continue;
		}
		u32 per = b->streams == 1 ? b->nlit : (b->nlit + 3) / 4;
		u32 cnt = b->streams == 1 || q < 3 ? per : b->nlit - 3 * per;
		if (!hufStream(b->lit + b->soff[q], b->slen[q], s->tab[b->huf].huf, b->hufLog, s->lits[t / 4] + q * per, cnt)) {
			s->err = 1;
		}
	}
	for (u32 k = lane; k < (u32)nb; k += lanes) {
		const struct zblk *b = &s->blk[k];
		if (b->type == 2 && b->nseq > 0 && !sequences(b, s, s->seq[k])) {
			s->err = 1;
		}
	}
	SYNC();
	if (s->err) {
		return ZS_ERR(ZS_ERR_CORRUPT);
	}
	for (int k = 0; k < nb; k++) {
		const struct zblk *b = &s->blk[k];
		u64 o = *op;
		if (b->type == 2) {
			u64 e = execute(b, s, k, out, op, cap, fr, bt, lane, lanes);
			if (e) {
				return e;
			}
			if (*op - o > blockMax) {
				return ZS_ERR(ZS_ERR_CORRUPT);
			}
			continue;
		}
		if (b->size > cap - o) {
			return ZS_ERR(ZS_ERR_DST);
		}
		for (u32 j = lane; j < b->size; j += lanes) {
			out[o + j] = b->type == 0 ? b->src[j] : b->src[0];
		}
		*op = o + b->size;
		SYNC();
	}
	return 0;
}

// zstdFrame decodes the frame of j, lane of lanes, and returns its size
// or an error code.
static __device__ u64 zstdFrame(const struct zjob *j, struct zscratch *s, struct zbatch *bt, u32 lane, u32 lanes) {
	const u8 *p = j->src;
	i64 n = (i64)j->srcSize;
	if (n < 6 || p[0] != 0x28 || p[1] != 0xb5 || p[2] != 0x2f || p[3] != 0xfd) {
		return ZS_ERR(ZS_ERR_FORMAT);
	}
	u32 fhd = p[4];
	int fcsFlag = fhd >> 6, single = (fhd >> 5) & 1, checksum = (fhd >> 2) & 1, dict = fhd & 3;
	if (fhd & 8 || dict != 0 || checksum) {
		return ZS_ERR(ZS_ERR_FORMAT);
	}
	i64 at = 5 + !single;
	u64 window = 0;
	if (!single) {
		// A window past 128 MiB: the CPU's (libzstd's limit by default).
		u32 wd = p[5];
		if ((wd >> 3) > 17) {
			return ZS_ERR(ZS_ERR_FORMAT);
		}
		u64 base = 1ull << (10 + (wd >> 3));
		window = base + (base >> 3) * (wd & 7);
	}
	int fcsSize = fcsFlag == 0 ? single : 1 << fcsFlag;
	if (at + fcsSize > n) {
		return ZS_ERR(ZS_ERR_CORRUPT);
	}
	u64 fcs = 0;
	for (int k = 0; k < fcsSize; k++) {
		fcs |= (u64)p[at + k] << (8 * k);
	}
	if (fcsSize == 2) {
		fcs += 256;
	}
	int hasFcs = fcsSize > 0;
	if (hasFcs && fcs > j->dstCap) {
		return ZS_ERR(ZS_ERR_DST);
	}
	at += fcsSize;
	struct frame fr = {0, -1, -1, -1, 0, 0, 0, 0, {1, 4, 8}, single ? fcs : window};
	// A block decodes to at most the window or 128 KiB, the smaller.
	u64 blockMax = fr.window < MAX_BLOCK ? fr.window : MAX_BLOCK;
	u64 o = 0;
	for (int last = 0; !last;) {
		copyTables(s, &fr, lane, lanes);
		int nb = 0;
		while (nb < GROUP && !last) {
			if (at + 3 > n) {
				return ZS_ERR(ZS_ERR_CORRUPT);
			}
			u32 bh = p[at] | (u32)p[at + 1] << 8 | (u32)p[at + 2] << 16;
			at += 3;
			last = bh & 1;
			int type = (bh >> 1) & 3;
			u32 size = bh >> 3;
			struct zblk *b = &s->blk[nb];
			SYNC();
			if (lane == 0) {
				b->type = type;
				b->src = p + at;
				b->size = size;
				b->nseq = 0;
			}
			SYNC();
			if (type == 1) { // RLE: size bytes of one
				if (at + 1 > n || size > blockMax) {
					return ZS_ERR(ZS_ERR_CORRUPT);
				}
				at += 1;
			} else if (type == 0) {
				if (size > n - at || size > blockMax) {
					return ZS_ERR(ZS_ERR_CORRUPT);
				}
				at += size;
			} else if (type == 2) {
				if (size > n - at || size > MAX_BLOCK) {
					return ZS_ERR(ZS_ERR_CORRUPT);
				}
				int h = blkHeader(p + at, size, s, nb, &fr);
				if (h < 0) {
					return ZS_ERR(h == -2 ? ZS_ERR_FORMAT : ZS_ERR_CORRUPT);
				}
				at += size;
			} else {
				return ZS_ERR(ZS_ERR_CORRUPT);
			}
			nb++;
		}
		SYNC();
		u64 e = decodeGroup(s, nb, j->dst, bt, &o, j->dstCap, blockMax, &fr, lane, lanes);
		if (e) {
			return e;
		}
	}
	if (at != n) {
		return ZS_ERR(ZS_ERR_FORMAT); // more frames, or a checksum: the CPU's
	}
	if (hasFcs && o != fcs) {
		return ZS_ERR(ZS_ERR_CORRUPT);
	}
	return o;
}

#ifndef ZSTD_HOST
// zstd decodes job w of jobs with block w of the grid, one warp, its
// batch of sequences in shared memory, its literals, sequences and tables in
// scratch[w], and writes the result to out[w].
extern "C" __global__ void zstd(const struct zjob *jobs, u32 n, struct zscratch *scratch, u64 *out) {
	__shared__ struct zbatch bt;
	u32 w = CTA_X;
	if (w >= n) {
		return;
	}
	u64 r = zstdFrame(&jobs[w], &scratch[w], &bt, TID_X & 31, 32);
	if ((TID_X & 31) == 0) {
		out[w] = r;
	}
}
#endif
