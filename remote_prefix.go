package kvik

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/kvikgo/kvik/internal/remote"
)

// RemotePrefix is the set of remote objects under one URL prefix, read
// and written by key with one shared connection pool: an S3 "directory"
// (s3://bucket/path/ or an S3 http(s) URL) or a plain HTTP(S) base URL,
// which is read-only. It serves formats made of many objects, such as
// Zarr stores. Each request is retried under the HTTP settings of
// Defaults. A RemotePrefix is safe for concurrent use.
type RemotePrefix struct {
	base string // ends in "/"
	ep   *remote.Endpoint
	c    *remote.Client
	// maxGet bounds the objects Get reads.
	maxGet int64
}

// NewRemotePrefix returns the prefix url (a trailing "/" is implied). It
// sends no request. The endpoint type is WithEndpointType's (RemoteS3,
// RemoteS3Public or RemoteHTTP), or detected as OpenRemote does, except
// that a signed S3 prefix without credentials is public S3 from the
// start. Presigned URLs and WebHDFS name single objects, not prefixes.
// An s3:// prefix's path is percent-decoded once, as OpenRemote decodes
// an s3:// URL; keys given to the methods are not decoded at all (see
// Get). WithMaxRequests caps the requests of the whole prefix.
func NewRemotePrefix(url string, opts ...RemoteOption) (*RemotePrefix, error) {
	o, err := newRemoteOptions(opts)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: RedactURL(url), Err: err}
	}
	o.s3 = o.s3.FromEnv(os.Getenv)
	p := &RemotePrefix{base: strings.TrimRight(url, "/") + "/", maxGet: o.maxDocument}
	if p.maxGet <= 0 {
		p.maxGet = DefaultMaxDocumentSize
	}
	if err := p.pickType(o.typ, o.s3); err != nil {
		return nil, &fs.PathError{Op: "open", Path: RedactURL(url), Err: err}
	}
	d, err := GetDefaults()
	if err != nil {
		return nil, err
	}
	// Idle connections for several requests per worker: a format keeps
	// more GETs in flight than there are workers.
	if p.c, err = o.newClient(d, 4*d.NumThreads, p.ep.Type != RemoteHTTP); err != nil {
		return nil, &fs.PathError{Op: "open", Path: RedactURL(url), Err: err}
	}
	return p, nil
}

func (p *RemotePrefix) pickType(t RemoteEndpointType, cfg remote.S3Config) error {
	if strings.ContainsAny(p.base, "?#") {
		// Keys are appended to the path: a query (a presigned
		// signature) would end up in the middle.
		return fmt.Errorf("%w: %w: a prefix URL takes no query", ErrInvalidArgument, ErrUnsupportedURL)
	}
	types := []RemoteEndpointType{t}
	if t == RemoteAuto {
		types = remote.Candidates(p.base + "k")
	}
	for _, t := range types {
		switch t {
		case RemoteS3, RemoteS3Public, RemoteHTTP:
		default:
			continue
		}
		ep, err := remote.NewPrefix(t, p.base, cfg)
		if errors.Is(err, ErrNoCredentials) && t == RemoteS3 && len(types) > 1 {
			continue // public S3 next
		}
		if err != nil {
			return err
		}
		p.ep = ep
		return nil
	}
	return fmt.Errorf("%w: %w: %q is not an S3 or HTTP prefix", ErrInvalidArgument, ErrUnsupportedURL, RedactURL(p.base))
}

// URL returns the URL of key: the prefix's URL followed by key escaped
// as a request path (remote.EscapeKey), so that the URL, decoded once as
// OpenRemote decodes it, names exactly key.
func (p *RemotePrefix) URL(key string) string { return p.base + remote.EscapeKey(key) }

// EndpointType returns the endpoint type in use.
func (p *RemotePrefix) EndpointType() RemoteEndpointType { return p.ep.Type }

// MaxDocumentSize returns the cap on the objects Get reads
// (WithMaxDocumentSize, default DefaultMaxDocumentSize).
func (p *RemotePrefix) MaxDocumentSize() int64 { return p.maxGet }

// Close closes idle connections.
func (p *RemotePrefix) Close() error {
	p.c.Close()
	return nil
}

// endpoint returns the endpoint of key and a client under the current
// settings. key is literal: a key that could leave the prefix (empty,
// with an empty, "." or ".." segment) fails with ErrInvalidKey.
func (p *RemotePrefix) endpoint(key string) (*remote.Endpoint, *remote.Client, error) {
	e, err := p.ep.Join(key)
	if err != nil {
		return nil, nil, err
	}
	return e, p.client(), nil
}

// client returns a client of the prefix's connection pool and limits
// under the current settings.
func (p *RemotePrefix) client() *remote.Client {
	d, _ := GetDefaults()
	return p.c.WithPolicy(policyOf(d))
}

func (p *RemotePrefix) pathErr(op, key string, err error) error {
	return &fs.PathError{Op: op, Path: RedactURL(p.URL(key)), Err: err}
}

// Get returns the whole object key, read with one GET: into buf when it
// fits in cap(buf), else into a new slice. An object longer than both
// cap(buf) and the prefix's document cap (WithMaxDocumentSize, default
// DefaultMaxDocumentSize) fails with an error matching ErrTooLarge, and
// no more memory than that cap is taken, whatever the server claims. A
// missing object fails with an error matching fs.ErrNotExist. Keys, here
// and in every method, are object keys below the prefix, taken literally
// ("50%25" is the key 50%25, not 50%); a key that is empty or has an
// empty, "." or ".." segment fails with ErrInvalidKey before any request.
func (p *RemotePrefix) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	return p.GetMax(ctx, key, buf, max(int64(cap(buf)), p.maxGet))
}

// GetMax is Get for an object of at most limit bytes, the size the caller
// expects: a longer one fails with an error matching ErrTooLarge.
func (p *RemotePrefix) GetMax(ctx context.Context, key string, buf []byte, limit int64) ([]byte, error) {
	buf, _, err := p.GetWithETag(ctx, key, buf, limit)
	return buf, err
}

// GetWithETag is GetMax that also returns the object's ETag, its version
// as the server names it, for a later SaveIf; "" when the server names
// none (then SaveIf cannot ask for that version).
func (p *RemotePrefix) GetWithETag(ctx context.Context, key string, buf []byte, limit int64) ([]byte, string, error) {
	e, c, err := p.endpoint(key)
	var tag string
	if err == nil {
		buf, tag, err = c.GetObjectTag(ctx, e, buf, limit)
	}
	if err != nil {
		return nil, "", p.pathErr("read", key, err)
	}
	return buf, tag, nil
}

// ReadRange fills b with the bytes of object key at off, with one ranged
// GET, and returns the object's size. A negative off counts from the end
// (the request asks for the last -off bytes). A range past the end fails
// with an error wrapping io.ErrUnexpectedEOF, with the size when the
// server gave it; a missing object with one matching fs.ErrNotExist.
func (p *RemotePrefix) ReadRange(ctx context.Context, key string, b []byte, off int64) (int64, error) {
	e, c, err := p.endpoint(key)
	size := int64(-1)
	if err == nil {
		size, err = c.ReadAtSize(ctx, e, b, off)
	}
	if err != nil {
		return size, p.pathErr("read", key, err)
	}
	return size, nil
}

// ReadRangeWithin is ReadRange for b's bytes at off (off >= 0) with a
// GET of the wider range [lo, hi) that holds them, the bytes around them
// dropped (at most RemoteMaxSlack): for a caller that wants all of an
// object of known size but a few bytes, which asks for the whole object
// (lo 0, hi the size), as a server may send a whole object straight
// from its file where a part takes it a copy (versitygw serves the one
// with sendfile(2), the other through a buffer). It returns the
// object's size; a range past the end fails as ReadRange's do.
func (p *RemotePrefix) ReadRangeWithin(ctx context.Context, key string, b []byte, off, lo, hi int64) (int64, error) {
	return p.ReadRangeFunc(ctx, key, b, off, lo, hi, nil)
}

// ReadRangeFunc is ReadRangeWithin that hands b's bytes over as they
// come: progress is called, in the calling goroutine, with n, the count
// of b's bytes in (b[:n]), each time it grows, the last time with len(b)
// before a nil return, so that a caller can use the first bytes while
// the rest arrive (zarr decodes the first inner chunks of a shard's range
// while its last are on the way). b[:n] never changes once reported: an
// attempt that fails after it resumes there, asking for the version of
// the object it began with (If-Match with the first answer's ETag; a
// replaced object fails with ErrObjectChanged). lo == off and hi ==
// off+len(b) ask for b's bytes alone.
func (p *RemotePrefix) ReadRangeFunc(ctx context.Context, key string, b []byte, off, lo, hi int64, progress func(n int)) (int64, error) {
	e, c, err := p.endpoint(key)
	size := int64(-1)
	if err == nil {
		size, err = c.ReadWithin(ctx, e, b, off, lo, hi, progress)
	}
	if err != nil {
		return size, p.pathErr("read", key, err)
	}
	return size, nil
}

// RemoteMaxSlack is the most bytes ReadRangeWithin asks for beyond those
// it keeps.
const RemoteMaxSlack = remote.MaxSlack

// Save writes pieces as object key, atomically as SaveFile does (one PUT,
// or a multipart upload aborted on failure). Plain HTTP prefixes are
// read-only: errors.ErrUnsupported.
func (p *RemotePrefix) Save(ctx context.Context, key string, pieces []Piece) error {
	return p.save(ctx, key, pieces, remote.Condition{})
}

// SaveIf is Save on a condition (S3's conditional writes): with etag
// set, object key must still have that ETag (as GetWithETag gave it);
// with etag "", there must be no object key. Where the condition fails
// the object is left as it is and SaveIf fails with an error matching
// ErrObjectChanged: read the object again and retry, an optimistic
// read-modify-write that no other writer's update can slip through. A
// server that ignores the condition (an S3-compatible one from before
// conditional writes) writes regardless; AWS S3 and versitygw honour it.
func (p *RemotePrefix) SaveIf(ctx context.Context, key string, pieces []Piece, etag string) error {
	return p.save(ctx, key, pieces, remote.Condition{IfMatch: etag, IfAbsent: etag == ""})
}

func (p *RemotePrefix) save(ctx context.Context, key string, pieces []Piece, cond remote.Condition) error {
	e, c, err := p.writeEndpoint(key)
	if err == nil {
		err = uploadToEndpoint(ctx, e, c, pieces, cond)
	}
	if err != nil {
		return p.pathErr("write", key, err)
	}
	return nil
}

// writeEndpoint is endpoint for a write or a delete: plain HTTP prefixes
// are read-only.
func (p *RemotePrefix) writeEndpoint(key string) (*remote.Endpoint, *remote.Client, error) {
	if p.ep.Type == RemoteHTTP {
		return nil, nil, fmt.Errorf("%w: a plain HTTP prefix is read-only", errors.ErrUnsupported)
	}
	return p.endpoint(key)
}

// Delete removes object key; a missing object is not an error. Plain
// HTTP prefixes are read-only: errors.ErrUnsupported.
func (p *RemotePrefix) Delete(ctx context.Context, key string) error {
	e, c, err := p.writeEndpoint(key)
	if err == nil {
		err = c.DeleteObject(ctx, e)
	}
	if err != nil {
		return p.pathErr("delete", key, err)
	}
	return nil
}

// List returns the keys under the prefix that start with prefix, in S3's
// order (sorted by UTF-8 bytes), with ListObjectsV2, leaving out folder
// markers (zero-byte objects whose key ends in "/"). Plain HTTP has no
// listing: errors.ErrUnsupported. A listing of more than 65536 answers
// or 256 MiB of key names fails with ErrTooLarge (a server that answers
// "truncated" forever).
func (p *RemotePrefix) List(ctx context.Context, prefix string) ([]string, error) {
	if p.ep.Type == RemoteHTTP {
		return nil, p.pathErr("list", prefix, fmt.Errorf("%w: plain HTTP has no listing", errors.ErrUnsupported))
	}
	keys, err := p.client().List(ctx, p.ep, prefix)
	if err != nil {
		return nil, p.pathErr("list", prefix, err)
	}
	for i := range keys {
		keys[i] = prefix + keys[i]
	}
	return keys, nil
}
