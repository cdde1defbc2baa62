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
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
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

// Client performs requests for endpoints under a Policy, within request
// limits and a redirect policy. Only NewClient makes one, so that no
// request goes out without them.
type Client struct {
	http   *http.Client
	policy Policy
	// limits bound the requests in flight: each attempt holds a slot of
	// every one, taken in order, from before it is sent until its
	// response body is read, and none while it backs off. The last one
	// is always Requests, the process-wide cap.
	limits []*Limiter
	// shared is the shared transport the client sends with; nil with a
	// caller's http.Client.
	shared *clientShare
	// pin, when not nil, holds the object's version: Size and ReadRange
	// pin the first ETag they see, and ReadRange fails with
	// ErrObjectChanged on another (Pinned).
	pin *Pin
}

// clientShare is a client's (and its copies') hold on a shared
// transport.
type clientShare struct {
	once  sync.Once
	entry *sharedEntry
}

// ClientOptions say how NewClient builds a client.
type ClientOptions struct {
	// HTTP, when not nil, is the caller's client: requests go through a
	// copy of it that also applies CheckRedirect (the caller's own
	// CheckRedirect runs after it). Its transport decides TLS.
	HTTP *http.Client
	// Conns is how many idle connections per host the transport keeps
	// (one per worker): parallel ranged GETs each use their own.
	Conns int
	// TLS, cloned, configures https; nil trusts the system's roots, or
	// the PEM bundle at CABundle when that is set (AWS_CA_BUNDLE).
	TLS      *tls.Config
	CABundle string
	// MaxRequests caps this client's requests in flight (0: no cap of
	// its own), within the process-wide cap Requests.
	MaxRequests int
	Policy      Policy
}

// NewClient returns a client that signs requests for signed endpoints,
// retries under o.Policy, holds a slot of o.MaxRequests' limiter and of
// Requests for each attempt, refuses redirects as
// CheckRedirect does and masks secrets in its errors. Open clients of the
// same Conns and TLS settings share one transport, and so their
// connections: many handles to one server (the shards of a checkpoint)
// do not each open their own. Close the client when done.
func NewClient(o ClientOptions) (*Client, error) {
	c := &Client{policy: o.Policy}
	if o.MaxRequests > 0 {
		c.limits = append(c.limits, NewLimiter(o.MaxRequests))
	}
	c.limits = append(c.limits, requests)
	if o.HTTP != nil {
		hc := *o.HTTP
		hc.CheckRedirect = chainRedirect(o.HTTP.CheckRedirect)
		c.http = &hc
		return c, nil
	}
	e, err := sharedTransport(o.Conns, o.TLS, o.CABundle)
	if err != nil {
		return nil, err
	}
	c.shared = &clientShare{entry: e}
	c.http = &http.Client{Transport: e.t, CheckRedirect: CheckRedirect}
	return c, nil
}

// WithPolicy returns a copy of c under policy p; it shares c's
// connections and limits, and is closed with c.
func (c *Client) WithPolicy(p Policy) *Client {
	d := *c
	d.policy = p
	return &d
}

// Pinned returns a copy of c that pins the version of the object it
// reads (a RemoteHandle's): it shares c's connections and limits, and is
// closed with c.
func (c *Client) Pinned() *Client {
	d := *c
	d.pin = &Pin{}
	return &d
}

// Close gives up c's share of its transport (once, for c and its
// copies): when no open client uses the transport any more its idle
// connections are closed. With a caller's http.Client it does nothing.
func (c *Client) Close() {
	if c.shared != nil {
		c.shared.once.Do(c.shared.entry.release)
	}
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
		ReadBufferSize:        tuning.ConnReadBuffer,
	}
}

// transportKey identifies the transports clients share.
type transportKey struct {
	conns    int
	tls      *tls.Config
	caBundle string
}

// sharedEntry is a transport and the clients using it.
type sharedEntry struct {
	key  transportKey
	t    *http.Transport
	refs int
}

// transports holds the transports of open clients; one is dropped, its
// idle connections closed, when its last client closes.
var transports struct {
	sync.Mutex
	m map[transportKey]*sharedEntry
}

// sharedTransport returns the transport of conns idle connections per
// host for the TLS settings, made on first use, and counts one more
// client of it.
func sharedTransport(conns int, cfg *tls.Config, caBundle string) (*sharedEntry, error) {
	k := transportKey{conns: max(conns, 2), tls: cfg}
	if cfg == nil {
		k.caBundle = caBundle
	}
	transports.Lock()
	defer transports.Unlock()
	if e := transports.m[k]; e != nil {
		e.refs++
		return e, nil
	}
	if cfg == nil && caBundle != "" {
		var err error
		if cfg, err = CABundleConfig(caBundle); err != nil {
			return nil, err
		}
	}
	if transports.m == nil {
		transports.m = map[transportKey]*sharedEntry{}
	}
	e := &sharedEntry{key: k, t: NewTransport(k.conns, cfg), refs: 1}
	transports.m[k] = e
	return e, nil
}

// release counts one client less; the last one closes the idle
// connections and drops the transport.
func (e *sharedEntry) release() {
	transports.Lock()
	e.refs--
	last := e.refs == 0
	if last && transports.m[e.key] == e {
		delete(transports.m, e.key)
	}
	transports.Unlock()
	if last {
		e.t.CloseIdleConnections()
	}
}

// RedirectError is a redirect that was not followed (ErrRedirect): from
// https to http, or of a request carrying credentials (an S3 signature,
// a session token, a password in the URL) to another scheme, host or
// port. To is the redirect's target as Redact prints it.
type RedirectError struct {
	From, To string
	Reason   string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("remote: redirect from %s to %s refused: %s", e.From, e.To, e.Reason)
}

// Is makes a *RedirectError match ErrRedirect.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirect }

// CheckRedirect is the redirect policy of every client (http.Client's
// CheckRedirect): nothing follows https -> http, and a request that
// carries credentials (Authorization, X-Amz-Security-Token, userinfo)
// follows only redirects to its own origin (scheme, host and port), so
// credentials never reach another server, and never in clear text.
// Redirects without credentials (WebHDFS's to a datanode) are followed,
// up to 10.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("remote: stopped after 10 redirects")
	}
	first, prev := via[0], via[len(via)-1]
	refuse := func(reason string) error {
		return &RedirectError{From: Redact(prev.URL.String()), To: Redact(req.URL.String()), Reason: reason}
	}
	for _, r := range via {
		if strings.EqualFold(r.URL.Scheme, "https") && !strings.EqualFold(req.URL.Scheme, "https") {
			return refuse("https to " + req.URL.Scheme)
		}
	}
	if carriesCredentials(first) && !sameOrigin(first.URL, req.URL) {
		return refuse("a request with credentials goes only to its own origin")
	}
	return nil
}

// carriesCredentials reports a request that holds a secret in its
// headers or its userinfo (which net/http turns into Authorization).
func carriesCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || r.Header.Get("X-Amz-Security-Token") != "" || r.URL.User != nil
}

// sameOrigin compares scheme, host and port (the scheme's default when
// none is given).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// chainRedirect runs CheckRedirect, then the caller's own policy, if
// any.
func chainRedirect(own func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if err := CheckRedirect(req, via); err != nil {
			return err
		}
		if own != nil {
			return own(req, via)
		}
		return nil
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
func (c *Client) do(ctx context.Context, e *Endpoint, method string, attempt func(ctx context.Context) error) (err error) {
	defer func() { err = e.scrubErr(err) }() // whatever the server put in an error
	for i := 1; ; i++ {
		release, err := acquireAll(ctx, c.limits)
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, c.policy.Timeout)
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
			err = retryable{fmt.Errorf("%w after %v: %w", ErrTimeout, c.policy.Timeout, err)}
		}
		var r retryable
		if !errors.As(err, &r) {
			c.logAttempt(ctx, "kvik: http request failed", e, method, i, err)
			return err
		}
		if i >= c.policy.MaxAttempts {
			err = fmt.Errorf("remote: giving up after %d attempts: %w", i, r.err)
			c.logAttempt(ctx, "kvik: http request failed", e, method, i, r.err)
			return err
		}
		delay := c.policy.backoff(i)
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
	if l := c.policy.Log; l != nil && l.Enabled(ctx, level) {
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
		slog.Int("attempt", attempt), slog.Int("max_attempts", c.policy.MaxAttempts)}
	var se *StatusError
	if errors.As(err, &se) {
		attrs = append(attrs, slog.Int("status", se.Code))
	}
	attrs = append(attrs, slog.String("error", e.scrub(err.Error())))
	l.LogAttrs(ctx, slog.LevelWarn, msg, append(attrs, extra...)...)
}

// logRequest records one request sent (status 0 when none came back).
func (c *Client) logRequest(e *Endpoint, req *http.Request, status int, took time.Duration, err error) {
	l := c.logAt(req.Context(), c.policy.RequestLevel)
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
	l.LogAttrs(req.Context(), c.policy.RequestLevel, "kvik: http request", attrs...)
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
	resp, err := c.http.Do(req)
	if err != nil {
		err = e.scrubErr(err)
		c.logRequest(e, req, 0, time.Since(start), err)
		if errors.Is(err, ErrRedirect) {
			return nil, err
		}
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
	// Read past the 512 bytes kept, so that a secret straddling the cut
	// is masked whole rather than cut first and left half unmasked, and
	// so that an S3 error document's code and message are found.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, max(e.snippetLimit(maxErrBody), errorDocLimit)))
	resp.Body.Close()
	serr := &StatusError{Method: req.Method, URL: e.String(), Code: resp.StatusCode, Body: e.quote(body)}
	if c.policy.Retry != nil && c.policy.Retry(resp.StatusCode) {
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
	resp, err := c.get(ctx, e, off, len(p), c.pin, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := checkRange(e, resp, off, len(p)); err != nil {
		return 0, err
	}
	return readExact(resp.Body, p, off)
}

// get sends a ranged GET (rangeRequest) and returns the answer when its
// status is one of want and its body is not encoded (Content-Encoding
// other than identity: ErrBadContentRange, not retried); the caller
// closes its body. With a pin the request asks for the version it holds
// (If-Match; the version seen first) and the answer must be of it: one
// object's reads (a handle's, c.pin), or one read's attempts.
func (c *Client) get(ctx context.Context, e *Endpoint, off int64, n int, pin *Pin, want ...int) (*http.Response, error) {
	req, err := e.rangeRequest(ctx, off, n)
	if err != nil {
		return nil, err
	}
	if pin != nil {
		pin.ifMatch(req)
	}
	resp, err := c.send(e, req, want...)
	if err != nil {
		return nil, changed(req, err)
	}
	if err := e.identity(resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if pin != nil {
		if err := pin.observe(resp); err != nil {
			resp.Body.Close()
			return nil, err
		}
	}
	return resp, nil
}

// identity fails with ErrBadContentRange when resp's body is encoded
// (a Content-Encoding other than identity, which the request asked
// for): its bytes are not the object's.
func (e *Endpoint) identity(resp *http.Response) error {
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return fmt.Errorf("%w: Content-Encoding %q, not the object's bytes", ErrBadContentRange, e.snippet([]byte(ce), 64))
	}
	return nil
}

// readExact fills p, the bytes at off, from a body that must end there
// (readStart), and checks that it does: one that goes on (a server
// sending more than it announced) gives an ErrBadContentRange. Reading
// the end of the body also lets the connection be reused.
func readExact(body io.Reader, p []byte, off int64) (int, error) {
	n, err := readStart(body, p, off)
	if err != nil {
		return n, err
	}
	return n, atEnd(body, off+int64(n))
}

// atEnd checks that a body read up to offset end ends there: one that
// goes on (a server sending more than it announced) gives an
// ErrBadContentRange.
func atEnd(body io.Reader, end int64) error {
	var extra [1]byte
	if m, _ := body.Read(extra[:]); m > 0 {
		return fmt.Errorf("%w: body goes on past offset %d, the end of the range asked for", ErrBadContentRange, end)
	}
	return nil
}

// readStart fills p, the bytes at off, from the start of a body. A body
// that ends, or whose connection breaks, before p is full gives a
// retryable ErrShortBody wrapping the cause (io.ErrUnexpectedEOF,
// ECONNRESET…) with the count read, from which a read can resume.
func readStart(body io.Reader, p []byte, off int64) (int, error) {
	n, err := readBody(body, p)
	if err != nil {
		return n, shortBody(int64(n), int64(len(p)), off, err)
	}
	return n, nil
}

// shortBody is the retryable ErrShortBody of a body that gave got of
// the want bytes at off, then err.
func shortBody(got, want, off int64, err error) error {
	return retryable{fmt.Errorf("%w: %d of %d bytes at offset %d: %w", ErrShortBody, got, want, off, err)}
}

// checkRange verifies that a response carries exactly n bytes at off.
func checkRange(e *Endpoint, resp *http.Response, off int64, n int) error {
	if resp.StatusCode == http.StatusOK && e.Type != WebHDFS {
		// The server ignored Range and sent the whole object: usable only
		// when that is exactly the range.
		if off == 0 && resp.ContentLength == int64(n) {
			return nil
		}
		return fmt.Errorf("%w: server ignored the Range header (HTTP 200 for %d bytes at offset %d); "+
			"kvik needs ranged GETs, which python3 -m http.server does not serve: to try URLs locally, see the versitygw recipe in docs/remote.md", ErrBadContentRange, n, off)
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
		if err := c.pin.observe(resp); err != nil {
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
	if err := c.pin.observe(resp); err != nil {
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
