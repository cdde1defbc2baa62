// Package codecpick reads the environment variables that pick a codec's
// implementation, the system's library or Go's: KVIK_ZSTD, KVIK_LZ4 and
// KVIK_DEFLATE, which zarr documents and npy's .npz archives honour too.
package codecpick

import (
	"fmt"
	"os"
	"strings"

	"github.com/kvikgo/kvik"
)

// DeflateEnv picks the DEFLATE decoder: libdeflate or klauspost/compress
// (zarr.DeflateEnv, which documents it).
const DeflateEnv = "KVIK_DEFLATE"

// Native reports whether the value v of the environment variable env
// (set or not) that picks a codec's implementation picks the system's
// library ("auto" where load opens it, or "native") rather than the Go
// one ("go", or "auto" where load fails). A value it does not know, or
// native where load fails, is an error wrapping kvik.ErrBadEnv, never a
// silent fallback.
func Native(env, v string, set bool, load func() error) (bool, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	switch {
	case !set:
		v = "auto"
	case v == "":
		return false, fmt.Errorf("%w: %s is set but empty", kvik.ErrBadEnv, env)
	}
	switch v {
	case "auto":
		return load() == nil, nil
	case "native":
		if err := load(); err != nil {
			return false, fmt.Errorf("%w: %s=native: %w", kvik.ErrBadEnv, env, err)
		}
		return true, nil
	case "go":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s=%q: want auto, native or go", kvik.ErrBadEnv, env, v)
}

// NativeNow is Native for env as the process has it.
func NativeNow(env string, load func() error) (bool, error) {
	v, set := os.LookupEnv(env)
	return Native(env, v, set, load)
}

// GoReason says why the Go implementation codes where env picks: env=go,
// or why load cannot open the library.
func GoReason(env string, load func() error) string {
	if v, set := os.LookupEnv(env); set && !strings.EqualFold(strings.TrimSpace(v), "auto") {
		return env + "=go"
	}
	return load().Error()
}
