package cuda

import "github.com/kvikgo/kvik/internal/dl"

// LibraryEnv names the environment variable that, when set, holds the exact
// path of the CUDA driver library to load instead of searching for
// libcuda.so.1.
const LibraryEnv = "KVIK_LIBCUDA_PATH"

var lib = &dl.Library{Sonames: []string{"libcuda.so.1", "libcuda.so"}, EnvVar: LibraryEnv, What: "CUDA driver", OnLoad: initDriver}

// The result of the cuInit(0) that initDriver makes when the library
// loads: initErr when cuInit could not be called, else initResult.
var (
	initResult Result
	initErr    error
)

// initDriver initialises the driver as soon as the library is open, so
// that no caller has to remember cuda.Init. It runs inside the library's
// one-time load, which orders it before any other call of this package.
func initDriver(handle uintptr, path string) {
	r, err := dl.CallSym(handle, path, "cuInit", 0)
	initResult, initErr = Result(int32(uint32(r))), err
}

// Load opens the CUDA driver library if it is not open yet, and
// initialises the driver (cuInit(0)) once when it opens it. Every function
// in this package loads it on demand; Load lets callers test availability
// up front (Init also reports whether initialisation succeeded). The error matches ErrLibraryNotFound (errors.Is) when the
// library is missing and says which paths were tried.
func Load() error {
	_, err := lib.Load()
	return err
}

// LibraryPath returns the path libcuda was loaded from, or "".
func LibraryPath() string { return lib.Path() }

func fn(name string, alt ...string) *dl.Func {
	return &dl.Func{Lib: lib, Name: name, Alt: alt}
}
