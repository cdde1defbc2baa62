package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/liblz4"
	"github.com/kvikgo/kvik/internal/libzstd"
)

// TestInfoZstd checks that kvik info, of a path and of a Zarr store,
// names the zstd implementation KVIK_ZSTD picks, and that a bad value is
// reported, and fails the command.
func TestInfoZstd(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.zarr")
	newStore(t, store)
	auto := "go (klauspost/compress; "
	if libzstd.Load() == nil {
		auto = "native (libzstd " + libzstd.Version()
	}
	for _, c := range []struct{ env, want string }{
		{"", auto},
		{"KVIK_ZSTD=go", "go (klauspost/compress; KVIK_ZSTD=go)"},
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
		if !strings.HasPrefix(rep.Zstd.Implementation, c.want) || rep.Zstd.Error != "" {
			t.Errorf("%s: zarr_zstd %+v, want %q", c.env, rep.Zstd, c.want)
		}
		text := runKvik(t, env, "info", store).expect(t, exitOK).stdout
		if !strings.Contains(text, "zstd") || !strings.Contains(text, c.want) {
			t.Errorf("%s: the store's info lacks %q:\n%s", c.env, c.want, text)
		}
	}
	r := runKvik(t, []string{"KVIK_ZSTD=fast"}, "info", t.TempDir()).expect(t, exitFailure)
	if !strings.Contains(r.stdout, `KVIK_ZSTD="fast"`) {
		t.Errorf("info does not report a bad KVIK_ZSTD:\n%s", r.stdout)
	}
}

// TestInfoLZ4 checks that kvik info, of a path and of a Zarr store,
// names the implementation KVIK_LZ4 picks for Blosc's LZ4 blocks, and
// that a bad value is reported, and fails the command.
func TestInfoLZ4(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.zarr")
	newStore(t, store)
	auto := "go (pierrec/lz4; "
	if liblz4.Load() == nil {
		auto = "native (liblz4 " + liblz4.Version()
	}
	for _, c := range []struct{ env, want string }{
		{"", auto},
		{"KVIK_LZ4=go", "go (pierrec/lz4; KVIK_LZ4=go)"},
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
		if !strings.HasPrefix(rep.LZ4.Implementation, c.want) || rep.LZ4.Error != "" {
			t.Errorf("%s: zarr_lz4 %+v, want %q", c.env, rep.LZ4, c.want)
		}
		text := runKvik(t, env, "info", store).expect(t, exitOK).stdout
		if !strings.Contains(text, "lz4") || !strings.Contains(text, c.want) {
			t.Errorf("%s: the store's info lacks %q:\n%s", c.env, c.want, text)
		}
	}
	r := runKvik(t, []string{"KVIK_LZ4=fast"}, "info", t.TempDir()).expect(t, exitFailure)
	if !strings.Contains(r.stdout, `KVIK_LZ4="fast"`) {
		t.Errorf("info does not report a bad KVIK_LZ4:\n%s", r.stdout)
	}
}
