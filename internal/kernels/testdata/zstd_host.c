// The zstd decoder of zstd.cu built for the CPU, one thread, for
// TestZstdModel: it reads jobs from stdin, each a u64 frame size, a u64
// destination size and the frame, and writes for each the u64 result
// (the decoded size, or an error code from the top) and, unless an
// error, the decoded bytes.
#define ZSTD_HOST
#include "../zstd.cu"
#include <stdio.h>
#include <stdlib.h>

static int readAll(void *p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main(int argc, char **argv) {
	static struct zscratch s;
	static struct zbatch bt;
	if (argc > 1 && strcmp(argv[1], "sizes") == 0) {
		printf("%zu %zu\n", sizeof(struct zjob), sizeof(struct zscratch));
		return 0;
	}
	u64 hdr[2];
	while (readAll(hdr, sizeof hdr)) {
		// Each buffer of its own, exactly as large, so that a sanitizer
		// sees any access past it.
		u8 *src = malloc(hdr[0] ? hdr[0] : 1), *dst = malloc(hdr[1] ? hdr[1] : 1);
		if (!src || !dst || !readAll(src, hdr[0])) {
			return 2;
		}
		struct zjob j = {src, dst, hdr[0], hdr[1]};
		u64 r = zstdFrame(&j, &s, &bt, 0, 1);
		fwrite(&r, sizeof r, 1, stdout);
		if (r <= hdr[1]) {
			fwrite(dst, 1, r, stdout);
		}
		free(src);
		free(dst);
	}
	return 0;
}
