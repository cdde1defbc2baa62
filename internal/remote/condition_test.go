package remote

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestConditionalPut: a PutObject's Condition goes out as If-Match or
// If-None-Match: *, on every attempt (a 503 retried); its failures (412,
// 409 and, with If-Match, 404) match ErrObjectChanged and are not
// retried, while a 404 without a condition and a 403 stay what they
// are; no Condition sends neither header; a CompleteMultipart carries
// its Condition too.
func TestConditionalPut(t *testing.T) {
	var answer atomic.Int32
	var match, none atomic.Value
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		match.Store(r.Header.Get("If-Match"))
		none.Store(r.Header.Get("If-None-Match"))
		if code := int(answer.Load()); code != http.StatusOK {
			if code == http.StatusServiceUnavailable {
				answer.Store(http.StatusOK) // once
			}
			http.Error(w, "<Error><Code>X</Code></Error>", code)
			return
		}
		if r.Method == http.MethodPost {
			io.WriteString(w, `<CompleteMultipartUploadResult><ETag>"e"</ETag></CompleteMultipartUploadResult>`)
		}
	}))
	defer srv.Close()
	c, e := testClient(t, srv, S3, "/bkt/obj")
	ctx := context.Background()
	body := func() (io.Reader, error) { return strings.NewReader("data"), nil }
	for _, tc := range []struct {
		cond      Condition
		code      int
		changed   bool
		tries     int32
		wantMatch string
		wantNone  string
	}{
		{Condition{IfMatch: `"v1"`}, http.StatusOK, false, 1, `"v1"`, ""},
		{Condition{IfMatch: `"v1"`}, http.StatusServiceUnavailable, false, 2, `"v1"`, ""},
		{Condition{IfMatch: `"v1"`}, http.StatusPreconditionFailed, true, 1, `"v1"`, ""},
		{Condition{IfMatch: `"v1"`}, http.StatusConflict, true, 1, `"v1"`, ""},
		{Condition{IfMatch: `"v1"`}, http.StatusNotFound, true, 1, `"v1"`, ""},
		{Condition{IfAbsent: true}, http.StatusOK, false, 1, "", "*"},
		{Condition{IfAbsent: true}, http.StatusPreconditionFailed, true, 1, "", "*"},
		{Condition{IfAbsent: true}, http.StatusNotFound, false, 1, "", "*"},
		{Condition{IfAbsent: true}, http.StatusForbidden, false, 1, "", "*"},
		{Condition{}, http.StatusOK, false, 1, "", ""},
		{Condition{}, http.StatusPreconditionFailed, false, 1, "", ""},
	} {
		answer.Store(int32(tc.code))
		requests.Store(0)
		err := c.PutObject(ctx, e, 4, body, nil, tc.cond)
		if got := errors.Is(err, ErrObjectChanged); got != tc.changed || (tc.code == http.StatusOK || tc.code == http.StatusServiceUnavailable) != (err == nil) {
			t.Errorf("%+v answered %d: %v (ErrObjectChanged %v, want %v)", tc.cond, tc.code, err, got, tc.changed)
		}
		if n := requests.Load(); n != tc.tries {
			t.Errorf("%+v answered %d: %d requests, want %d", tc.cond, tc.code, n, tc.tries)
		}
		if m, n := match.Load(), none.Load(); m != tc.wantMatch || n != tc.wantNone {
			t.Errorf("%+v: sent If-Match %q, If-None-Match %q", tc.cond, m, n)
		}
	}
	answer.Store(http.StatusPreconditionFailed)
	err := c.CompleteMultipart(ctx, e, "id", []string{`"p1"`}, Condition{IfMatch: `"v2"`})
	if !errors.Is(err, ErrObjectChanged) || match.Load() != `"v2"` {
		t.Errorf("CompleteMultipart on a condition refused: %v (If-Match %q)", err, match.Load())
	}
}
