package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy is KvikIO's retry policy: a request is tried up to MaxAttempts
// times while it fails with a status in Retry, a timeout or a broken
// transfer, sleeping BaseDelay, 2×, 4×… up to MaxDelay between attempts.
// Timeout bounds each attempt, body included.
type Policy struct {
	MaxAttempts         int
	Timeout             time.Duration
	Retry               func(status int) bool
	BaseDelay, MaxDelay time.Duration
}

// DefaultBackoff is KvikIO's: 500 ms doubling up to 4 s.
const (
	DefaultBaseDelay = 500 * time.Millisecond
	DefaultMaxDelay  = 4 * time.Second
)

func (p Policy) backoff(attempt int) time.Duration {
	d := p.BaseDelay << min(attempt-1, 4)
	return min(d, p.MaxDelay)
}

// Client performs requests for endpoints with a Policy.
type Client struct {
	HTTP   *http.Client
	Policy Policy
}

// NewTransport returns a keep-alive HTTP/1.1 transport that keeps up to
// conns idle connections per host, one per worker: parallel ranged GETs
// each use their own connection. Compression is off so that bodies are
// the object's bytes.
func NewTransport(conns int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}),
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   max(conns, 2),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       256 << 10,
		ReadBufferSize:        ConnReadBuffer,
	}
}

// retryable marks an attempt's error as worth another attempt.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// do runs attempt under the policy. attempt gets a context bounded by the
// timeout; it returns a retryable error to ask for another try.
func (c *Client) do(ctx context.Context, attempt func(ctx context.Context) error) error {
	var err error
	for i := 1; ; i++ {
		actx, cancel := context.WithTimeout(ctx, c.Policy.Timeout)
		err = attempt(actx)
		timedOut := actx.Err() == context.DeadlineExceeded
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if timedOut {
			err = retryable{fmt.Errorf("%w after %v: %w", ErrTimeout, c.Policy.Timeout, err)}
		}
		var r retryable
		if !errors.As(err, &r) {
			return err
		}
		if i >= c.Policy.MaxAttempts {
			return fmt.Errorf("remote: giving up after %d attempts: %w", i, r.err)
		}
		t := time.NewTimer(c.Policy.backoff(i))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// send signs and sends req; a status other than want is a *StatusError,
// retryable when the policy says so. On success the caller owns the body.
func (c *Client) send(e *Endpoint, req *http.Request, want ...int) (*http.Response, error) {
	if err := e.sign(req.Context(), req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, retryable{err}
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return resp, nil
		}
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	serr := &StatusError{Method: req.Method, URL: e.String(), Code: resp.StatusCode, Body: strings.TrimSpace(string(snippet))}
	if c.Policy.Retry != nil && c.Policy.Retry(resp.StatusCode) {
		return nil, retryable{serr}
	}
	return nil, serr
}

// ReadRange fills p with the object's bytes at off. A failed attempt
// that delivered part of the range is resumed from where it stopped.
func (c *Client) ReadRange(ctx context.Context, e *Endpoint, p []byte, off int64) (int, error) {
	done := 0
	err := c.do(ctx, func(ctx context.Context) error {
		n, err := c.readOnce(ctx, e, p[done:], off+int64(done))
		done += n
		return err
	})
	return done, err
}

func (c *Client) readOnce(ctx context.Context, e *Endpoint, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	req, err := e.rangeRequest(ctx, off, len(p))
	if err != nil {
		return 0, err
	}
	resp, err := c.send(e, req, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := checkRange(e, resp, off, len(p)); err != nil {
		return 0, err
	}
	n, err := readBody(resp.Body, p)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return n, retryable{fmt.Errorf("%w: %d of %d bytes at offset %d", ErrShortBody, n, len(p), off)}
	case err != nil:
		return n, retryable{err}
	}
	// Reading the end of the body lets the connection be reused, and
	// catches a server that sends more than it announced.
	var extra [1]byte
	if m, _ := resp.Body.Read(extra[:]); m > 0 {
		return n, fmt.Errorf("%w: body longer than the %d bytes asked for at offset %d", ErrBadContentRange, len(p), off)
	}
	return n, nil
}

// checkRange verifies that a response carries exactly n bytes at off.
func checkRange(e *Endpoint, resp *http.Response, off int64, n int) error {
	if resp.ContentLength > int64(n) {
		return fmt.Errorf("%w: Content-Length %d for %d bytes at offset %d", ErrBadContentRange, resp.ContentLength, n, off)
	}
	if e.Type == WebHDFS {
		return nil // WebHDFS answers 200 with just the bytes asked for
	}
	if resp.StatusCode == http.StatusOK {
		// The server ignored Range and sent the whole object: usable only
		// when that is exactly the range.
		if off == 0 && resp.ContentLength == int64(n) {
			return nil
		}
		return fmt.Errorf("%w: server ignored the Range header (HTTP 200 for %d bytes at offset %d)", ErrBadContentRange, n, off)
	}
	first, last, _, err := parseContentRange(resp.Header.Get("Content-Range"))
	if err != nil || first != off || last != off+int64(n)-1 {
		return fmt.Errorf("%w: Content-Range %q for bytes %d-%d", ErrBadContentRange, resp.Header.Get("Content-Range"), off, off+int64(n)-1)
	}
	return nil
}

// parseContentRange parses "bytes first-last/total"; total is -1 for "*".
func parseContentRange(s string) (first, last, total int64, err error) {
	bad := fmt.Errorf("malformed Content-Range %q", s)
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 {
		return 0, 0, 0, bad
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, 0, bad
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= last {
			return 0, 0, 0, bad
		}
	}
	return first, last, total, nil
}

// Size asks the server for the object's size: HEAD for HTTP and S3, a
// one-byte GET for presigned URLs (signed for GET only), GETFILESTATUS
// for WebHDFS.
func (c *Client) Size(ctx context.Context, e *Endpoint) (int64, error) {
	var size int64
	err := c.do(ctx, func(ctx context.Context) (err error) {
		size, err = c.sizeOnce(ctx, e)
		return err
	})
	return size, err
}

func (c *Client) sizeOnce(ctx context.Context, e *Endpoint) (int64, error) {
	switch e.Type {
	case WebHDFS:
		return c.webhdfsSize(ctx, e)
	case S3Presigned:
		req, err := e.rangeRequest(ctx, 0, 1)
		if err != nil {
			return 0, err
		}
		resp, err := c.send(e, req, http.StatusPartialContent, http.StatusOK)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
		if resp.StatusCode == http.StatusOK && resp.ContentLength >= 0 {
			return resp.ContentLength, nil
		}
		_, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || total < 0 {
			return 0, fmt.Errorf("%w: no object size in Content-Range %q", ErrBadContentRange, resp.Header.Get("Content-Range"))
		}
		return total, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, e.URL.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.send(e, req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.ContentLength < 0 {
		return 0, fmt.Errorf("remote: HEAD %s: no Content-Length; give the size explicitly", e)
	}
	return resp.ContentLength, nil
}

func (c *Client) webhdfsSize(ctx context.Context, e *Endpoint) (int64, error) {
	u := *e.URL
	u.RawQuery = e.query("GETFILESTATUS")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.send(e, req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		FileStatus struct {
			Length *int64 `json:"length"`
			Type   string `json:"type"`
		} `json:"FileStatus"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return 0, fmt.Errorf("remote: WebHDFS GETFILESTATUS %s: %w", e, err)
	}
	if st.FileStatus.Length == nil || *st.FileStatus.Length < 0 {
		return 0, fmt.Errorf("remote: WebHDFS GETFILESTATUS %s: no file length", e)
	}
	if st.FileStatus.Type != "" && st.FileStatus.Type != "FILE" {
		return 0, fmt.Errorf("remote: WebHDFS %s is a %s, not a file", e, st.FileStatus.Type)
	}
	return *st.FileStatus.Length, nil
}
