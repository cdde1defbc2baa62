package kvik

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
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
	base  string // ends in "/"
	typ   RemoteEndpointType
	s3    remote.S3Config
	opts  []RemoteOption // for SaveFile
	hc    *http.Client
	owned *http.Transport // closed by Close; nil with WithHTTPClient
	// maxGet bounds the objects Get reads.
	maxGet int64
}

// NewRemotePrefix returns the prefix url (a trailing "/" is implied). It
// sends no request. The endpoint type is WithEndpointType's (RemoteS3,
// RemoteS3Public or RemoteHTTP), or detected as OpenRemote does, except
// that a signed S3 prefix without credentials is public S3 from the
// start. Presigned URLs and WebHDFS name single objects, not prefixes.
func NewRemotePrefix(url string, opts ...RemoteOption) (*RemotePrefix, error) {
	o := remoteOptions{size: -1}
	for _, opt := range opts {
		opt(&o)
	}
	p := &RemotePrefix{base: strings.TrimRight(url, "/") + "/", s3: o.s3.FromEnv(os.Getenv), opts: opts, maxGet: o.maxDocument}
	if p.maxGet <= 0 {
		p.maxGet = DefaultMaxDocumentSize
	}
	if err := p.pickType(o.typ); err != nil {
		return nil, &fs.PathError{Op: "open", Path: RedactURL(url), Err: err}
	}
	d, err := GetDefaults()
	if err != nil {
		return nil, err
	}
	// Idle connections for several requests per worker: a format keeps
	// more GETs in flight than there are workers.
	if p.hc, p.owned, err = o.httpClient(4*d.NumThreads, p.typ != RemoteHTTP); err != nil {
		return nil, &fs.PathError{Op: "open", Path: RedactURL(url), Err: err}
	}
	return p, nil
}

func (p *RemotePrefix) pickType(t RemoteEndpointType) error {
	if strings.ContainsAny(p.base, "?#") {
		// Keys are appended to the path: a query (a presigned
		// signature) would end up in the middle.
		return fmt.Errorf("%w: %w: a prefix URL takes no query", ErrInvalidArgument, ErrUnsupportedURL)
	}
	probe := p.base + "k"
	types := []RemoteEndpointType{t}
	if t == RemoteAuto {
		types = remote.Candidates(probe)
	}
	for _, t := range types {
		switch t {
		case RemoteS3, RemoteS3Public, RemoteHTTP:
		default:
			continue
		}
		_, err := remote.New(t, probe, p.s3)
		if errors.Is(err, ErrNoCredentials) && t == RemoteS3 && len(types) > 1 {
			continue // public S3 next
		}
		if err != nil {
			return err
		}
		p.typ = t
		return nil
	}
	return fmt.Errorf("%w: %w: %q is not an S3 or HTTP prefix", ErrInvalidArgument, ErrUnsupportedURL, RedactURL(p.base))
}

// URL returns the URL of key.
func (p *RemotePrefix) URL(key string) string { return p.base + key }

// EndpointType returns the endpoint type in use.
func (p *RemotePrefix) EndpointType() RemoteEndpointType { return p.typ }

// Close closes idle connections.
func (p *RemotePrefix) Close() error {
	if p.owned != nil {
		p.owned.CloseIdleConnections()
	}
	return nil
}

// endpoint returns the endpoint of key and a client under the current
// settings.
func (p *RemotePrefix) endpoint(key string) (*remote.Endpoint, *remote.Client, error) {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	e, err := remote.New(p.typ, p.base+strings.Join(segs, "/"), p.s3)
	if err != nil {
		return nil, nil, err
	}
	return e, p.client(), nil
}

// client returns a client of the prefix's connection pool under the
// current settings.
func (p *RemotePrefix) client() *remote.Client {
	d, _ := GetDefaults()
	return &remote.Client{HTTP: p.hc, Policy: policyOf(d)}
}

func (p *RemotePrefix) pathErr(op, key string, err error) error {
	return &fs.PathError{Op: op, Path: RedactURL(p.URL(key)), Err: err}
}

// Get returns the whole object key, read with one GET: into buf when it
// fits in cap(buf), else into a new slice. An object longer than both
// cap(buf) and the prefix's document cap (WithMaxDocumentSize, default
// DefaultMaxDocumentSize) fails with an error matching ErrTooLarge, and
// no more memory than that cap is taken, whatever the server claims. A
// missing object fails with an error matching fs.ErrNotExist.
func (p *RemotePrefix) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	return p.GetMax(ctx, key, buf, max(int64(cap(buf)), p.maxGet))
}

// GetMax is Get for an object of at most limit bytes, the size the caller
// expects: a longer one fails with an error matching ErrTooLarge.
func (p *RemotePrefix) GetMax(ctx context.Context, key string, buf []byte, limit int64) ([]byte, error) {
	e, c, err := p.endpoint(key)
	if err == nil {
		buf, err = c.GetObject(ctx, e, buf, limit)
	}
	if err != nil {
		return nil, p.pathErr("read", key, err)
	}
	return buf, nil
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

// Save writes pieces as object key, atomically as SaveFile does (one PUT,
// or a multipart upload aborted on failure). Plain HTTP prefixes are
// read-only: errors.ErrUnsupported.
func (p *RemotePrefix) Save(ctx context.Context, key string, pieces []Piece) error {
	if err := p.writable(); err != nil {
		return p.pathErr("write", key, err)
	}
	return SaveFile(ctx, p.URL(key), pieces, append(p.opts[:len(p.opts):len(p.opts)], WithHTTPClient(p.hc))...)
}

func (p *RemotePrefix) writable() error {
	if p.typ == RemoteHTTP {
		return fmt.Errorf("%w: a plain HTTP prefix is read-only", errors.ErrUnsupported)
	}
	return nil
}

// Delete removes object key; a missing object is not an error. Plain
// HTTP prefixes are read-only: errors.ErrUnsupported.
func (p *RemotePrefix) Delete(ctx context.Context, key string) error {
	err := p.writable()
	var e *remote.Endpoint
	var c *remote.Client
	if err == nil {
		e, c, err = p.endpoint(key)
	}
	if err == nil {
		err = c.DeleteObject(ctx, e)
	}
	if err != nil {
		return p.pathErr("delete", key, err)
	}
	return nil
}

// List returns the keys under the prefix that start with prefix, in S3's
// order (sorted by UTF-8 bytes), with ListObjectsV2. Plain HTTP has no
// listing: errors.ErrUnsupported.
func (p *RemotePrefix) List(ctx context.Context, prefix string) ([]string, error) {
	if p.typ == RemoteHTTP {
		return nil, p.pathErr("list", prefix, fmt.Errorf("%w: plain HTTP has no listing", errors.ErrUnsupported))
	}
	// The prefix's own endpoint, built from the raw URL: a trailing "/"
	// or an empty key must survive.
	e, err := remote.New(p.typ, p.base+prefix+"k", p.s3)
	var keys []string
	if err == nil {
		u := *e.URL
		u.Path = strings.TrimSuffix(u.Path, "k")
		u.RawPath = ""
		e.URL = &u
		keys, err = p.client().List(ctx, e)
	}
	if err != nil {
		return nil, p.pathErr("list", prefix, err)
	}
	for i := range keys {
		keys[i] = prefix + keys[i]
	}
	return keys, nil
}
