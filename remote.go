package kvik

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"

	"github.com/kvikgo/kvik/internal/remote"
)

// RemoteEndpointType selects how a remote URL is reached, as KvikIO's
// RemoteEndpointType.
type RemoteEndpointType = remote.Type

// Remote endpoint types. RemoteAuto picks one from the URL.
const (
	RemoteAuto        = remote.Auto
	RemoteS3          = remote.S3
	RemoteS3Public    = remote.S3Public
	RemoteS3Presigned = remote.S3Presigned
	RemoteWebHDFS     = remote.WebHDFS
	RemoteHTTP        = remote.HTTP
)

// Errors of remote I/O; test with errors.Is. A response with an
// unexpected status is an *HTTPStatusError, which also matches
// fs.ErrNotExist (404) and fs.ErrPermission (401, 403).
var (
	// ErrShortBody reports a response body that ended, or whose
	// connection broke, before the bytes it announced (retried, then
	// returned).
	ErrShortBody = remote.ErrShortBody
	// ErrBadContentRange reports a response that does not hold the bytes
	// asked for (a wrong Content-Range, a server ignoring Range).
	ErrBadContentRange = remote.ErrBadContentRange
	// ErrHTTPTimeout reports attempts that ran past HTTPTimeout.
	ErrHTTPTimeout = remote.ErrTimeout
	// ErrUnsupportedURL reports a URL that no endpoint type accepts.
	ErrUnsupportedURL = remote.ErrUnsupportedURL
	// ErrCertificate reports an https server whose certificate is not
	// trusted; the *tls.CertificateVerificationError (and the x509 error
	// in it) is wrapped too.
	ErrCertificate = remote.ErrCertificate
	// ErrNoCredentials reports a signed S3 endpoint without credentials
	// or region.
	ErrNoCredentials = remote.ErrNoCredentials
	// ErrInvalidKey reports an object key that could leave its prefix or
	// name a bucket's root: empty, with an empty, "." or ".." segment, or
	// a malformed %-escape in an s3:// URL. RemotePrefix, the zarr stores
	// and s3:// URLs refuse such keys before sending any request.
	ErrInvalidKey = remote.ErrInvalidKey
	// ErrRedirect reports a redirect that was not followed: from https to
	// http, or of a request carrying credentials (signed S3, a session
	// token, a password in the URL) to another scheme, host or port. The
	// error is a *RedirectError naming the redirect's target.
	ErrRedirect = remote.ErrRedirect
	// ErrTooLarge reports a size from a server, a file or metadata beyond
	// its bound: a response body longer than the caller expects (a chunk,
	// a range) or than a cap (WithMaxDocumentSize), or a host allocation
	// larger than the machine's memory. It is never retried.
	ErrTooLarge = remote.ErrTooLarge
	// ErrObjectChanged reports a remote object replaced while a handle
	// read it: a ranged request found another ETag than the handle's
	// first response (HTTP 412 to its If-Match, or another ETag in the
	// answer). It is not retried: no read returns bytes of two versions.
	// It also reports a RemotePrefix.SaveIf whose condition failed (HTTP
	// 412, 409 or 404): the object is not the version it was read at.
	ErrObjectChanged = remote.ErrObjectChanged
	// ErrBadResponse reports an answer with an expected status whose
	// body is not what the request asks for: an upload's
	// CompleteMultipartUpload answered 200 with an empty body, an HTML
	// page or another document than its result (the upload is aborted),
	// a CreateMultipartUpload answered without an upload id.
	ErrBadResponse = remote.ErrBadResponse
)

// HTTPStatusError is a remote response with an unexpected status code.
type HTTPStatusError = remote.StatusError

// RedirectError is a redirect that was refused (ErrRedirect); its To is
// the target as RedactURL prints it.
type RedirectError = remote.RedirectError

// RemoteOption configures OpenRemote, the S3 uploads and SaveFile (and
// so the file formats' Save functions, which pass theirs on).
type RemoteOption func(*remoteOptions)

type remoteOptions struct {
	typ         RemoteEndpointType
	size        int64
	s3          remote.S3Config
	client      *http.Client
	tls         *tls.Config
	maxRequests int
	maxDocument int64
	uploadCRC   *uint32 // WithUploadCRC32C
	noVersion   bool    // WithVersionCheck(false)
	noSync      bool    // WithoutSync
}

// WithEndpointType forces an endpoint type instead of detecting it.
func WithEndpointType(t RemoteEndpointType) RemoteOption {
	return func(o *remoteOptions) { o.typ = t }
}

// WithVersionCheck turns the check that every read of a RemoteHandle sees
// one version of the object on (the default) or off. On, ranged requests
// after the first send If-Match with the first ETag, and another version
// fails with ErrObjectChanged. Turn it off only for servers whose
// replicas give one unchanged object different ETags (some load-balanced
// HTTP mirrors): a read may then mix versions if the object changes.
func WithVersionCheck(on bool) RemoteOption { return func(o *remoteOptions) { o.noVersion = !on } }

// WithRemoteSize gives the object's size, which saves the request that
// asks for it (KvikIO's nbytes).
func WithRemoteSize(n int64) RemoteOption { return func(o *remoteOptions) { o.size = n } }

// WithS3Credentials sets the S3 access key, secret and (for temporary
// credentials) session token instead of AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func WithS3Credentials(accessKeyID, secretAccessKey, sessionToken string) RemoteOption {
	return func(o *remoteOptions) {
		o.s3.AccessKeyID, o.s3.SecretAccessKey, o.s3.SessionToken = accessKeyID, secretAccessKey, sessionToken
	}
}

// WithS3Region sets the region instead of AWS_DEFAULT_REGION.
func WithS3Region(region string) RemoteOption { return func(o *remoteOptions) { o.s3.Region = region } }

// WithS3Endpoint sets an S3-compatible server's URL instead of
// AWS_ENDPOINT_URL; s3://bucket/key then means endpoint/bucket/key.
func WithS3Endpoint(endpointURL string) RemoteOption {
	return func(o *remoteOptions) { o.s3.EndpointURL = endpointURL }
}

// WithHTTPClient sends requests with c instead of kvik's shared
// keep-alive transport (one idle connection per worker). c's transport
// then decides TLS: WithTLSConfig and AWS_CA_BUNDLE do not apply. kvik
// sends through a copy of c whose CheckRedirect applies kvik's redirect
// policy (see ErrRedirect) before c's own; c is not changed.
func WithHTTPClient(c *http.Client) RemoteOption { return func(o *remoteOptions) { o.client = c } }

// WithTLSConfig makes https requests with c (a clone of it): its RootCAs
// to trust a private CA, client certificates, and so on. Without it the
// system's roots are trusted (on Linux SSL_CERT_FILE and SSL_CERT_DIR
// replace the system's files, as for any Go program), except that S3
// endpoints trust the PEM bundle named by AWS_CA_BUNDLE instead when that
// is set, as the AWS tools do.
func WithTLSConfig(c *tls.Config) RemoteOption { return func(o *remoteOptions) { o.tls = c } }

// newClient is the one place the root package gets a remote client:
// signing, retries under the current settings (d), this handle's,
// upload's or prefix's cap (WithMaxRequests) and the process-wide cap,
// the redirect policy and redaction all come with it. conns is how many
// idle connections per host it keeps; s3 says the endpoint is S3, whose
// https trusts AWS_CA_BUNDLE when set. Close it when done.
func (o *remoteOptions) newClient(d Defaults, conns int, s3 bool) (*remote.Client, error) {
	co := remote.ClientOptions{HTTP: o.client, Conns: conns, TLS: o.tls, MaxRequests: o.maxRequests, Policy: policyOf(d)}
	if o.tls == nil && s3 {
		co.CABundle = os.Getenv("AWS_CA_BUNDLE")
	}
	return remote.NewClient(co)
}

// WithMaxRequests caps the requests in flight of one handle (or one
// upload) at n, within the process-wide cap RemoteMaxRequests
// (KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS); 0 means no cap of its own.
// A negative n is an error wrapping ErrInvalidArgument.
func WithMaxRequests(n int) RemoteOption { return func(o *remoteOptions) { o.maxRequests = n } }

// DefaultMaxDocumentSize is the default cap on the objects that
// RemotePrefix.Get reads whole (Zarr metadata documents and the like).
const DefaultMaxDocumentSize = 64 << 20

// WithMaxDocumentSize caps at n bytes the objects that RemotePrefix.Get
// reads whole without knowing their size (metadata documents; default
// DefaultMaxDocumentSize); a longer one fails with ErrTooLarge. A
// RemoteHandle reads ranges the caller sizes and ignores it; 0 or less
// keeps the default.
func WithMaxDocumentSize(n int64) RemoteOption { return func(o *remoteOptions) { o.maxDocument = n } }

// WithoutSync makes SaveFile's saves of local files skip fsync(2), of
// the new file before its rename and of its directory after, where a
// disk's flushes set the pace of a save (a Zarr array of many chunks
// written to an NVMe drive). The save stays atomic, to readers and to
// other writers: they see the old file or the new one, whole. It is no
// longer durable: a crash of the machine, not of the process, soon after
// it may leave the old file, no file, or an empty or partly written one.
// For data that can be made again (zarr-python never syncs; TensorStore
// does unless its file_io_sync is false). Remote handles and S3 uploads
// ignore it; in tmpfs, where nothing is synced, it changes nothing.
func WithoutSync() RemoteOption { return func(o *remoteOptions) { o.noSync = true } }

// skipsSync reports whether opts hold WithoutSync: all a local save
// (SaveFile, MkdirAll) takes of them.
func skipsSync(opts []RemoteOption) bool {
	var o remoteOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.noSync
}

// newRemoteOptions applies opts and checks them.
func newRemoteOptions(opts []RemoteOption) (remoteOptions, error) {
	o := remoteOptions{size: -1}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxRequests < 0 {
		return o, fmt.Errorf("%w: WithMaxRequests(%d) must not be negative (0: no cap)", ErrInvalidArgument, o.maxRequests)
	}
	return o, nil
}

// RemoteHandle is a remote object open for parallel reads into host or
// device memory: the counterpart of kvikio::RemoteHandle. Reads are split
// into TaskSize ranged GETs run on the worker pool, each retried under
// the HTTP settings of Defaults. It is safe for concurrent use; Close
// waits for reads in flight.
type RemoteHandle struct {
	ep     *remote.Endpoint
	client *remote.Client
	size   int64
	// head holds the object's first bytes, from the GET that gave the
	// size at open (remoteHeadSize); reads inside it need no request.
	head []byte

	opGate
	readMethods // ReadAt, Read, PRead, ReadDevice, PReadDevice
}

// remoteBaseDelay is the first retry's backoff (KvikIO's 500 ms); tests
// shorten it.
var remoteBaseDelay = remote.DefaultBaseDelay

// OpenRemote opens the object at url. The endpoint type is detected as
// KvikIO's RemoteHandle::open does: s3://bucket/key and AWS S3 https URLs
// are S3 (signed with credentials from the environment or options, or
// public when there are none or they are refused), URLs with
// X-Amz-Signature are presigned S3, http(s)://host:port/webhdfs/v1/...
// is WebHDFS, and any other http(s) URL is plain HTTP. The size comes from
// the server unless WithRemoteSize gives it: from a ranged GET of the
// object's first MiB, which the handle keeps and serves reads of (a
// format's header) from, so opening and reading a header cost one
// request (a HEAD follows where that answer gives no size; WebHDFS asks
// GETFILESTATUS). The fall-back to public S3
// happens only when there are no credentials or the server answers 401
// or 403, never after a timeout or a 5xx.
//
// An s3:// URL is not parsed as a URL: the text after "bucket/" is the
// key, percent-decoded exactly once (s3://b/a%2520b names the key
// "a%20b"). A malformed escape, or a key with an empty, "." or ".."
// segment, fails with ErrInvalidKey before any request. Keys are sent
// escaped once as SigV4 signs them and are never path-cleaned. http(s)
// URLs are decoded once by the URL parser, never twice.
func OpenRemote(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	o, err := newRemoteOptions(opts)
	if err == nil {
		var h *RemoteHandle
		if h, err = openRemote(ctx, url, o); err == nil {
			return h, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: RedactURL(url), Err: err}
}

// OpenHTTP opens a plain HTTP(S) URL, which must support Range requests.
func OpenHTTP(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenRemote(ctx, url, append(opts, WithEndpointType(RemoteHTTP))...)
}

// OpenS3 opens bucket/key with signed requests (KvikIO's open_s3). key
// is the object key itself, not percent-encoded.
func OpenS3(ctx context.Context, bucket, key string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenS3URL(ctx, "s3://"+bucket+"/"+remote.EscapeKey(key), opts...)
}

// OpenS3URL opens an s3:// URL or an S3 object's http(s) URL with signed
// requests.
func OpenS3URL(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenRemote(ctx, url, append(opts, WithEndpointType(RemoteS3))...)
}

// OpenS3Public opens a publicly readable S3 object without signing.
func OpenS3Public(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenRemote(ctx, url, append(opts, WithEndpointType(RemoteS3Public))...)
}

// OpenS3Presigned opens a presigned S3 GET URL. Its size comes from the
// opening ranged GET, as for other URLs (the signature covers GET only).
func OpenS3Presigned(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenRemote(ctx, url, append(opts, WithEndpointType(RemoteS3Presigned))...)
}

// OpenWebHDFS opens an http(s)://namenode:port/webhdfs/v1/path URL (with
// an optional user.name query parameter).
func OpenWebHDFS(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenRemote(ctx, url, append(opts, WithEndpointType(RemoteWebHDFS))...)
}

func openRemote(ctx context.Context, url string, o remoteOptions) (*RemoteHandle, error) {
	d, err := GetDefaults()
	if err != nil {
		return nil, err
	}
	o.s3 = o.s3.FromEnv(os.Getenv)
	h := &RemoteHandle{size: o.size}
	h.initGate()
	h.readMethods = readMethods{h}
	if h.client, err = o.newClient(d, d.NumThreads, remote.IsS3(o.typ, url)); err != nil {
		return nil, err
	}
	// Every read of the handle is of one version of the object (If-Match
	// with the first ETag; ErrObjectChanged otherwise).
	if !o.noVersion {
		h.client = h.client.Pinned()
	}
	if err := h.pickEndpoint(ctx, url, d, o); err != nil {
		h.closeIdle()
		return nil, err
	}
	if l := logAt(LevelInfo); l != nil {
		l.LogAttrs(ctx, LevelInfo, "kvik: open remote", slog.String("url", h.ep.String()),
			slog.String("endpoint", h.ep.Type.String()), slog.Int64("size", h.size))
	}
	return h, nil
}

func policyOf(d Defaults) remote.Policy {
	codes := d.HTTPStatusCodes
	p := remote.Policy{MaxAttempts: d.HTTPMaxAttempts, Timeout: d.HTTPTimeout, Retry: codes.Has,
		BaseDelay: remoteBaseDelay, MaxDelay: remote.DefaultMaxDelay, RequestLevel: LevelTrace}
	if d.RemoteVerbose {
		p.RequestLevel = LevelDebug
	}
	p.Log = logs.active.Load() // the client asks it what it takes
	return p
}

// pickEndpoint builds the endpoint and learns the size. Under auto
// detection a signed S3 endpoint that cannot be built or is refused falls
// back to public S3, as in KvikIO.
func (h *RemoteHandle) pickEndpoint(ctx context.Context, url string, d Defaults, o remoteOptions) error {
	types := []RemoteEndpointType{o.typ}
	if o.typ == RemoteAuto {
		types = remote.Candidates(url)
		if len(types) == 0 {
			return fmt.Errorf("%w: %w: %q", ErrInvalidArgument, ErrUnsupportedURL, RedactURL(url))
		}
	}
	var first error
	for _, t := range types {
		err := h.tryEndpoint(ctx, t, url, d, o)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
		// Only a signed S3 endpoint falls back (to public S3), and only
		// when it has no credentials or the server refused them: after a
		// timeout or a 5xx unsigned requests would only run the whole
		// retry policy again.
		if o.typ != RemoteAuto || t != RemoteS3 || ctx.Err() != nil || !credentialsRefused(err) {
			break
		}
		if l := logAt(LevelInfo); l != nil {
			l.LogAttrs(ctx, LevelInfo, "kvik: signed S3 failed, trying public S3",
				slog.String("url", RedactURL(url)), slog.String("error", err.Error()))
		}
	}
	if errors.Is(first, ErrUnsupportedURL) {
		first = fmt.Errorf("%w: %w", ErrInvalidArgument, first)
	}
	return first
}

// credentialsRefused reports a signed S3 attempt that failed for want of
// credentials, or that the server answered 401 or 403.
func credentialsRefused(err error) bool {
	var se *HTTPStatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden
	}
	return errors.Is(err, ErrNoCredentials)
}

func (h *RemoteHandle) tryEndpoint(ctx context.Context, t RemoteEndpointType, url string, d Defaults, o remoteOptions) error {
	ep, err := remote.New(t, url, o.s3)
	if err != nil {
		return err
	}
	ep.SetDefaultUser(d.WebHDFSUsername)
	size := o.size
	var head []byte
	switch {
	case size >= 0:
	case ep.Type == RemoteWebHDFS:
		if size, err = h.client.Size(ctx, ep); err != nil {
			return err
		}
	default:
		// One ranged GET instead of a HEAD: it gives the size and the
		// first bytes, where a format's header is.
		head = make([]byte, remoteHeadSize)
		var n int
		if n, size, err = h.client.ReadHead(ctx, ep, head); err != nil {
			return err
		}
		switch {
		case size < 0: // the answer gave no size
			head = nil
			if size, err = h.client.Size(ctx, ep); err != nil {
				return err
			}
		case n < remoteHeadSize/2:
			head = bytes.Clone(head[:n]) // a small object: keep only its bytes
		default:
			head = head[:n:n]
		}
	}
	h.ep, h.size, h.head = ep, size, head
	return nil
}

// remoteHeadSize is how many of an object's first bytes the GET that
// opens a RemoteHandle asks for: as much as the formats' first header
// reads (safetensors and GGUF 1 MiB, .npy 64 KiB), which it then
// serves, so that opening a checkpoint and reading its header take one
// round trip instead of two.
const remoteHeadSize = 1 << 20

// Size returns the object's size in bytes (KvikIO's nbytes); it fails
// with ErrClosed once the handle is closed.
func (h *RemoteHandle) Size() (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, &fs.PathError{Op: "stat", Path: h.Name(), Err: ErrClosed}
	}
	return h.size, nil
}

// Name returns the object's URL as URL does.
func (h *RemoteHandle) Name() string { return h.URL() }

// URL returns the object's http(s) URL as RedactURL prints it: without
// its query (presigned signatures stay out of logs) and with any
// password masked.
func (h *RemoteHandle) URL() string { return h.ep.String() }

// EndpointType returns the endpoint type in use.
func (h *RemoteHandle) EndpointType() RemoteEndpointType { return h.ep.Type }

// Close waits for reads in flight and closes idle connections. Reads
// started after Close fail with ErrClosed.
func (h *RemoteHandle) Close() error {
	h.mu.Lock()
	closing := h.closeLocked()
	h.mu.Unlock()
	if closing {
		h.closeIdle()
	}
	return nil
}

func (h *RemoteHandle) closeIdle() { h.client.Close() }

// begin checks a read and clamps it to the object: it returns the bytes
// to fetch and whether the read ends at the object's end.
func (h *RemoteHandle) begin(off int64, size int) (Defaults, int, bool, error) {
	if err := checkRange(off, size); err != nil {
		return Defaults{}, 0, false, err
	}
	d, _ := GetDefaults()
	if err := h.enter(); err != nil {
		return d, 0, false, err
	}
	n, eof := clampRead(off, size, h.size)
	return d, n, eof, nil
}

// fetcher downloads one task's range with the current HTTP settings,
// but for the bytes that the opening GET brought (head).
func (h *RemoteHandle) fetcher(d Defaults) fetchFunc {
	c := h.clientFor(d)
	return func(ctx context.Context, p []byte, off int64) (int, error) {
		n := 0
		if off >= 0 && off < int64(len(h.head)) {
			// The opening GET's bytes; only the rest is asked for.
			if n = copy(p, h.head[off:]); n == len(p) {
				return n, nil
			}
		}
		m, err := c.ReadRange(ctx, h.ep, p[n:], off+int64(n))
		return n + m, err
	}
}

// hostTaskSize is the task size of a remote read of n bytes into host
// memory: about tune.remoteWaves tasks per worker, none below TaskSize.
func (h *RemoteHandle) hostTaskSize(d Defaults, n int) int {
	waves := tune.remoteWaves
	if waves <= 0 {
		return d.TaskSize
	}
	per := n / (d.NumThreads * waves)
	return max(d.TaskSize, (per+pageSize-1)/pageSize*pageSize)
}

// clientFor applies the current HTTP settings.
func (h *RemoteHandle) clientFor(d Defaults) *remote.Client { return h.client.WithPolicy(policyOf(d)) }

func (h *RemoteHandle) pathErr(err error) error {
	name := "remote"
	if h.ep != nil {
		name = h.ep.String()
	}
	return &fs.PathError{Op: "read", Path: name, Err: err}
}
