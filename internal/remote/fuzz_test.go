package remote

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
)

// heapDuring returns the bytes of heap f allocates.
func heapDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// repeatReader returns its bytes again and again: a body that never ends.
type repeatReader struct {
	b   []byte
	pos int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.b[r.pos:])
		n += c
		r.pos = (r.pos + c) % len(r.b)
	}
	return n, nil
}

// FuzzReadWholeBody reads hostile responses (any claimed Content-Length,
// a body shorter or longer than it, or one that never ends) under a
// limit of at most 1 MiB: the result is the body, within the limit, or
// an error; the heap taken stays under twice the limit plus 1 MiB,
// whatever the claim. Run longer with
//
//	go test -run '^$' -fuzz FuzzReadWholeBody -fuzztime 10m ./internal/remote
func FuzzReadWholeBody(f *testing.F) {
	f.Add([]byte("hello"), int64(5), uint32(10), false, 0)
	f.Add([]byte("hello"), int64(1)<<40, uint32(1<<20), false, 0)
	f.Add([]byte("hello"), int64(-1), uint32(3), false, 0)
	f.Add([]byte("endless"), int64(-1), uint32(1<<20), true, 0)
	f.Add([]byte("short"), int64(900), uint32(1000), false, 100)
	f.Fuzz(func(t *testing.T, body []byte, cl int64, limit32 uint32, endless bool, bufCap int) {
		limit := int64(limit32 % (1<<20 + 1))
		bufCap = min(max(bufCap, 0), 1<<16)
		var r io.Reader = bytes.NewReader(body)
		if endless && len(body) > 0 {
			r = &repeatReader{b: body}
		}
		resp := &http.Response{ContentLength: cl, Body: io.NopCloser(r)}
		var out []byte
		var err error
		heap := heapDuring(func() { out, err = readWholeBody(resp, make([]byte, 0, bufCap), limit) })
		if heap > uint64(2*limit+1<<20+int64(bufCap)) {
			t.Fatalf("Content-Length %d, limit %d: %d bytes of heap", cl, limit, heap)
		}
		if err != nil {
			return
		}
		switch {
		case int64(len(out)) > limit:
			t.Fatalf("%d bytes returned under a limit of %d", len(out), limit)
		case endless && len(body) > 0 && cl < 0:
			t.Fatalf("an endless body read whole")
		case cl >= 0 && (int64(len(out)) != cl || !bytes.Equal(out, prefix(body, endless, cl))):
			t.Fatalf("Content-Length %d: got %d bytes", cl, len(out))
		case cl < 0 && !bytes.Equal(out, body):
			t.Fatalf("body of unknown length: got %d of %d bytes", len(out), len(body))
		}
	})
}

// prefix returns the first n bytes of body, repeated if endless.
func prefix(body []byte, endless bool, n int64) []byte {
	if !endless {
		return body[:min(n, int64(len(body)))]
	}
	var out []byte
	for int64(len(out)) < n && len(body) > 0 {
		out = append(out, body...)
	}
	return out[:min(n, int64(len(out)))]
}

// FuzzContentRange parses hostile Content-Range values, alone and as the
// answer responseRange reads: a parsed range is well formed
// (0 <= first <= last < total, or total unknown).
func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 5-5/*", "bytes */1000", "bytes 0-9223372036854775806/9223372036854775807",
		"bytes -1-5/10", "bytes 9-3/10", "bytes 0-99/99", "bytes 0-1/1099511627776", "bytes=0-1/2"} {
		f.Add(s, 206, int64(-1))
	}
	f.Add("", 200, int64(1)<<40)
	f.Add("bytes */x", 416, int64(0))
	f.Fuzz(func(t *testing.T, s string, status int, cl int64) {
		first, last, total, err := parseContentRange(s)
		if err == nil && (first < 0 || last < first || (total != -1 && total <= last)) {
			t.Fatalf("%q: first %d last %d total %d", s, first, last, total)
		}
		resp := &http.Response{StatusCode: status, ContentLength: cl, Header: http.Header{"Content-Range": {s}}}
		first, last, total, err = responseRange(resp)
		if err == nil && status == http.StatusPartialContent && (first < 0 || last < first || total <= last) {
			t.Fatalf("206 %q: first %d last %d total %d", s, first, last, total)
		}
		// checkRange must accept only exactly the range asked for.
		for _, n := range []int{1, 4096} {
			e := &Endpoint{Type: HTTP}
			resp.Header.Set("Content-Length", strconv.FormatInt(cl, 10))
			if checkRange(e, resp, 0, n) == nil && status == http.StatusPartialContent {
				f0, l0, _, err := parseContentRange(s)
				if err != nil || f0 != 0 || l0 != int64(n)-1 || cl > int64(n) {
					t.Fatalf("checkRange accepted %q (Content-Length %d) for %d bytes at 0", s, cl, n)
				}
			}
		}
	})
}
