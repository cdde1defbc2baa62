package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/libdeflate"
	"github.com/kvikgo/kvik/internal/liblz4"
	"github.com/kvikgo/kvik/internal/libzstd"
)

// TestInfoCodecs checks that kvik info, of a path and of a Zarr store,
// names the implementations KVIK_ZSTD, KVIK_LZ4 (Blosc's LZ4 writes)
// and KVIK_DEFLATE (gzip and zlib decoding) pick, and that a bad value
// of each is reported, and fails the command.
func TestInfoCodecs(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.zarr")
	newStore(t, store)
	zstdAuto, lz4Auto, deflateAuto := "go (klauspost/compress; ", "go (pierrec/lz4; ", "go (klauspost/compress; "
	if libzstd.Load() == nil {
		zstdAuto = "native (libzstd " + libzstd.Version()
	}
	if liblz4.Load() == nil {
		lz4Auto = "native (liblz4 " + liblz4.Version()
	}
	if libdeflate.Load() == nil {
		deflateAuto = "native (libdeflate, "
	}
	for _, c := range []struct {
		env, label, want string
		got              func(infoReport) codecInfo
	}{
		{"", "zstd", zstdAuto, func(r infoReport) codecInfo { return r.Zstd }},
		{"KVIK_ZSTD=go", "zstd", "go (klauspost/compress; KVIK_ZSTD=go)", func(r infoReport) codecInfo { return r.Zstd }},
		{"", "lz4", lz4Auto, func(r infoReport) codecInfo { return r.LZ4 }},
		{"KVIK_LZ4=go", "lz4", "go (pierrec/lz4; KVIK_LZ4=go)", func(r infoReport) codecInfo { return r.LZ4 }},
		{"", "deflate", deflateAuto, func(r infoReport) codecInfo { return r.Deflate }},
		{"KVIK_DEFLATE=go", "deflate", "go (klauspost/compress; KVIK_DEFLATE=go)", func(r infoReport) codecInfo { return r.Deflate }},
	} {
		var env []string
		if c.env != "" {
			env = []string{c.env}
		}
		var rep infoReport
		r := runKvik(t, env, "info", "--json", t.TempDir()).expect(t, exitOK)
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%s: invalid JSON: %v\n%s", c.env, err, r.stdout)
		}
		if got := c.got(rep); !strings.HasPrefix(got.Implementation, c.want) || got.Error != "" {
			t.Errorf("%s: %s %+v, want %q", c.env, c.label, got, c.want)
		}
		text := runKvik(t, env, "info", store).expect(t, exitOK).stdout
		if !strings.Contains(text, c.label+" ") || !strings.Contains(text, c.want) {
			t.Errorf("%s: the store's info lacks %s %q:\n%s", c.env, c.label, c.want, text)
		}
	}
	for _, v := range []string{"KVIK_ZSTD", "KVIK_LZ4", "KVIK_DEFLATE"} {
		r := runKvik(t, []string{v + "=fast"}, "info", t.TempDir()).expect(t, exitFailure)
		if !strings.Contains(r.stdout, v+`="fast"`) {
			t.Errorf("info does not report a bad %s:\n%s", v, r.stdout)
		}
	}
}
