package kvik

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/remote"
	"github.com/kvikgo/kvik/internal/sched"
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
	// ErrShortBody reports a response body that ended before the bytes
	// it announced (retried, then returned).
	ErrShortBody = remote.ErrShortBody
	// ErrBadContentRange reports a response that does not hold the bytes
	// asked for (a wrong Content-Range, a server ignoring Range).
	ErrBadContentRange = remote.ErrBadContentRange
	// ErrHTTPTimeout reports attempts that ran past HTTPTimeout.
	ErrHTTPTimeout = remote.ErrTimeout
	// ErrUnsupportedURL reports a URL that no endpoint type accepts.
	ErrUnsupportedURL = remote.ErrUnsupportedURL
	// ErrNoCredentials reports a signed S3 endpoint without credentials
	// or region.
	ErrNoCredentials = remote.ErrNoCredentials
)

// HTTPStatusError is a remote response with an unexpected status code.
type HTTPStatusError = remote.StatusError

// RemoteOption configures OpenRemote and the S3 uploads.
type RemoteOption func(*remoteOptions)

type remoteOptions struct {
	typ    RemoteEndpointType
	size   int64
	s3     remote.S3Config
	client *http.Client
}

// WithEndpointType forces an endpoint type instead of detecting it.
func WithEndpointType(t RemoteEndpointType) RemoteOption {
	return func(o *remoteOptions) { o.typ = t }
}

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

// WithHTTPClient sends requests with c instead of the handle's own
// keep-alive client (one idle connection per worker).
func WithHTTPClient(c *http.Client) RemoteOption { return func(o *remoteOptions) { o.client = c } }

// RemoteHandle is a remote object open for parallel reads into host or
// device memory: the counterpart of kvikio::RemoteHandle. Reads are split
// into TaskSize ranged GETs run on the worker pool, each retried under
// the HTTP settings of Defaults. It is safe for concurrent use; Close
// waits for reads in flight.
type RemoteHandle struct {
	ep     *remote.Endpoint
	client remote.Client
	owned  *http.Transport // closed by Close; nil with WithHTTPClient
	size   int64

	mu       sync.Mutex
	idle     sync.Cond
	inflight int
	closed   bool
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
// the server unless WithRemoteSize gives it.
func OpenRemote(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	o := remoteOptions{size: -1}
	for _, opt := range opts {
		opt(&o)
	}
	h, err := openRemote(ctx, url, o)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: redactURL(url), Err: err}
	}
	return h, nil
}

// OpenHTTP opens a plain HTTP(S) URL, which must support Range requests.
func OpenHTTP(ctx context.Context, url string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenRemote(ctx, url, append(opts, WithEndpointType(RemoteHTTP))...)
}

// OpenS3 opens bucket/key with signed requests (KvikIO's open_s3).
func OpenS3(ctx context.Context, bucket, key string, opts ...RemoteOption) (*RemoteHandle, error) {
	return OpenS3URL(ctx, "s3://"+bucket+"/"+key, opts...)
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

// OpenS3Presigned opens a presigned S3 GET URL. Its size comes from a
// one-byte GET, since the signature does not cover HEAD.
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
	h.idle.L = &h.mu
	hc := o.client
	if hc == nil {
		h.owned = remote.NewTransport(d.NumThreads)
		hc = &http.Client{Transport: h.owned}
	}
	h.client = remote.Client{HTTP: hc}
	h.client.Policy = policyOf(d)
	if err := h.pickEndpoint(ctx, url, o); err != nil {
		h.closeIdle()
		return nil, err
	}
	return h, nil
}

func policyOf(d Defaults) remote.Policy {
	codes := d.HTTPStatusCodes
	return remote.Policy{MaxAttempts: d.HTTPMaxAttempts, Timeout: d.HTTPTimeout, Retry: codes.Has,
		BaseDelay: remoteBaseDelay, MaxDelay: remote.DefaultMaxDelay}
}

// pickEndpoint builds the endpoint and learns the size. Under auto
// detection a signed S3 endpoint that cannot be built or is refused falls
// back to public S3, as in KvikIO.
func (h *RemoteHandle) pickEndpoint(ctx context.Context, url string, o remoteOptions) error {
	types := []RemoteEndpointType{o.typ}
	if o.typ == RemoteAuto {
		types = remote.Candidates(url)
		if len(types) == 0 {
			return fmt.Errorf("%w: %w: %q", ErrInvalidArgument, ErrUnsupportedURL, redactURL(url))
		}
	}
	var first error
	for _, t := range types {
		err := h.tryEndpoint(ctx, t, url, o)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
		// Only a signed S3 endpoint falls back (to public S3).
		if o.typ != RemoteAuto || t != RemoteS3 || ctx.Err() != nil {
			break
		}
	}
	if errors.Is(first, ErrUnsupportedURL) {
		first = fmt.Errorf("%w: %w", ErrInvalidArgument, first)
	}
	return first
}

func (h *RemoteHandle) tryEndpoint(ctx context.Context, t RemoteEndpointType, url string, o remoteOptions) error {
	ep, err := remote.New(t, url, o.s3)
	if err != nil {
		return err
	}
	size := o.size
	if size < 0 {
		if size, err = h.client.Size(ctx, ep); err != nil {
			return err
		}
	}
	h.ep, h.size = ep, size
	return nil
}

func redactURL(u string) string {
	for i := range len(u) {
		if u[i] == '?' {
			return u[:i] + "?…"
		}
	}
	return u
}

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

// Name returns the object's URL without its query string, as URL does.
func (h *RemoteHandle) Name() string { return h.URL() }

// URL returns the object's http(s) URL, without any query (presigned
// signatures stay out of logs).
func (h *RemoteHandle) URL() string { return h.ep.String() }

// EndpointType returns the endpoint type in use.
func (h *RemoteHandle) EndpointType() RemoteEndpointType { return h.ep.Type }

// Close waits for reads in flight and closes idle connections. Reads
// started after Close fail with ErrClosed.
func (h *RemoteHandle) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for h.inflight > 0 {
		h.idle.Wait()
	}
	h.mu.Unlock()
	h.closeIdle()
	return nil
}

func (h *RemoteHandle) closeIdle() {
	if h.owned != nil {
		h.owned.CloseIdleConnections()
	}
}

func (h *RemoteHandle) acquire() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.inflight++
	return nil
}

func (h *RemoteHandle) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight--; h.inflight == 0 {
		h.idle.Broadcast()
	}
}

// ReadAt reads len(p) bytes at off in parallel ranged requests. It
// satisfies io.ReaderAt: n < len(p) comes with an error, io.EOF when the
// object ends first.
func (h *RemoteHandle) ReadAt(p []byte, off int64) (int, error) {
	return h.hostOp(context.Background(), p, off, nil)
}

// Read reads size bytes at fileOffset into buf[:size] (KvikIO's
// RemoteHandle::read).
func (h *RemoteHandle) Read(buf []byte, size int, fileOffset int64) (int, error) {
	if size < 0 || size > len(buf) {
		return 0, h.pathErr(fmt.Errorf("%w: size %d for a %d-byte buffer", ErrInvalidArgument, size, len(buf)))
	}
	return h.ReadAt(buf[:size], fileOffset)
}

// PRead starts ReadAt and returns at once; p must not be touched until
// the Future completes. Cancelling ctx aborts requests in flight.
func (h *RemoteHandle) PRead(ctx context.Context, p []byte, off int64) *Future {
	fut := newFuture()
	h.hostOp(ctx, p, off, fut)
	return fut
}

// ReadDevice reads size bytes at fileOffset into device memory at
// buf+devOffset: each task downloads into pinned bounce buffers and
// copies to the device, overlapping the download of one chunk with the
// copy of the previous one. A read past the end returns the bytes read
// and io.EOF.
func (h *RemoteHandle) ReadDevice(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	return h.deviceOp(context.Background(), buf, size, fileOffset, devOffset, nil)
}

// PReadDevice starts ReadDevice and returns at once.
func (h *RemoteHandle) PReadDevice(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) *Future {
	fut := newFuture()
	h.deviceOp(ctx, buf, size, fileOffset, devOffset, fut)
	return fut
}

// begin checks a read and clamps it to the object: it returns the bytes
// to fetch and whether the read ends at the object's end.
func (h *RemoteHandle) begin(off int64, size int) (Defaults, int, bool, error) {
	if err := checkRange(off, size); err != nil {
		return Defaults{}, 0, false, err
	}
	d, _ := GetDefaults()
	if err := h.acquire(); err != nil {
		return d, 0, false, err
	}
	n := size
	if off >= h.size {
		n = 0
	} else if int64(n) > h.size-off {
		n = int(h.size - off)
	}
	return d, n, n < size, nil
}

func (h *RemoteHandle) hostOp(ctx context.Context, p []byte, off int64, fut *Future) (int, error) {
	d, n, eof, err := h.begin(off, len(p))
	if err != nil {
		return h.op().fail(err, fut)
	}
	client := h.clientFor(d)
	d.TaskSize = remoteTaskSize(d, n)
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		return client.ReadRange(ctx, h.ep, p[t.BufOff:t.BufOff+t.Len], t.Off)
	}
	return h.op().run(ctx, d, poolFor(d, ""), off, n, eof, fn, fut)
}

// remoteWaves, when positive, lets a remote read of n bytes into host
// memory use tasks larger than TaskSize, about remoteWaves per worker, so
// that a large read makes fewer requests (each costs the server a fixed
// amount); 0 keeps TaskSize. A benchmark variant for now
// (SetRemoteVariant's "wavesN"); device reads keep TaskSize, which also
// sizes their pinned bounce buffers.
var remoteWaves int

// remoteTaskSize is the task size of a remote read of n bytes.
func remoteTaskSize(d Defaults, n int) int {
	if remoteWaves <= 0 {
		return d.TaskSize
	}
	per := n / (d.NumThreads * remoteWaves)
	return max(d.TaskSize, (per+pageSize-1)/pageSize*pageSize)
}

// clientFor applies the current HTTP settings.
func (h *RemoteHandle) clientFor(d Defaults) *remote.Client {
	c := h.client
	c.Policy = policyOf(d)
	return &c
}

func (h *RemoteHandle) deviceOp(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64, fut *Future) (int, error) {
	d, n, eof, err := h.begin(fileOffset, size)
	if err != nil {
		return h.op().fail(err, fut)
	}
	r, err := resolveDevice(buf, size, devOffset)
	if err == nil {
		err = cuda.WithContext(r.ctx, func() error { return cuda.StreamSynchronize(0) })
	}
	if err != nil {
		h.release()
		return h.op().fail(err, fut)
	}
	client := h.clientFor(d)
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		return h.deviceTask(ctx, client, d, r, t)
	}
	pool := poolFor(d, "")
	if n < d.GDSThreshold {
		pool = nil
	}
	return h.op().run(ctx, d, pool, fileOffset, n, eof, fn, fut)
}

// op returns the handle's readOp.
func (h *RemoteHandle) op() readOp { return readOp{release: h.release, wrap: h.pathErr} }

func (h *RemoteHandle) pathErr(err error) error {
	name := "remote"
	if h.ep != nil {
		name = h.ep.String()
	}
	return &fs.PathError{Op: "read", Path: name, Err: err}
}

// deviceTask downloads one task into the device through pinned bounce
// buffers (stagedRead). The downloads run without a CUDA context current,
// so the network poller wakes them as any goroutine.
func (h *RemoteHandle) deviceTask(ctx context.Context, c *remote.Client, d Defaults, r deviceRange, t sched.Task) (int, error) {
	return stagedRead(d, r, t, func(p []byte, off int64) (int, error) {
		return c.ReadRange(ctx, h.ep, p, off)
	})
}
