// Package childtest runs a test again in fresh processes of the test
// binary, each with more environment variables: for what a process
// reads once (an environment variable read at first use, a library
// loaded once).
package childtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// marker holds, in a child's environment, the mode Run started it in.
const marker = "KVIK_TEST_CHILD_MODE"

// Mode returns the mode Run started this process in, or "" in a
// process Run did not start (the parent).
func Mode() string { return os.Getenv(marker) }

// Run runs the test named test (a top-level test's name) again in a
// fresh process for each of modes, its environment the parent's plus
// env(mode), and fails t with the child's output unless the child's
// test passed. The test calls Mode first and, in a child, checks what
// the mode asks for.
func Run(t testing.TB, test string, modes []string, env func(mode string) []string) {
	t.Helper()
	for _, mode := range modes {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
		cmd.Env = append(append(os.Environ(), marker+"="+mode), env(mode)...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
			t.Fatalf("%s in a child process, mode %s, failed (%v):\n%s", test, mode, err, out)
		}
	}
}
