// The deflate decoder of inflate.cu built for the CPU, one thread, for
// TestInflateModel: it reads jobs from stdin, each a u64 stream size, a
// u64 destination size, a u64 format (0 raw, 1 gzip, 2 zlib) and the
// stream, and writes for each the u64 result (the decoded size, or an
// error code from the top) and, unless an error, the decoded bytes.
#define INFLATE_HOST
#include "../inflate.cu"
#include <stdio.h>
#include <stdlib.h>

static int readAll(void *p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main(int argc, char **argv) {
	static struct itab t;
	if (argc > 1 && strcmp(argv[1], "sizes") == 0) {
		printf("%zu\n", sizeof(struct ijob));
		return 0;
	}
	u64 hdr[3];
	while (readAll(hdr, sizeof hdr)) {
		// Each buffer of its own, exactly as large, so that a sanitizer
		// sees any access past it.
		u8 *src = malloc(hdr[0] ? hdr[0] : 1), *dst = malloc(hdr[1] ? hdr[1] : 1);
		if (!src || !dst || !readAll(src, hdr[0])) {
			return 2;
		}
		struct ijob j = {src, dst, hdr[0], hdr[1]};
		u64 r = inflateJob(&j, (u32)hdr[2], &t, 0, 1);
		fwrite(&r, sizeof r, 1, stdout);
		if (r <= hdr[1]) {
			fwrite(dst, 1, r, stdout);
		}
		free(src);
		free(dst);
	}
	return 0;
}
