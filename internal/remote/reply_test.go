package remote

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestEncodedBodyRefused: every GET asks for the identity encoding, and
// an answer whose Content-Encoding is another (a 206 of gzip bytes, which
// the transport does not decode) fails with ErrBadContentRange, not
// retried, instead of being taken for the object's bytes; identity and
// no Content-Encoding give the bytes. Ranged reads (ReadRange, the
// opening ReadHead, ReadAtSize) and the whole-object GetObject.
func TestEncodedBodyRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 5))
	obj := make([]byte, 3000+rng.IntN(3000))
	for i := range obj {
		obj[i] = byte(rng.Uint32())
	}
	var encoding atomic.Value
	var requests, plain atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Accept-Encoding") == "identity" {
			plain.Add(1)
		}
		if ce := encoding.Load().(string); ce != "" {
			w.Header().Set("Content-Encoding", ce)
		}
		if ce := encoding.Load().(string); ce == "gzip" {
			// The range of the gzip of the object: as many bytes as asked
			// for, none of them the object's.
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(obj)
			zw.Close()
			gz := append(z.Bytes(), bytes.Repeat([]byte{0x5a}, len(obj))...)[:len(obj)]
			http.ServeContent(w, r, "", zeroTime, bytes.NewReader(gz))
			return
		}
		http.ServeContent(w, r, "", zeroTime, bytes.NewReader(obj))
	}))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	ctx := context.Background()
	off := int64(1 + rng.IntN(1000))
	p := make([]byte, 1+rng.IntN(1500))
	reads := map[string]func() ([]byte, error){
		"ReadRange": func() ([]byte, error) {
			n, err := c.ReadRange(ctx, e, p, off)
			return p[:n], err
		},
		"ReadHead": func() ([]byte, error) {
			n, _, err := c.ReadHead(ctx, e, p)
			return p[:n], err
		},
		"ReadAtSize": func() ([]byte, error) {
			_, err := c.ReadAtSize(ctx, e, p, off)
			return p, err
		},
		"GetObject": func() ([]byte, error) { return c.GetObject(ctx, e, nil, 1<<20) },
	}
	want := map[string][]byte{"ReadRange": obj[off:][:len(p)], "ReadHead": obj[:len(p)], "ReadAtSize": obj[off:][:len(p)], "GetObject": obj}
	for name, read := range reads {
		for _, ce := range []string{"gzip", "br", "x-custom, identity"} {
			encoding.Store(ce)
			requests.Store(0)
			clear(p)
			if _, err := read(); !errors.Is(err, ErrBadContentRange) {
				t.Errorf("%s of a body in Content-Encoding %q: %v, want ErrBadContentRange", name, ce, err)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%s of a body in Content-Encoding %q: %d requests, want 1 (not retried)", name, ce, n)
			}
		}
		for _, ce := range []string{"", "identity", "IDENTITY"} {
			encoding.Store(ce)
			plain.Store(0)
			requests.Store(0)
			clear(p)
			got, err := read()
			if err != nil || !bytes.Equal(got, want[name]) {
				t.Errorf("%s with Content-Encoding %q: %v, %d bytes, want the object's %d", name, ce, err, len(got), len(want[name]))
			}
			if plain.Load() != requests.Load() {
				t.Errorf("%s: %d of %d requests asked for the identity encoding", name, plain.Load(), requests.Load())
			}
		}
	}
}

// TestStatusErrorQuotesCodeAndMessage: an error answer's S3 error
// document is quoted as its Code and Message only, bounded, not whole
// (RequestId, HostId and the rest stayed in every error line); a body
// that is no error document is quoted from its start, bounded, as before.
func TestStatusErrorQuotesCodeAndMessage(t *testing.T) {
	long := strings.Repeat("very long message ", 4000)
	cases := []struct {
		body      string
		want      string
		wantNot   []string
		maxQuoted int
	}{
		{`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>a/b.bin</Key><RequestId>REQ7734</RequestId><HostId>HOSTab12==</HostId></Error>`,
			"NoSuchKey: The specified key does not exist.", []string{"REQ7734", "HOSTab12", "<Key>", "<?xml"}, 100},
		{`<Error><Code>SlowDown</Code><Message>` + long[:2000] + `</Message><RequestId>REQ99</RequestId></Error>`,
			"SlowDown: very long message", []string{"REQ99"}, maxErrBody + 8},
		{`<Error><Code>AccessDenied</Code><Message>` + long + `</Message><HostId>HOST42</HostId></Error>`,
			"AccessDenied", []string{"HOST42"}, maxErrBody + 8},
		{"<Error><Code>OnlyCode</Code></Error>", "OnlyCode", nil, 20},
		{"upstream connect error", "upstream connect error", nil, 30},
		{"<html><body>Bad Gateway</body></html>", "<html><body>Bad Gateway</body></html>", nil, 50},
	}
	for _, tc := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(tc.body))
		}))
		c, e := testClient(t, srv, S3, "/bkt/a/b.bin")
		_, err := c.ReadRange(context.Background(), e, make([]byte, 10), 0)
		srv.Close()
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusNotFound {
			t.Fatalf("ReadRange: %v, want a 404 StatusError", err)
		}
		if !strings.HasPrefix(se.Body, tc.want) || len(se.Body) > tc.maxQuoted {
			t.Errorf("the error quotes %d bytes %.80q..., want %q first and at most %d bytes", len(se.Body), se.Body, tc.want, tc.maxQuoted)
		}
		for _, s := range tc.wantNot {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error %q quotes %q", err, s)
			}
		}
	}
}
