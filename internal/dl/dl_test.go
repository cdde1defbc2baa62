package dl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCandidatesOrder(t *testing.T) {
	t.Setenv("CUDA_HOME", "/opt/cuda")
	t.Setenv("CUDA_PATH", "")
	l := &Library{Sonames: []string{"libx.so.1", "libx.so"}, EnvVar: "KVIK_TEST_LIBX"}
	c := l.Candidates()
	want := []string{"libx.so.1", "libx.so", "/opt/cuda/lib64/libx.so.1", "/opt/cuda/lib64/libx.so"}
	for i, w := range want {
		if c[i] != w {
			t.Fatalf("candidate %d = %q, want %q (all: %v)", i, c[i], w, c)
		}
	}
	if !strings.Contains(strings.Join(c, " "), "/usr/local/cuda/lib64/libx.so.1") {
		t.Fatalf("no toolkit lib64 in %v", c)
	}
	t.Setenv("KVIK_TEST_LIBX", "/exact/libx.so")
	if c := l.Candidates(); len(c) != 1 || c[0] != "/exact/libx.so" {
		t.Fatalf("with the env variable: %v", c)
	}
}

func TestMissingLibrary(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "libnothere.so")
	t.Setenv("KVIK_TEST_LIBY", bad)
	l := &Library{Sonames: []string{"libnothere.so.1"}, EnvVar: "KVIK_TEST_LIBY"}
	_, err := l.Load()
	var le *LoadError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &le) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Load: %v", err)
	}
	if _, err2 := l.Load(); err2 != err {
		t.Fatal("Load must report the first result again")
	}
	f := &Func{Lib: l, Name: "nothing"}
	if _, err := f.Call(1, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Call on a missing library: %v", err)
	}
	if l.Path() != "" {
		t.Fatalf("Path = %q", l.Path())
	}
}

func TestMissingSymbol(t *testing.T) {
	l := &Library{Sonames: []string{"libc.so.6"}}
	if _, err := l.Load(); err != nil {
		t.Skipf("no libc.so.6 to load: %v", err)
	}
	f := &Func{Lib: l, Name: "kvik_no_such_symbol", Alt: []string{"kvik_nor_this"}}
	_, err := f.Addr()
	var se *SymbolError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &se) || se.Symbol != "kvik_nor_this" {
		t.Fatalf("Addr: %v", err)
	}
	g := &Func{Lib: l, Name: "kvik_no_such_symbol", Alt: []string{"getpid"}}
	if r, err := g.Call(); err != nil || r == 0 {
		t.Fatalf("fallback symbol getpid: %d, %v", r, err)
	}
}

// TestOnLoad loads the C library, which every Linux system has: OnLoad
// must run exactly once, before any Load returns, and CallSym must reach
// the library's functions from inside it.
func TestOnLoad(t *testing.T) {
	var calls atomic.Int32
	var pid uintptr
	l := &Library{Sonames: []string{"libc.so.6"}}
	l.OnLoad = func(h uintptr, path string) {
		calls.Add(1)
		var err error
		if pid, err = CallSym(h, path, "getpid"); err != nil {
			t.Errorf("CallSym(getpid): %v", err)
		}
		if _, err := CallSym(h, path, "kvik_no_such_symbol"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), path) {
			t.Errorf("CallSym of a missing symbol: %v", err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := l.Load(); err != nil {
				t.Error(err)
				return
			}
			if int(pid) != os.Getpid() {
				t.Errorf("after Load, getpid from OnLoad = %d, want %d", pid, os.Getpid())
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnLoad ran %d times, want 1", n)
	}
}

// TestOnLoadNotCalledOnFailure checks that a library that cannot be
// opened runs no hook.
func TestOnLoadNotCalledOnFailure(t *testing.T) {
	t.Setenv("KVIK_TEST_LIBZ", filepath.Join(t.TempDir(), "libz-missing.so"))
	l := &Library{Sonames: []string{"libz-missing.so"}, EnvVar: "KVIK_TEST_LIBZ",
		OnLoad: func(uintptr, string) { t.Error("OnLoad ran for a library that did not load") }}
	if _, err := l.Load(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load: %v", err)
	}
}

// A missing library is one short line; the paths tried come with %+v.
func TestLoadErrorShort(t *testing.T) {
	l := &Library{Sonames: []string{"libkvik-nothere.so.1", "libkvik-nothere.so"}, EnvVar: "KVIK_TEST_LIBZ", What: "test driver"}
	_, err := l.Load()
	const want = "kvik: no test driver (libkvik-nothere.so.1 not found)"
	if err == nil || err.Error() != want || fmt.Sprint(err) != want || fmt.Sprintf("%s", err) != want {
		t.Fatalf("Load: %q, want %q", err, want)
	}
	wrapped := fmt.Errorf("read model.safetensors: %w", err)
	var le *LoadError
	if !errors.Is(wrapped, ErrNotFound) || !errors.As(wrapped, &le) {
		t.Fatalf("wrapped error %v does not match", wrapped)
	}
	detail := fmt.Sprintf("%+v", le)
	for _, c := range l.Candidates() {
		if !strings.Contains(detail, c+": ") {
			t.Errorf("%%+v lacks the attempt at %s: %s", c, detail)
		}
	}
	if !strings.HasPrefix(detail, want+": tried ") {
		t.Errorf("%%+v = %q", detail)
	}
}

func TestGoString(t *testing.T) {
	b := []byte("ZSTD error\x00after")
	if s := GoString(&b[0]); s != "ZSTD error" {
		t.Errorf("GoString = %q", s)
	}
	if s := GoString(&b[len(b)-6]); s != "" {
		t.Errorf("GoString of an empty string = %q", s)
	}
	if s := GoString(nil); s != "" {
		t.Errorf("GoString(nil) = %q", s)
	}
}
