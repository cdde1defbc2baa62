package cuda

import "github.com/kvikgo/kvik/internal/dl"

// LibraryEnv names the environment variable that, when set, holds the exact
// path of the CUDA driver library to load instead of searching for
// libcuda.so.1.
const LibraryEnv = "KVIK_LIBCUDA_PATH"

var lib = &dl.Library{Sonames: []string{"libcuda.so.1", "libcuda.so"}, EnvVar: LibraryEnv}

// Load opens the CUDA driver library if it is not open yet. Every function
// in this package loads it on demand; Load lets callers test availability
// up front. The error matches ErrLibraryNotFound (errors.Is) when the
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
