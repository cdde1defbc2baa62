package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// TestWatchFile: the check finds a write in place (the same size, or a
// longer file) through a FileHandle and an MmapHandle, naming the file;
// it finds nothing for an untouched file, for a file whose path a rename
// gave to another (the handle still reads the old one), or for a
// RemoteHandle (pinned to one version instead).
func TestWatchFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.bin")
	data := bytes.Repeat([]byte("kvik"), 5000)
	reset := func() {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour) // so a write's modification time differs
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	write := func(off int64, b []byte) {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	open := map[string]func() (kvik.Reader, error){
		"FileHandle": func() (kvik.Reader, error) { return kvik.Open(p, "r", 0) },
		"MmapHandle": func() (kvik.Reader, error) { return kvik.OpenMmap(p, "r") },
	}
	for name, o := range open {
		for _, c := range []struct {
			what    string
			change  func()
			changed bool
		}{
			{"untouched", func() {}, false},
			{"a byte rewritten", func() { write(100, []byte{'X'}) }, true},
			{"appended to", func() { write(int64(len(data)), []byte("more")) }, true},
			{"replaced by rename", func() {
				if err := os.WriteFile(p+".new", data, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(p+".new", p); err != nil {
					t.Fatal(err)
				}
			}, false},
		} {
			reset()
			r, err := o()
			if err != nil {
				t.Fatal(err)
			}
			check := kvik.WatchFile(r)
			c.change()
			err = check()
			r.Close()
			var pe *fs.PathError
			switch {
			case c.changed && (!errors.Is(err, kvik.ErrFileChanged) || !errors.As(err, &pe) || pe.Path != p):
				t.Errorf("%s, %s: %v, want ErrFileChanged naming %s", name, c.what, err, p)
			case !c.changed && err != nil:
				t.Errorf("%s, %s: %v, want nil", name, c.what, err)
			}
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	rh, err := kvik.OpenHTTP(context.Background(), srv.URL+"/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer rh.Close()
	if err := kvik.WatchFile(rh)(); err != nil {
		t.Errorf("RemoteHandle: %v, want nil", err)
	}
}
