package kvik_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The tiers of docs/design.md ("Layers"), from the bottom: each package
// may import only packages of its own tier or of those below it (and the
// standard library and third-party modules).
var tiers = [][]string{
	{"internal/dl"},
	{"cuda", "cufile"},
	// The engine: imports nothing of the root package.
	{"internal/blockdev", "internal/devmem", "internal/hostmem", "internal/numa", "internal/posix", "internal/remote", "internal/sched", "internal/staging"},
	{"."}, // kvik: handles, sources, the settings
	// Above the root: the formats and what they share.
	{"internal/formatkit/tensorload", "safetensors", "npy", "gguf", "zarr"},
	// Tools and test kits.
	{"internal/benchplot", "internal/testkit/gputest", "internal/testkit/httpfault", "internal/testkit/s3test", "internal/testkit/tmpfstest", "internal/testkit/redacttest", "internal/testkit/changetest",
		"cmd/kvik", "bench/kvikio/compare", "bench/zarrbench", "bench/zarrremotebench"},
}

// TestLayers parses the non-test files of every package in tiers and
// fails on an import that reaches up a tier, or on a package of the
// module that no tier lists (so a new package gets placed).
func TestLayers(t *testing.T) {
	const mod = "github.com/kvikgo/kvik"
	tierOf := map[string]int{}
	for i, ps := range tiers {
		for _, p := range ps {
			tierOf[p] = i
		}
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || fileExists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		mine, ok := tierOf[pkg]
		if !ok {
			t.Errorf("package %s (%s) is in no tier of TestLayers", pkg, path)
			return nil
		}
		seen[pkg] = true
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if ip != mod && !strings.HasPrefix(ip, mod+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(ip, mod), "/")
			if dep == "" {
				dep = "."
			}
			if tier, ok := tierOf[dep]; !ok || tier > mine {
				t.Errorf("%s (tier %d) imports %s (tier %d): an import may not reach up (docs/design.md, Layers)", path, mine, dep, tier)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range tiers {
		for _, p := range ps {
			if !seen[p] && !slices.Contains([]string{"."}, p) {
				t.Errorf("tier package %s has no Go files: update TestLayers", p)
			}
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
