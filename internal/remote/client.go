package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
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
	// Log, when not nil, gets a record at slog.LevelWarn for every
	// attempt that is retried or fails, and one at RequestLevel for every
	// request sent.
	Log          *slog.Logger
	RequestLevel slog.Level
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
	// Limits bound the requests in flight: each attempt holds a slot of
	// every one, taken in order, from before it is sent until its
	// response body is read, and none while it backs off.
	Limits []*Limiter
	// Pin, when not nil, holds the object's version: Size and ReadRange
	// pin the first ETag they see, and ReadRange fails with
	// ErrObjectChanged on another.
	Pin *Pin
}

// NewTransport returns a keep-alive HTTP/1.1 transport that keeps up to
// conns idle connections per host, one per worker: parallel ranged GETs
// each use their own connection. Compression is off so that bodies are
// the object's bytes. tlsConfig, if not nil, is cloned for https.
func NewTransport(conns int, tlsConfig *tls.Config) *http.Transport {
	if tlsConfig != nil {
		tlsConfig = tlsConfig.Clone()
	}
	return &http.Transport{
		TLSClientConfig:       tlsConfig,
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

// do runs attempt, which sends one method request to e, under the
// policy and the limits. attempt gets a context bounded by the timeout;
// it returns a retryable error to ask for another try. Waiting for a slot
// does not count against the timeout.
func (c *Client) do(ctx context.Context, e *Endpoint, method string, attempt func(ctx context.Context) error) error {
	for i := 1; ; i++ {
		release, err := acquireAll(ctx, c.Limits)
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, c.Policy.Timeout)
		err = attempt(actx)
		timedOut := actx.Err() == context.DeadlineExceeded
		cancel()
		release()
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
			c.logAttempt(ctx, "kvik: http request failed", e, method, i, err)
			return err
		}
		if i >= c.Policy.MaxAttempts {
			err = fmt.Errorf("remote: giving up after %d attempts: %w", i, r.err)
			c.logAttempt(ctx, "kvik: http request failed", e, method, i, r.err)
			return err
		}
		delay := c.Policy.backoff(i)
		c.logAttempt(ctx, "kvik: http retry", e, method, i, r.err, slog.Duration("backoff", delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// logAt returns the policy's logger if it takes records at level.
func (c *Client) logAt(ctx context.Context, level slog.Level) *slog.Logger {
	if l := c.Policy.Log; l != nil && l.Enabled(ctx, level) {
		return l
	}
	return nil
}

// logAttempt records an attempt that is retried or has failed.
func (c *Client) logAttempt(ctx context.Context, msg string, e *Endpoint, method string, attempt int, err error, extra ...slog.Attr) {
	l := c.logAt(ctx, slog.LevelWarn)
	if l == nil {
		return
	}
	attrs := []slog.Attr{slog.String("method", method), slog.String("url", e.String()),
		slog.Int("attempt", attempt), slog.Int("max_attempts", c.Policy.MaxAttempts)}
	var se *StatusError
	if errors.As(err, &se) {
		attrs = append(attrs, slog.Int("status", se.Code))
	}
	attrs = append(attrs, slog.String("error", err.Error()))
	l.LogAttrs(ctx, slog.LevelWarn, msg, append(attrs, extra...)...)
}

// logRequest records one request sent (status 0 when none came back).
func (c *Client) logRequest(e *Endpoint, req *http.Request, status int, took time.Duration, err error) {
	l := c.logAt(req.Context(), c.Policy.RequestLevel)
	if l == nil {
		return
	}
	attrs := []slog.Attr{slog.String("method", req.Method), slog.String("url", e.String())}
	if r := req.Header.Get("Range"); r != "" {
		attrs = append(attrs, slog.String("range", r))
	}
	attrs = append(attrs, slog.Int("status", status), slog.Duration("elapsed", took))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	l.LogAttrs(req.Context(), c.Policy.RequestLevel, "kvik: http request", attrs...)
}

// send signs and sends req; a status other than want is a *StatusError,
// retryable when the policy says so. On success the caller owns the body.
// Errors name the endpoint as Redact prints it, with its secrets masked.
func (c *Client) send(e *Endpoint, req *http.Request, want ...int) (*http.Response, error) {
	if err := e.sign(req.Context(), req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	start := time.Now()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		err = e.scrubErr(err)
		c.logRequest(e, req, 0, time.Since(start), err)
		if untrusted(err) {
			return nil, fmt.Errorf("%w (trust its CA with SSL_CERT_FILE, kvik.WithTLSConfig, or AWS_CA_BUNDLE for S3): %w", ErrCertificate, err)
		}
		return nil, retryable{err}
	}
	c.logRequest(e, req, resp.StatusCode, time.Since(start), nil)
	for _, w := range want {
		if resp.StatusCode == w {
			return resp, nil
		}
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	serr := &StatusError{Method: req.Method, URL: e.String(), Code: resp.StatusCode, Body: e.scrub(strings.TrimSpace(string(snippet)))}
	if c.Policy.Retry != nil && c.Policy.Retry(resp.StatusCode) {
		return nil, retryable{serr}
	}
	return nil, serr
}

// ReadRange fills p with the object's bytes at off. A failed attempt
// that delivered part of the range is resumed from where it stopped.
func (c *Client) ReadRange(ctx context.Context, e *Endpoint, p []byte, off int64) (int, error) {
	done := 0
	err := c.do(ctx, e, http.MethodGet, func(ctx context.Context) error {
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
	c.Pin.ifMatch(req)
	resp, err := c.send(e, req, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return 0, changed(req, err)
	}
	defer resp.Body.Close()
	if err := c.Pin.observe(resp); err != nil {
		return 0, err
	}
	if err := checkRange(e, resp, off, len(p)); err != nil {
		return 0, err
	}
	n, err := readBody(resp.Body, p)
	if err != nil {
		// The body ended, or the connection broke, before the bytes
		// announced: the cause (io.ErrUnexpectedEOF, ECONNRESET…) stays
		// inside.
		return n, retryable{fmt.Errorf("%w: %d of %d bytes at offset %d: %w", ErrShortBody, n, len(p), off, err)}
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
	if resp.StatusCode == http.StatusOK && e.Type != WebHDFS {
		// The server ignored Range and sent the whole object: usable only
		// when that is exactly the range.
		if off == 0 && resp.ContentLength == int64(n) {
			return nil
		}
		return fmt.Errorf("%w: server ignored the Range header (HTTP 200 for %d bytes at offset %d)", ErrBadContentRange, n, off)
	}
	if resp.ContentLength > int64(n) {
		return fmt.Errorf("%w: Content-Length %d for %d bytes at offset %d", ErrBadContentRange, resp.ContentLength, n, off)
	}
	if e.Type == WebHDFS {
		return nil // WebHDFS answers 200 with just the bytes asked for
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
	method := http.MethodHead
	if e.Type == WebHDFS || e.Type == S3Presigned {
		method = http.MethodGet
	}
	err := c.do(ctx, e, method, func(ctx context.Context) (err error) {
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
		if err := c.Pin.observe(resp); err != nil {
			return 0, err
		}
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
	if err := c.Pin.observe(resp); err != nil {
		return 0, err
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

// untrusted reports a TLS handshake that failed on the server's
// certificate: no retry can fix it.
func untrusted(err error) bool {
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ve)
}

// CABundleConfig returns a TLS config trusting only the PEM certificates
// in the file at path, or nil for an empty path.
func CABundleConfig(path string) (*tls.Config, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: AWS_CA_BUNDLE %s holds no PEM certificate", ErrCertificate, path)
	}
	return &tls.Config{RootCAs: pool}, nil
}
