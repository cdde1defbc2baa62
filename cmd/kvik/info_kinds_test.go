package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInfoNotRegular: kvik info of a FIFO names its kind and reports
// kvik's refusal to open it, exiting 1, where the open blocked and then
// the report recursed until the stack overflowed.
func TestInfoNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"info", "--json", fifo}, {"info", fifo}} {
		r := runKvikWithin(t, 20*time.Second, nil, args...).expect(t, 1)
		if strings.Contains(r.stderr, "overflow") || strings.Contains(r.stderr, "goroutine") {
			t.Fatalf("kvik %v crashed:\n%s", args, r.stderr)
		}
		if args[1] != "--json" {
			if !strings.Contains(r.stdout, "(FIFO)") || !strings.Contains(r.stdout, "not a regular file: a FIFO") {
				t.Errorf("kvik %v:\n%s", args, r.stdout)
			}
			continue
		}
		var rep infoReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("invalid JSON: %v\n%s", err, r.stdout)
		}
		p := rep.Path
		if p.Kind != "FIFO" || len(p.Errors) != 1 || !strings.Contains(p.Errors[0], "not a regular file: a FIFO") {
			t.Errorf("path info = %+v", p)
		}
	}
}
