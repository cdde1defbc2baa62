package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

var zeroTime time.Time

// TestReadHead checks the GET that opens a handle against well-behaved
// and hostile answers: the bytes and the size of objects shorter and
// longer than the buffer, empty objects, servers that ignore Range; a
// Content-Range that lies about where the bytes start, how many come or
// the size fails with ErrBadContentRange; a body shorter than announced
// is retried then fails with ErrShortBody; answers without a size say so
// (-1, no error) for the caller to ask with HEAD. No answer makes it
// read past the buffer, whatever the server claims.
func TestReadHead(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	obj := make([]byte, 5000)
	for i := range obj {
		obj[i] = byte(rng.Uint32())
	}
	const bufLen = 1000
	type answer func(w http.ResponseWriter, r *http.Request, data []byte)
	ranged := func(w http.ResponseWriter, r *http.Request, data []byte) {
		http.ServeContent(w, r, "", zeroTime, bytes.NewReader(data))
	}
	raw := func(status int, hdr map[string]string, body []byte) answer {
		return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			for k, v := range hdr {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			w.Write(body)
		}
	}
	cl := func(n int) string { return strconv.Itoa(n) }
	for _, c := range []struct {
		name     string
		data     []byte
		answer   answer
		wantN    int
		wantSize int64
		wantErr  error
	}{
		{"longer object", obj, ranged, bufLen, 5000, nil},
		{"shorter object", obj[:300], ranged, 300, 300, nil},
		{"exactly the buffer", obj[:bufLen], ranged, bufLen, bufLen, nil},
		{"one byte", obj[:1], ranged, 1, 1, nil},
		{"empty object, Go's file server", []byte{}, ranged, 0, 0, nil},
		{"empty object, 416 with its size", nil, raw(416, map[string]string{"Content-Range": "bytes */0"}, nil), 0, 0, nil},
		{"Range ignored, whole object", obj, raw(200, map[string]string{"Content-Length": cl(5000)}, obj), bufLen, 5000, nil},
		{"Range ignored, small object", obj[:10], raw(200, map[string]string{"Content-Length": "10"}, obj[:10]), 10, 10, nil},
		{"416 without a size", nil, raw(416, nil, nil), 0, -1, nil},
		{"200 without Content-Length", obj, raw(200, nil, obj), 0, -1, nil},
		{"unknown total", obj, raw(206, map[string]string{"Content-Range": "bytes 0-999/*"}, obj[:1000]), 0, -1, nil},
		{"416 for an object of bytes", obj, raw(416, map[string]string{"Content-Range": "bytes */5000"}, nil), 0, -1, ErrBadContentRange},
		{"bytes from elsewhere", obj, raw(206, map[string]string{"Content-Range": "bytes 100-1099/5000"}, obj[100:1100]), 0, -1, ErrBadContentRange},
		{"more than asked", obj, raw(206, map[string]string{"Content-Range": "bytes 0-1999/5000"}, obj[:2000]), 0, -1, ErrBadContentRange},
		{"fewer than the object has", obj, raw(206, map[string]string{"Content-Range": "bytes 0-499/5000"}, obj[:500]), 0, -1, ErrBadContentRange},
		{"body longer than its range", obj, raw(206, map[string]string{"Content-Range": "bytes 0-999/5000"}, obj[:1500]), 0, -1, ErrBadContentRange},
		{"size not past the range", obj, raw(206, map[string]string{"Content-Range": "bytes 0-999/999"}, obj[:1000]), 0, -1, ErrBadContentRange},
		{"malformed", obj, raw(206, map[string]string{"Content-Range": "bytes 0-x/5000"}, obj[:1000]), 0, -1, ErrBadContentRange},
		{"short body", obj, raw(206, map[string]string{"Content-Range": "bytes 0-999/5000", "Content-Length": "1000"}, obj[:400]), 0, -1, ErrShortBody},
		{"claims a huge object", obj, raw(206, map[string]string{"Content-Range": "bytes 0-999/1099511627776"}, obj[:1000]), bufLen, 1 << 40, nil},
	} {
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			if r.Method != http.MethodGet || r.Header.Get("Range") != fmt.Sprintf("bytes=0-%d", bufLen-1) {
				t.Errorf("%s: %s with Range %q", c.name, r.Method, r.Header.Get("Range"))
			}
			c.answer(w, r, c.data)
		}))
		cl, e := testClient(t, srv, HTTP, "/obj")
		buf := make([]byte, bufLen)
		n, size, err := cl.ReadHead(context.Background(), e, buf)
		switch {
		case c.wantErr != nil:
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: %v, want %v", c.name, err, c.wantErr)
			}
		case err != nil || n != c.wantN || size != c.wantSize:
			t.Errorf("%s: %d bytes, size %d, %v; want %d, %d", c.name, n, size, err, c.wantN, c.wantSize)
		case !bytes.Equal(buf[:n], c.data[:n]):
			t.Errorf("%s: wrong bytes", c.name)
		}
		if want := int32(1); errors.Is(c.wantErr, ErrShortBody) {
			if requests.Load() != 3 {
				t.Errorf("%s: %d requests, want 3 (retried)", c.name, requests.Load())
			}
		} else if c.wantErr != nil && requests.Load() != want {
			t.Errorf("%s: %d requests, want %d (not retried)", c.name, requests.Load(), want)
		}
		srv.Close()
	}
}

// TestReadHeadPins: the ETag of the opening GET pins the object's
// version for the reads after it.
func TestReadHeadPins(t *testing.T) {
	obj := bytes.Repeat([]byte("0123456789"), 300)
	etag := `"v1"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := r.Header.Get("If-Match"); m != "" && m != etag {
			http.Error(w, "changed", http.StatusPreconditionFailed)
			return
		}
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "", zeroTime, bytes.NewReader(obj))
	}))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	c = c.Pinned()
	if _, size, err := c.ReadHead(context.Background(), e, make([]byte, 100)); err != nil || size != int64(len(obj)) {
		t.Fatalf("ReadHead: size %d, %v", size, err)
	}
	if c.pin.ETag() != `"v1"` {
		t.Fatalf("pinned %q, want the opening GET's ETag", c.pin.ETag())
	}
	etag = `"v2"`
	if _, err := c.ReadRange(context.Background(), e, make([]byte, 10), 2000); !errors.Is(err, ErrObjectChanged) {
		t.Fatalf("read of a replaced object: %v, want ErrObjectChanged", err)
	}
}

// TestReadAtSize checks the ranged GET that also learns the object's
// size (a prefix's reads, zarr's shard indexes) against well-behaved and
// hostile answers, for ranges at an offset and for suffixes ("the last
// k bytes", of which the caller may keep the first few): a range past
// the end gives io.ErrUnexpectedEOF with the size; a Content-Range that
// lies about where the bytes start or how many come, and a body longer
// than its range, fail with ErrBadContentRange; a body shorter than
// announced is retried, then fails with ErrShortBody.
func TestReadAtSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 10))
	obj := make([]byte, 5000)
	for i := range obj {
		obj[i] = byte(rng.Uint32())
	}
	ranged := func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", zeroTime, bytes.NewReader(obj))
	}
	raw := func(status int, cr string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if cr != "" {
				w.Header().Set("Content-Range", cr)
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			w.Write(body)
		}
	}
	for _, c := range []struct {
		name     string
		off      int64
		n        int
		answer   http.HandlerFunc
		wantFrom int64 // where the bytes read start in obj
		wantErr  error
	}{
		{"inside", 1234, 777, ranged, 1234, nil},
		{"to the end", 4000, 1000, ranged, 4000, nil},
		{"past the end", 4500, 1000, ranged, 0, io.ErrUnexpectedEOF},
		{"suffix", -300, 300, ranged, 4700, nil},
		{"head of a suffix", -300, 20, ranged, 4700, nil},
		{"suffix longer than the object", -6000, 10, ranged, 0, io.ErrUnexpectedEOF},
		{"Range ignored at 0", 0, 100, raw(200, "", obj), 0, nil},
		{"Range ignored elsewhere", 100, 100, raw(200, "", obj), 0, ErrBadContentRange},
		{"bytes from elsewhere", 100, 100, raw(206, "bytes 200-299/5000", obj[200:300]), 0, ErrBadContentRange},
		{"more than asked", 100, 100, raw(206, "bytes 100-299/5000", obj[100:300]), 0, ErrBadContentRange},
		{"fewer than asked", 100, 100, raw(206, "bytes 100-149/5000", obj[100:150]), 0, ErrBadContentRange},
		{"suffix, fewer than asked", -300, 20, raw(206, "bytes 4800-4999/5000", obj[4800:]), 0, ErrBadContentRange},
		{"no size", 100, 100, raw(206, "bytes 100-199/*", obj[100:200]), 0, ErrBadContentRange},
		{"size past int64", 100, 100, raw(206, "bytes 100-199/99999999999999999999", obj[100:200]), 0, ErrBadContentRange},
		{"range backwards", 100, 100, raw(206, "bytes 199-100/5000", obj[100:200]), 0, ErrBadContentRange},
		{"range past the size", 100, 100, raw(206, "bytes 100-199/150", obj[100:200]), 0, ErrBadContentRange},
		{"malformed", 100, 100, raw(206, "bytes 100-1x9/5000", obj[100:200]), 0, ErrBadContentRange},
		{"body longer than its range", 100, 100, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", "bytes 100-199/5000")
			w.WriteHeader(206)
			w.Write(obj[100:400]) // no Content-Length: the body runs on
		}, 0, ErrBadContentRange},
		{"short body", 100, 100, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", "bytes 100-199/5000")
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(206)
			w.Write(obj[100:140])
		}, 0, ErrShortBody},
	} {
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			want := fmt.Sprintf("bytes=%d-%d", c.off, c.off+int64(c.n)-1)
			if c.off < 0 {
				want = fmt.Sprintf("bytes=%d", c.off)
			}
			if r.Header.Get("Range") != want {
				t.Errorf("%s: Range %q, want %q", c.name, r.Header.Get("Range"), want)
			}
			c.answer(w, r)
		}))
		cl, e := testClient(t, srv, HTTP, "/obj")
		buf := make([]byte, c.n)
		size, err := cl.ReadAtSize(context.Background(), e, buf, c.off)
		switch {
		case c.wantErr != nil:
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: %v, want %v", c.name, err, c.wantErr)
			}
		case err != nil || size != int64(len(obj)):
			t.Errorf("%s: size %d, %v; want %d", c.name, size, err, len(obj))
		case !bytes.Equal(buf, obj[c.wantFrom:c.wantFrom+int64(c.n)]):
			t.Errorf("%s: wrong bytes", c.name)
		}
		if errors.Is(c.wantErr, io.ErrUnexpectedEOF) && size != int64(len(obj)) {
			t.Errorf("%s: size %d with the error, want %d", c.name, size, len(obj))
		}
		if want := int32(1); errors.Is(c.wantErr, ErrShortBody) {
			want = 3
			if requests.Load() != want {
				t.Errorf("%s: %d requests, want %d (retried)", c.name, requests.Load(), want)
			}
		} else if requests.Load() != want {
			t.Errorf("%s: %d requests, want %d", c.name, requests.Load(), want)
		}
		srv.Close()
	}
}

// TestReadAtSizeClaims checks what ReadAtSize reports of sizes a server
// claims: a huge one is returned as it is, without any allocation of its
// size (the caller bounds what it reads by it), and a negative one in a
// 416 answer is no size at all.
func TestReadAtSizeClaims(t *testing.T) {
	obj := []byte("0123456789abcdefghij")
	for _, c := range []struct {
		name     string
		status   int
		cr       string
		body     []byte
		wantSize int64
		wantErr  error
	}{
		{"huge size", 206, "bytes 4-7/9223372036854775807", obj[4:8], math.MaxInt64, nil},
		{"negative size in a 416", 416, "bytes */-5", nil, -1, io.ErrUnexpectedEOF},
		{"no size in a 416", 416, "bytes */*", nil, -1, io.ErrUnexpectedEOF},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", c.cr)
			w.Header().Set("Content-Length", strconv.Itoa(len(c.body)))
			w.WriteHeader(c.status)
			w.Write(c.body)
		}))
		cl, e := testClient(t, srv, HTTP, "/obj")
		buf := make([]byte, 4)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		size, err := cl.ReadAtSize(context.Background(), e, buf, 4)
		runtime.ReadMemStats(&ms1)
		if size != c.wantSize || !errors.Is(err, c.wantErr) {
			t.Errorf("%s: size %d, %v; want %d, %v", c.name, size, err, c.wantSize, c.wantErr)
		}
		if c.wantErr == nil && !bytes.Equal(buf, obj[4:8]) {
			t.Errorf("%s: read %q, want %q", c.name, buf, obj[4:8])
		}
		if grew := ms1.TotalAlloc - ms0.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a 4-byte read", c.name, grew)
		}
		srv.Close()
	}
}

// TestReadWithin checks the GET of a wider range than the bytes kept
// (ReadWithin: zarr's whole-shard reads) against well-behaved and
// hostile answers: the bytes kept at random offsets of random ranges,
// the whole object answered by a 206 or a 200; an answer whose range is
// not the one asked for, or whose body goes on past it, fails with
// ErrBadContentRange; a body that ends early, in the bytes dropped
// before or after those kept, is retried, then fails with ErrShortBody;
// a range past the end gives io.ErrUnexpectedEOF with the size; a range
// that does not hold the bytes, or holds more than MaxSlack beyond
// them, fails without a request.
func TestReadWithin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 17))
	obj := randomObject(rng, 3<<20+rng.IntN(1000))
	size := int64(len(obj))
	ranged := func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", zeroTime, bytes.NewReader(obj))
	}
	raw := func(status int, cr string, body []byte, cl int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if cr != "" {
				w.Header().Set("Content-Range", cr)
			}
			w.Header().Set("Content-Length", strconv.Itoa(cl))
			w.WriteHeader(status)
			w.Write(body)
		}
	}
	type tc struct {
		name         string
		off, n       int64
		lo, hi       int64
		answer       http.HandlerFunc
		wantErr      error
		wantRequests int32
	}
	var cases []tc
	for i := range 6 { // random ranges and the bytes kept inside them
		lo := rng.Int64N(size / 2)
		hi := min(size, lo+1+rng.Int64N(2<<20))
		off := lo + rng.Int64N(min(hi-lo, 1000))
		n := hi - off - rng.Int64N(min(hi-off, 1000))
		cases = append(cases, tc{fmt.Sprintf("random %d", i), off, n, lo, hi, ranged, nil, 1})
	}
	whole := fmt.Sprintf("bytes 0-%d/%d", size-1, size)
	cases = append(cases,
		tc{"whole object, index dropped", 0, size - 516, 0, size, ranged, nil, 1},
		tc{"whole object, head dropped", 516, size - 516, 0, size, ranged, nil, 1},
		tc{"whole object as a 200", 100, size - 300, 0, size, raw(200, "", obj, len(obj)), nil, 1},
		tc{"a 200 for a part", 100, 100, 50, 300, raw(200, "", obj, len(obj)), ErrBadContentRange, 1},
		tc{"another range", 100, 100, 50, 300, raw(206, "bytes 60-309/"+strconv.Itoa(len(obj)), obj[60:310], 250), ErrBadContentRange, 1},
		tc{"body past its range", 0, size - 16, 0, size, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", whole)
			w.WriteHeader(206)
			w.Write(obj)
			w.Write(obj[:10]) // no Content-Length: the body runs on
		}, ErrBadContentRange, 1},
		// The bytes kept are all in: the read resumes after them, and this
		// server answers the resumed range with the whole object's.
		tc{"body ends in the tail", 0, size - 516, 0, size, raw(206, whole, obj[:size-100], len(obj)), ErrBadContentRange, 2},
		tc{"body ends in the head", 516, size - 516, 0, size, raw(206, whole, obj[:200], len(obj)), ErrShortBody, 3},
		tc{"past the end", 0, size - 10, 0, size + 10, ranged, io.ErrUnexpectedEOF, 1},
		tc{"bytes outside the range", 10, 100, 20, 200, ranged, errRangeArgs, 0},
		tc{"more than MaxSlack", 0, 100, 0, 100 + MaxSlack + 1, ranged, errRangeArgs, 0},
	)
	for _, c := range cases {
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The first request asks for [lo, hi); one that resumes after
			// bytes kept, for the rest up to hi.
			want := fmt.Sprintf("bytes=%d-%d", c.lo, c.hi-1)
			if requests.Add(1) > 1 && c.name == "body ends in the tail" {
				want = fmt.Sprintf("bytes=%d-%d", c.off+c.n, c.hi-1)
			}
			if r.Header.Get("Range") != want {
				t.Errorf("%s: Range %q, want %q", c.name, r.Header.Get("Range"), want)
			}
			c.answer(w, r)
		}))
		cl, e := testClient(t, srv, HTTP, "/obj")
		buf := make([]byte, c.n)
		last := 0
		progress := func(n int) {
			if n <= last || n > len(buf) {
				t.Errorf("%s: progress %d after %d", c.name, n, last)
			}
			last = n
		}
		if c.n%2 == 0 {
			progress = nil // the same read without it
		}
		got, err := cl.ReadWithin(context.Background(), e, buf, c.off, c.lo, c.hi, progress)
		if progress != nil && err == nil && last != len(buf) {
			t.Errorf("%s: progress ended at %d of %d", c.name, last, len(buf))
		}
		switch {
		case c.wantErr == errRangeArgs:
			if err == nil {
				t.Errorf("%s: no error", c.name)
			}
		case c.wantErr != nil:
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: %v, want %v", c.name, err, c.wantErr)
			}
		case err != nil || got != size:
			t.Errorf("%s: size %d, %v; want %d", c.name, got, err, size)
		case !bytes.Equal(buf, obj[c.off:c.off+c.n]):
			t.Errorf("%s: wrong bytes", c.name)
		}
		if errors.Is(c.wantErr, io.ErrUnexpectedEOF) && got != size {
			t.Errorf("%s: size %d with the error, want %d", c.name, got, size)
		}
		if requests.Load() != c.wantRequests {
			t.Errorf("%s: %d requests, want %d", c.name, requests.Load(), c.wantRequests)
		}
		srv.Close()
	}
}

// TestReadWithinResumes cuts a ReadWithin's answer after random counts
// of bytes: the read resumes after the bytes kept so far, asking for the
// version it began with (If-Match), and its progress only grows, ending
// at the bytes asked for, which are the object's; where the object is
// replaced between attempts (the server honouring If-Match with a 412,
// or ignoring it and answering with a new ETag) it fails with
// ErrObjectChanged, never mixing versions.
func TestReadWithinResumes(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 19))
	obj := randomObject(rng, 1<<20+rng.IntN(1000))
	size := int64(len(obj))
	for _, mode := range []string{"same", "replaced, 412", "replaced, If-Match ignored"} {
		for trial := range 4 {
			lo := rng.Int64N(size / 4)
			off := lo + rng.Int64N(1000)
			n := size/2 + rng.Int64N(size/4)
			hi := min(size, off+n+rng.Int64N(1000))
			cuts := []int64{1 + rng.Int64N(hi-lo-1), 1 + rng.Int64N(hi-lo-1)} // bytes each attempt's answer sends before it breaks
			var requests atomic.Int32
			var ranges, matches []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				k := requests.Add(1) - 1
				ranges, matches = append(ranges, r.Header.Get("Range")), append(matches, r.Header.Get("If-Match"))
				etag := `"v1"`
				if k > 0 && mode != "same" {
					etag = `"v2"`
				}
				if mode == "replaced, If-Match ignored" {
					r.Header.Del("If-Match")
				}
				w.Header().Set("ETag", etag)
				if int(k) >= len(cuts) {
					http.ServeContent(w, r, "", zeroTime, bytes.NewReader(obj))
					return
				}
				// Serve the range, cut short: Content-Length promises more.
				var first, last int64
				fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last)
				if m := r.Header.Get("If-Match"); m != "" && m != etag {
					w.WriteHeader(http.StatusPreconditionFailed)
					return
				}
				w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
				w.Header().Set("Content-Length", strconv.FormatInt(last-first+1, 10))
				w.WriteHeader(http.StatusPartialContent)
				w.Write(obj[first : first+min(cuts[k], last-first)])
			}))
			cl, e := testClient(t, srv, HTTP, "/obj")
			buf := make([]byte, n)
			last := 0
			got, err := cl.ReadWithin(context.Background(), e, buf, off, lo, hi, func(m int) {
				if m <= last || m > len(buf) {
					t.Errorf("%s %d: progress %d after %d", mode, trial, m, last)
				}
				last = m
			})
			srv.Close()
			if mode != "same" {
				if !errors.Is(err, ErrObjectChanged) {
					t.Errorf("%s %d: %v, want ErrObjectChanged (ranges %q)", mode, trial, err, ranges)
				}
				continue
			}
			if err != nil || got != size || last != len(buf) || !bytes.Equal(buf, obj[off:off+n]) {
				t.Fatalf("%s %d: size %d, %v, progress %d of %d, bytes equal %v", mode, trial, got, err, last, len(buf), bytes.Equal(buf, obj[off:off+n]))
			}
			// Each later request resumes after the bytes kept before it, if
			// any were, and asks for the first answer's version.
			kept := int64(0)
			for k := range len(cuts) {
				inP := min(max(cuts[k]-max(off-lo, 0)*boolInt(kept == 0), 0), n-kept)
				if k+1 < len(ranges) {
					from := lo
					if kept+inP > 0 {
						from = off + kept + inP
					}
					if want := fmt.Sprintf("bytes=%d-%d", from, hi-1); ranges[k+1] != want || matches[k+1] != `"v1"` {
						t.Errorf("%s %d: request %d asked for %s If-Match %s, want %s \"v1\"", mode, trial, k+1, ranges[k+1], matches[k+1], want)
					}
				}
				kept += inP
			}
		}
	}
}

// randomObject returns n random bytes.
func randomObject(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// boolInt is 1 for true, else 0.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// errRangeArgs marks the cases of TestReadWithin that fail before any
// request.
var errRangeArgs = errors.New("bad arguments")
