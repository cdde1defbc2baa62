package dl

import (
	"errors"
	"path/filepath"
	"strings"
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
