// Package dl finds and opens shared libraries at run time and resolves their
// symbols, so that the cuda and cufile bindings build without a CUDA toolkit,
// headers or cgo.
package dl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNotFound is matched (errors.Is) by every error that reports a library
// or symbol that could not be found.
var ErrNotFound = errors.New("not found")

// Library describes a shared library that is opened lazily, once, on first
// use. The zero value is not usable: set Sonames.
type Library struct {
	// Sonames are the names tried first, through the dynamic loader's own
	// search path, in order.
	Sonames []string
	// EnvVar names an environment variable that, when set, holds the exact
	// path of the library; nothing else is tried then.
	EnvVar string
	// What names what the library provides ("CUDA driver") in the error
	// that says it is missing.
	What string
	// OnLoad, when set, runs once right after the library is opened and
	// before Load returns to anyone, with the library's handle and path. It must
	// not use this Library's Funcs (they wait for Load to finish); it can
	// call symbols with CallSym.
	OnLoad func(handle uintptr, path string)

	once   sync.Once
	handle uintptr
	path   string
	err    error
}

// LoadError reports a library that could not be opened, with every path
// tried and why each failed. Its Error is one short line; the paths tried
// and the reasons are in Tried, and printed by the %+v verb.
type LoadError struct {
	Lib    string // first soname, naming the library
	What   string // what the library provides, e.g. "CUDA driver"; may be empty
	EnvVar string // the variable that names the library's exact path; may be empty
	// FromEnv is true when EnvVar was set: its path was the one attempt.
	FromEnv bool
	Tried   []string // each attempt as "path: reason"
}

// Error says what is missing in one line: "kvik: no CUDA driver
// (libcuda.so.1 not found)". A path given by the environment variable is
// the one attempt, so its reason is kept.
func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString("kvik: ")
	if e.What != "" {
		b.WriteString("no " + e.What + " (")
	}
	if e.FromEnv && len(e.Tried) == 1 {
		b.WriteString(e.EnvVar + "=" + e.Tried[0])
	} else {
		b.WriteString(e.Lib + " not found")
	}
	if e.What != "" {
		b.WriteString(")")
	}
	return b.String()
}

// Detail is Error followed by every path tried and why it failed.
func (e *LoadError) Detail() string {
	return e.Error() + ": tried " + strings.Join(e.Tried, "; ")
}

// Format prints Error for %v and %s, and Detail for %+v.
func (e *LoadError) Format(s fmt.State, verb rune) {
	switch {
	case verb == 'v' && s.Flag('+'):
		io.WriteString(s, e.Detail())
	case verb == 'q':
		fmt.Fprintf(s, "%q", e.Error())
	default:
		io.WriteString(s, e.Error())
	}
}

// Is reports whether target is ErrNotFound.
func (e *LoadError) Is(target error) bool { return target == ErrNotFound }

// SymbolError reports a symbol missing from a loaded library.
type SymbolError struct {
	Lib, Symbol string
}

func (e *SymbolError) Error() string {
	return fmt.Sprintf("symbol %s not found in %s", e.Symbol, e.Lib)
}

// Is reports whether target is ErrNotFound.
func (e *SymbolError) Is(target error) bool { return target == ErrNotFound }

// Candidates lists the paths Load tries, in order.
func (l *Library) Candidates() []string {
	if l.EnvVar != "" {
		if p := os.Getenv(l.EnvVar); p != "" {
			return []string{p}
		}
	}
	c := append([]string(nil), l.Sonames...)
	var dirs []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := os.Getenv(v); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	switch runtime.GOARCH {
	case "amd64":
		dirs = append(dirs, "/usr/local/cuda/targets/x86_64-linux/lib")
	case "arm64":
		dirs = append(dirs, "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/local/cuda/targets/aarch64-linux/lib")
	}
	for _, d := range dirs {
		for _, s := range l.Sonames {
			c = append(c, filepath.Join(d, s))
		}
	}
	return c
}

// Load opens the library on first call and returns its handle; later calls
// return the same result. It is safe for concurrent use.
func (l *Library) Load() (uintptr, error) {
	l.once.Do(func() {
		var tried []string
		for _, p := range l.Candidates() {
			h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				l.handle, l.path = h, p
				if l.OnLoad != nil {
					l.OnLoad(h, p)
				}
				return
			}
			tried = append(tried, p+": "+err.Error())
		}
		l.err = &LoadError{Lib: l.Sonames[0], What: l.What, EnvVar: l.EnvVar,
			FromEnv: l.EnvVar != "" && os.Getenv(l.EnvVar) != "", Tried: tried}
	})
	return l.handle, l.err
}

// Path returns the path the library was opened from, or "" if it is not
// loaded.
func (l *Library) Path() string {
	if _, err := l.Load(); err != nil {
		return ""
	}
	return l.path
}

// Sym resolves name in the library, loading it first if needed.
func (l *Library) Sym(name string) (uintptr, error) {
	h, err := l.Load()
	if err != nil {
		return 0, err
	}
	p, err := purego.Dlsym(h, name)
	if err != nil || p == 0 {
		return 0, &SymbolError{Lib: l.path, Symbol: name}
	}
	return p, nil
}

// CallSym resolves name in the library opened as handle (from path, for
// errors) and calls it
// with args, returning RAX. It is meant for OnLoad, which runs before
// Funcs can be used.
func CallSym(handle uintptr, path, name string, args ...uintptr) (uintptr, error) {
	p, err := purego.Dlsym(handle, name)
	if err != nil || p == 0 {
		return 0, &SymbolError{Lib: path, Symbol: name}
	}
	r, _, _ := purego.SyscallN(p, args...)
	return r, nil
}

// Func is a lazily resolved C function of a Library. Resolve once with
// Addr; Call panics never: a missing symbol is returned as an error.
type Func struct {
	Lib  *Library
	Name string
	// Alt names tried in order when Name is missing (older versioned
	// symbols, for example cuFileDriverClose for cuFileDriverClose_v2).
	Alt []string

	once sync.Once
	addr uintptr
	err  error
}

// Addr returns the function's address, resolving it on first call.
func (f *Func) Addr() (uintptr, error) {
	f.once.Do(func() {
		for _, n := range append([]string{f.Name}, f.Alt...) {
			if f.addr, f.err = f.Lib.Sym(n); f.err == nil {
				return
			}
		}
	})
	return f.addr, f.err
}

// Call resolves the function and calls it with args, returning RAX.
// Arguments that are pointers must be converted to uintptr in the call
// expression itself so that they stay alive and unmoved for the call.
//
//go:uintptrescapes
func (f *Func) Call(args ...uintptr) (uintptr, error) {
	a, err := f.Addr()
	if err != nil {
		return 0, err
	}
	r, _, _ := purego.SyscallN(a, args...)
	return r, nil
}

// GoString copies the NUL-terminated C string at p ("" for nil), such as
// the static texts C libraries return for their error codes.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// VersionError reports a library older than the oldest a binding
// accepts. It matches ErrNotFound: such a library is as good as missing.
// Versions are numbered major*10000 + minor*100 + release, as zstd's and
// LZ4's versionNumber functions give them.
type VersionError struct {
	What    string // what the library provides: "zstd library"
	Path    string
	Version uint32
	Min     uint32
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("kvik: %s %s is version %s, older than %s", e.What, e.Path, VersionString(e.Version), VersionString(e.Min))
}

// Is reports whether target is ErrNotFound.
func (e *VersionError) Is(target error) bool { return target == ErrNotFound }

// VersionString formats a version numbered major*10000 + minor*100 +
// release: "1.5.4".
func VersionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

// CheckVersion returns a *VersionError when v is below oldest, else nil.
func CheckVersion(what, path string, v, oldest uint32) error {
	if v < oldest {
		return &VersionError{What: what, Path: path, Version: v, Min: oldest}
	}
	return nil
}
