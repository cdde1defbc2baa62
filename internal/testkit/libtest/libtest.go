// Package libtest holds what tests of an optional C library's binding
// share: skipping, with the reason, where the library cannot be loaded.
package libtest

import (
	"os"
	"testing"
)

// Need skips t, saying why, where load fails, or fails it where the
// library is required: under CI=true for a library Debian always has
// (requireEnv ""), else where requireEnv is set to "require" (as .ci/run
// sets it once it installed the library).
func Need(t testing.TB, what string, load func() error, requireEnv string) {
	t.Helper()
	err := load()
	if err == nil {
		return
	}
	if requireEnv == "" && os.Getenv("CI") == "true" || requireEnv != "" && os.Getenv(requireEnv) == "require" {
		t.Fatalf("%s cannot be loaded, and is required here: %v", what, err)
	}
	t.Skipf("%s cannot be loaded: %v", what, err)
}
