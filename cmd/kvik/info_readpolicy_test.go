package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInfoReadPolicy(t *testing.T) {
	const size = 8<<20 + 10
	src := randomFile(t, size)
	for _, c := range []struct {
		env            []string
		policy, source string
		direct         bool // some bytes direct
	}{
		{nil, "auto", "KVIK_DIRECT_IO_READ_POLICY (built-in)", false},
		{[]string{"KVIKIO_AUTO_DIRECT_IO_READ=0"}, "buffered", "KVIKIO_AUTO_DIRECT_IO_READ (env)", false},
		{[]string{"KVIKIO_AUTO_DIRECT_IO_READ=1"}, "direct", "KVIKIO_AUTO_DIRECT_IO_READ (env)", true},
		{[]string{"KVIK_DIRECT_IO_READ_POLICY=direct"}, "direct", "KVIK_DIRECT_IO_READ_POLICY (env)", true},
	} {
		r := runKvik(t, append(c.env, "KVIKIO_TASK_SIZE=1048576"), "info", "--json", src).expect(t, 0)
		var rep infoReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v: invalid JSON: %v\n%s", c.env, err, r.stdout)
		}
		p := rep.Path.ReadPolicy
		if p == nil || p.Policy != c.policy || p.Source != c.source || p.DirectBytes+p.BufferedBytes != size || p.TaskSize != 1<<20 || p.Decision == "" {
			t.Fatalf("%v: read policy %+v, want %s from %s covering %d bytes", c.env, p, c.policy, c.source, size)
		}
		if c.direct && rep.Path.DirectIO && p.DirectBytes != 8<<20 {
			t.Errorf("%v: %d bytes direct, want the aligned %d", c.env, p.DirectBytes, 8<<20)
		}
		if c.policy == "buffered" && p.DirectBytes != 0 {
			t.Errorf("%v: %d bytes direct under the buffered policy", c.env, p.DirectBytes)
		}
		text := runKvik(t, c.env, "info", src).expect(t, 0).stdout
		if !strings.Contains(text, "read policy") || !strings.Contains(text, c.policy) {
			t.Errorf("%v: text lacks the read policy:\n%s", c.env, text)
		}
	}
	r := runKvik(t, []string{"KVIKIO_AUTO_DIRECT_IO_READ=1", "KVIK_DIRECT_IO_READ_POLICY=buffered"}, "info").expect(t, 1)
	if !strings.Contains(r.stdout, "conflict") {
		t.Errorf("info does not report conflicting read settings:\n%s", r.stdout)
	}
}

func TestBenchCache(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"half:1MiB", "half: alternate 1 MiB stripes"},
		{"warm", "whole file loaded"},
		{"cold", "dropped before every read"},
	} {
		r := runKvik(t, nil, "bench", "--size", "5MiB", "--op", "read", "--memory", "host", "--threads", "1,2",
			"--repeats", "2", "--cache", c.mode, "--no-baselines", "--dir", t.TempDir(), "--json").expect(t, 0)
		var rep benchReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%s: invalid JSON: %v\n%s", c.mode, err, r.stdout)
		}
		if !strings.HasPrefix(rep.PageCache, c.want) || rep.ReadPolicy != "auto" {
			t.Errorf("%s: page cache %q, read policy %q", c.mode, rep.PageCache, rep.ReadPolicy)
		}
		if len(rep.Results) != 2 {
			t.Errorf("%s: --no-baselines gave %d rows, want the 2 kvik rows", c.mode, len(rep.Results))
		}
		for _, x := range rep.Results {
			if !x.Verified || len(x.Seconds) != 2 || x.Path != "kvik host" {
				t.Errorf("%s: result %+v", c.mode, x)
			}
		}
	}
	for _, args := range [][]string{{"--cache", "lukewarm"}, {"--cache", "half:0"}, {"--cache", "warm", "--drop-cache"}} {
		runKvik(t, nil, append([]string{"bench", "--size", "1MiB"}, args...)...).expect(t, 2)
	}
}
