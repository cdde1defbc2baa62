package s3test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// Reset, returned by a FaultProxy's rule, drops the connection instead of
// answering.
const Reset = -1

// FaultProxy starts a loopback proxy in front of s that forwards every
// request except those fault picks: for a request where fault returns a
// status (> 0), or Reset, it reads the first half of the request's body
// (so that a part upload fails mid-body), then answers that status with
// an S3 error document, or drops the connection. fault may be called from
// several goroutines at once. The proxy stops when the test ends.
func (s *Server) FaultProxy(t testing.TB, fault func(*http.Request) int) *Proxy {
	t.Helper()
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := fault(r)
		if status == 0 {
			forward(tr, target, w, r)
			return
		}
		io.CopyN(io.Discard, r.Body, max(r.ContentLength/2, 0))
		if status == Reset {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
				return
			}
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Connection", "close")
		w.WriteHeader(status)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InjectedFault</Code><Message>injected by the test</Message></Error>`)
	}))
	t.Cleanup(func() { srv.Close(); tr.CloseIdleConnections() })
	return &Proxy{URL: srv.URL, Hold: newHold()}
}
