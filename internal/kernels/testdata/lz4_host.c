// The Blosc LZ4 encoder of lz4.cu built for the CPU, one thread, for
// TestBloscLZ4Model: it reads jobs from stdin, each seven u64s (rows,
// width, pitch, block size, type size, flags, fill) and the chunk's
// source bytes (pitch * (rows - 1) + width), and writes for each the u64
// size of the Blosc chunk, the u64 fill flag and the chunk.
#define LZ4_HOST
#include "../lz4.cu"
#include <stdio.h>
#include <stdlib.h>

static int readAll(void *p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main(int argc, char **argv) {
	static u32 ht[HT_SIZE];
	if (argc > 1 && strcmp(argv[1], "sizes") == 0) {
		printf("%zu\n", sizeof(struct bchunk));
		return 0;
	}
	u64 h[7];
	while (readAll(h, sizeof h)) {
		u64 srcLen = h[2] * (h[0] - 1) + h[1], n = h[0] * h[1], nb = (n + h[3] - 1) / h[3];
		// Each buffer of its own, exactly as large, so that a sanitizer
		// sees any access past it.
		u8 *src = malloc(srcLen), *shuf = malloc(n), *slots = malloc(nb * (4 + h[3])), *out = malloc(n + 16);
		if (!src || !shuf || !slots || !out || !readAll(src, srcLen)) {
			return 2;
		}
		struct bchunk c = {src, shuf, slots, out, h[2], h[6], (u32)h[0], (u32)h[1], (u32)h[3], (u32)h[4], (u32)h[5]};
		encodeChunk(&c, ht);
		u64 r[2] = {c.size, c.differs};
		fwrite(r, sizeof r, 1, stdout);
		fwrite(out, 1, c.size, stdout);
		free(src);
		free(shuf);
		free(slots);
		free(out);
	}
	return 0;
}
