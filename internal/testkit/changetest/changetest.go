// Package changetest checks that a file format's loads notice a file
// written to in place while they read it (kvik.ErrFileChanged). It is
// imported by tests only.
package changetest

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// Loader is a format's host loads, by name and through an open handle
// (a *kvik.FileHandle); each calls midway once while it loads (between
// the header and the data). ByName may be nil, for a format whose load
// by name has no hook to call midway from.
type Loader struct {
	ByName   func(ctx context.Context, name string, midway func()) (io.Closer, error)
	ByReader func(ctx context.Context, r kvik.Reader, midway func()) (io.Closer, error)
}

// Run checks l on the file at path: a load during which the file is
// written to in place (at its size) fails with kvik.ErrFileChanged, by
// name and through a handle; a load of the untouched file passes, and so
// does one during which another file is renamed over path (the handle
// still reads the old one).
func Run(t *testing.T, path string, l Loader) {
	t.Helper()
	ctx := context.Background()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A modification time well in the past, so a write's differs
	// whatever the file system's timestamp granularity.
	past := func() {
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	touch := func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		f.WriteAt([]byte{^orig[len(orig)-1]}, int64(len(orig)-1))
	}
	replace := func() {
		if err := os.WriteFile(path+".new", orig, 0o644); err != nil {
			t.Error(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Error(err)
		}
	}
	past()
	if l.ByName != nil {
		if m, err := l.ByName(ctx, path, touch); !errors.Is(err, kvik.ErrFileChanged) {
			if err == nil {
				m.Close()
			}
			t.Fatalf("load of a file written to midway: %v, want ErrFileChanged", err)
		}
		past()
	}
	h, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, c := range []struct {
		what    string
		midway  func()
		changed bool
	}{
		{"written to midway", touch, true},
		{"untouched", func() {}, false},
		{"replaced by rename midway", replace, false},
	} {
		m, err := l.ByReader(ctx, h, c.midway)
		if err == nil {
			m.Close()
		}
		if c.changed != errors.Is(err, kvik.ErrFileChanged) || (!c.changed && err != nil) {
			t.Errorf("load through a handle of a file %s: %v (want ErrFileChanged: %v)", c.what, err, c.changed)
		}
	}
}
