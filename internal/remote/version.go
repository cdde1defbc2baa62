package remote

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Pin holds the version of an object that all the reads of one handle
// must see: the ETag of the first response that named one (the HEAD that
// gave the size, or the first ranged GET). Later ranged GETs send it in
// If-Match and check the ETag of their answer, so that an object replaced
// during a read fails with ErrObjectChanged instead of mixing versions.
// An object whose server gives no ETag cannot be checked. A Pin is safe
// for concurrent use; the zero Pin holds no version yet.
type Pin struct {
	mu   sync.Mutex
	etag string
}

// ETag returns the pinned ETag, "" while none is known.
func (p *Pin) ETag() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.etag
}

// observe pins the ETag of resp when none is pinned yet, or checks it
// against the pinned one. A response without an ETag is not checked.
func (p *Pin) observe(resp *http.Response) error {
	got := resp.Header.Get("ETag")
	if p == nil || got == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.etag == "":
		p.etag = got
	case weakless(p.etag) != weakless(got):
		return fmt.Errorf("%w: ETag %s, the read began with %s", ErrObjectChanged, got, p.etag)
	}
	return nil
}

// ifMatch sets req's If-Match to the pinned ETag, when it is a strong one
// (If-Match compares strongly, so a weak ETag never matches).
func (p *Pin) ifMatch(req *http.Request) {
	if tag := p.ETag(); tag != "" && !strings.HasPrefix(tag, "W/") {
		req.Header.Set("If-Match", tag)
	}
}

// changed turns a 412 answer to an If-Match into ErrObjectChanged, which
// is not retried; other errors pass unchanged.
func changed(req *http.Request, err error) error {
	var se *StatusError
	if req.Header.Get("If-Match") != "" && errors.As(err, &se) && se.Code == http.StatusPreconditionFailed {
		return fmt.Errorf("%w: %w", ErrObjectChanged, se)
	}
	return err
}

func weakless(tag string) string { return strings.TrimPrefix(tag, "W/") }
