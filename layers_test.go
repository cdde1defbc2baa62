package kvik_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
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
	{"cuda", "cufile", "internal/libzstd", "internal/liblz4", "internal/libdeflate"},
	// The engine: imports nothing of the root package.
	{"internal/blockdev", "internal/crcsum", "internal/devmem", "internal/hostmem", "internal/kernels", "internal/numa", "internal/posix", "internal/realpath", "internal/remote", "internal/sched", "internal/staging"},
	{"."}, // kvik: handles, sources, the settings
	// Above the root: the formats and what they share.
	{"internal/formatkit/tensorload", "internal/formatkit/zarrtune", "internal/formatkit/npytime", "internal/formatkit/npydescr", "internal/formatkit/pylit", "internal/formatkit/pickle", "internal/formatkit/zipkit", "internal/formatkit/codecpick", "safetensors", "npy", "gguf", "zarr", "torch"},
	// Tools and test kits.
	{"internal/benchplot", "internal/testkit/gputest", "internal/testkit/httpfault", "internal/testkit/s3test", "internal/testkit/tmpfstest", "internal/testkit/redacttest", "internal/testkit/logtest", "internal/testkit/changetest", "internal/testkit/fskinds", "internal/testkit/fielddata", "internal/testkit/childtest", "internal/testkit/libtest", "internal/testkit/pyfind",
		"cmd/kvik", "bench/kvikio/compare", "bench/zarrbench", "bench/zarrremotebench", "bench/loadbench"},
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

// fileLayers places every non-test file of the root package in one of
// its three layers (docs/design.md, "The root package"), from the
// bottom. A file may use identifiers declared in files of its own layer
// or of those below it, never above.
var fileLayers = [][]string{
	// Ground: settings (the cuFile driver's too), errors, the Future, the
	// op runner, the process's pools and their staging, buffer
	// registration, ranges, open flags.
	{"bounce.go", "compat.go", "defaults.go", "devicemem.go", "doc.go", "driver.go", "errors.go", "future.go", "logging.go", "numa.go",
		"openflags.go", "oprun.go", "pagecache.go", "pieces.go", "pools.go", "ranges.go", "readpolicy.go", "register.go", "staged.go", "tuning.go", "warmup.go"},
	// Handles: FileHandle, MmapHandle, RemoteHandle, BatchHandle and
	// their read and write paths.
	{"async.go", "batch.go", "device.go", "filehandle.go", "hostio.go", "mmap.go", "mmap_register.go", "overread.go",
		"readhandle.go", "remote.go", "residency.go", "vectored.go", "zerocopy.go"},
	// Entry points: OpenReader, SaveFile and the saves, uploads,
	// RemotePrefix, the whole-file helpers.
	{"filewatch.go", "reader.go", "remote_prefix.go", "remote_upload.go", "savefile.go", "savepieces.go", "wholefile.go"},
}

// TestFileLayers type-checks the root package and fails when a file uses
// an identifier declared in a file of a higher layer of fileLayers, or
// when a file is in no layer (so a new file gets placed).
func TestFileLayers(t *testing.T) {
	layerOf := map[string]int{}
	for i, fs := range fileLayers {
		for _, f := range fs {
			if _, dup := layerOf[f]; dup {
				t.Errorf("%s is in two layers of fileLayers", f)
			}
			layerOf[f] = i
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok {
			continue
		}
		if _, ok := layerOf[name]; !ok {
			t.Errorf("%s is in no layer of fileLayers (layers_test.go): place it", name)
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) != len(layerOf) {
		for name := range layerOf {
			if !fileExists(name) {
				t.Errorf("fileLayers lists %s, which is not in the package", name)
			}
		}
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: exportImporter(t, fset, files)}
	pkg, err := conf.Check("github.com/kvikgo/kvik", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"ground", "handles", "entry points"}
	var bad []string
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		from := fset.Position(id.Pos())
		to := fset.Position(obj.Pos()).Filename
		lf, lt := layerOf[from.Filename], layerOf[to]
		if lt <= lf {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s uses %s, declared in %s: %s may not use %s (docs/design.md, The root package)", from, obj.Name(), to, names[lf], names[lt]))
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// exportImporter returns an importer of the compiled export data of the
// packages files import, from "go list -export" (the build cache); without
// a go command (the GPU machines) the test skips.
func exportImporter(t *testing.T, fset *token.FileSet, files []*ast.File) types.Importer {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		// go/importer's source importer asks the go command too.
		t.Skipf("no go command (%v): the layers are checked where Go is installed (CI)", err)
	}
	args := []string{"list", "-deps", "-export", "-f", "{{.ImportPath}}={{.Export}}"}
	for _, f := range files {
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p != "C" && p != "unsafe" && !slices.Contains(args, p) {
				args = append(args, p)
			}
		}
	}
	out, err := exec.Command(gocmd, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list -export: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	export := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if p, file, ok := strings.Cut(strings.TrimSpace(line), "="); ok && file != "" {
			export[p] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := export[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}
