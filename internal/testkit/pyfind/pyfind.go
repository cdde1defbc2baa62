// Package pyfind finds the Python interpreter a cross-check test runs:
// Debian's /usr/bin/python3 first (python3 on PATH may be another
// installation), then python3, the first that runs a probe importing the
// modules the test needs.
package pyfind

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Find returns the first interpreter whose probe (a Python program
// printing the modules' versions on its last line) runs and whose last
// line accept takes (accept returns "" or why not; nil takes any),
// logging that line after what. Without one the test skips with need
// and what each interpreter said, except under CI=true, where it fails
// (CI installs what it needs) unless the environment variable optOut
// is "skip" (a machine that sets CI for its other tests but lacks these
// modules).
func Find(t testing.TB, probe, what string, accept func(last string) string, optOut, need string) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"/usr/bin/python3", "python3"} {
		p, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, name+": not found")
			continue
		}
		out, err := exec.Command(p, "-c", probe).CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		last := lines[len(lines)-1]
		why := ""
		switch {
		case err != nil:
			why = last
		case accept != nil:
			why = accept(last)
		}
		if why != "" {
			tried = append(tried, fmt.Sprintf("%s: %s", p, why))
			continue
		}
		t.Logf("%s: %s %s", p, what, last)
		return p
	}
	msg := need + ": " + strings.Join(tried, "; ")
	if os.Getenv("CI") == "true" && os.Getenv(optOut) != "skip" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
