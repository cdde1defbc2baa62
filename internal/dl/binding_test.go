package dl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinding binds the C library with getpagesize as the version
// function (its page size is a number the test knows: os.Getpagesize),
// and checks a version at the minimum passes, one below it fails as
// VersionError matching ErrNotFound, a missing symbol or library fails
// Load the same way every time, and Path and Version are empty on
// failure.
func TestBinding(t *testing.T) {
	libc := &Library{Sonames: []string{"libc.so.6"}, What: "C library"}
	if _, err := libc.Load(); err != nil {
		t.Skipf("no libc.so.6 to load: %v", err)
	}
	page := uint32(os.Getpagesize())
	version := &Func{Lib: libc, Name: "getpagesize"}
	getpid := &Func{Lib: libc, Name: "getpid"}

	ok := &Binding{Lib: libc, Funcs: []*Func{getpid, version}, VersionNumber: version, Min: page}
	if err := ok.Load(); err != nil {
		t.Fatalf("Load at the minimum version: %v", err)
	}
	if ok.Path() == "" || ok.Version() != VersionString(page) {
		t.Fatalf("Path %q, Version %q, want a path and %s", ok.Path(), ok.Version(), VersionString(page))
	}

	old := &Binding{Lib: libc, Funcs: []*Func{version}, VersionNumber: version, Min: page + 1}
	var ve *VersionError
	if err := old.Load(); !errors.Is(err, ErrNotFound) || !errors.As(err, &ve) || ve.Version != page || ve.Min != page+1 {
		t.Fatalf("Load below the minimum: %v", err)
	}
	if old.Path() != "" || old.Version() != "" {
		t.Fatalf("a library too old has Path %q, Version %q", old.Path(), old.Version())
	}

	noVersion := &Binding{Lib: libc, Funcs: []*Func{getpid}}
	if err := noVersion.Load(); err != nil || noVersion.Version() != "" || noVersion.Path() == "" {
		t.Fatalf("without a version function: %v, Version %q, Path %q", err, noVersion.Version(), noVersion.Path())
	}

	missing := &Binding{Lib: libc, Funcs: []*Func{getpid, {Lib: libc, Name: "kvik_no_such_symbol"}}}
	err := missing.Load()
	var se *SymbolError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &se) || missing.Load() != err {
		t.Fatalf("a missing symbol: %v (then %v)", err, missing.Load())
	}

	bad := filepath.Join(t.TempDir(), "libnothere.so")
	t.Setenv("KVIK_TEST_LIBZ", bad)
	gone := &Library{Sonames: []string{"libnothere.so.1"}, EnvVar: "KVIK_TEST_LIBZ"}
	absent := &Binding{Lib: gone, Funcs: []*Func{{Lib: gone, Name: "f"}}, VersionNumber: &Func{Lib: gone, Name: "v"}}
	if err := absent.Load(); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), bad) || absent.Path() != "" || absent.Version() != "" {
		t.Fatalf("a missing library: %v, Path %q, Version %q", err, absent.Path(), absent.Version())
	}
}
