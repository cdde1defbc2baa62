package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFlags checks -v and --log-level on two commands: records of the
// level asked for go to standard error (or to KVIKIO_LOG_FILE when set),
// the last flag wins over KVIKIO_LOG_LEVEL, nothing is logged without
// them, and a bad level is a usage error.
func TestLogFlags(t *testing.T) {
	src := randomFile(t, 3<<20)
	open := `level=INFO msg="kvik: open" path=` + src
	plan := `level=DEBUG msg="kvik: read plan"`
	cases := []struct {
		env      []string
		args     []string
		want     []string
		wantNone bool
	}{
		{nil, []string{"info", src}, nil, true},
		{nil, []string{"info", "-v", src}, []string{open}, false},
		{nil, []string{"info", src, "--log-level", "info"}, []string{open}, false},
		{[]string{"KVIKIO_LOG_LEVEL=info"}, []string{"info", src}, []string{open}, false},
		{[]string{"KVIKIO_LOG_LEVEL=info"}, []string{"info", "--log-level=OFF", src}, nil, true},
		{nil, []string{"info", "-v", "--log-level", "error", src}, nil, true},
		{nil, []string{"cp", "-v", "-v", "--memory", "host", src, "DST"}, []string{open, plan}, false},
		{nil, []string{"cp", "-v=debug", "--memory=host", src, "DST"}, []string{open, plan}, false},
	}
	for _, c := range cases {
		args := append([]string(nil), c.args...)
		for i, a := range args {
			if a == "DST" {
				args[i] = filepath.Join(t.TempDir(), "dst")
			}
		}
		r := runKvik(t, c.env, args...).expect(t, 0)
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("kvik %v (env %v): stderr lacks %q:\n%s", c.args, c.env, w, r.stderr)
			}
		}
		if c.wantNone && strings.Contains(r.stderr, "msg=") {
			t.Errorf("kvik %v (env %v) logged:\n%s", c.args, c.env, r.stderr)
		}
	}
	// With KVIKIO_LOG_FILE, -v writes there.
	logPath := filepath.Join(t.TempDir(), "kvik.log")
	r := runKvik(t, []string{"KVIKIO_LOG_FILE=" + logPath}, "info", "-v", src).expect(t, 0)
	b, _ := os.ReadFile(logPath)
	if strings.Contains(r.stderr, "msg=") || !strings.Contains(string(b), open) {
		t.Errorf("-v with KVIKIO_LOG_FILE: stderr %q, file %q", r.stderr, b)
	}
	runKvik(t, nil, "info", "--log-level", "loud").expect(t, 2).oneLineError(t, "log level", "loud")
	runKvik(t, nil, "info", "-v=loud").expect(t, 2).oneLineError(t, "log level")
}
