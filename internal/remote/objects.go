package remote

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// GetObject reads a whole object of at most limit bytes with one GET and
// no HEAD first: into buf when it fits in cap(buf), else into a new slice.
// A body longer than limit fails with ErrTooLarge, without being read
// when its Content-Length says so; a body of unknown length is read as it
// arrives, its memory growing with the bytes received, never past limit.
// A body shorter than its Content-Length is retried, then ErrShortBody; a
// missing object is a *StatusError matching fs.ErrNotExist.
func (c *Client) GetObject(ctx context.Context, e *Endpoint, buf []byte, limit int64) ([]byte, error) {
	out, _, err := c.GetObjectTag(ctx, e, buf, limit)
	return out, err
}

// GetObjectTag is GetObject that also returns the object's ETag, the
// version a conditional write may then require ("" when the server
// names none).
func (c *Client) GetObjectTag(ctx context.Context, e *Endpoint, buf []byte, limit int64) ([]byte, string, error) {
	var out []byte
	var tag string
	err := c.do(ctx, e, http.MethodGet, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL.String(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := c.send(e, req, http.StatusOK)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := e.identity(resp); err != nil {
			return err
		}
		out, err = readWholeBody(resp, buf, limit)
		tag = resp.Header.Get("ETag")
		return err
	})
	return out, tag, err
}

// minGrow is the first allocation for a body of unknown length.
const minGrow = 32 << 10

// readWholeBody reads a response body of Content-Length bytes (or to its
// end when the length is unknown) into buf, or a new slice if it does not
// fit. A body of more than limit bytes is ErrTooLarge: a Content-Length
// over limit before anything is allocated, a body of unknown length once
// it passes limit, with its memory grown as bytes arrive.
func readWholeBody(resp *http.Response, buf []byte, limit int64) ([]byte, error) {
	limit = max(limit, 0)
	cl := resp.ContentLength
	if cl > limit {
		return nil, fmt.Errorf("%w: Content-Length %d, more than the %d bytes allowed", ErrTooLarge, cl, limit)
	}
	if cl < 0 {
		return readUnknown(resp.Body, buf[:0], limit)
	}
	p := buf[:0]
	if cl > int64(cap(buf)) {
		p = make([]byte, 0, cl)
	}
	p = p[:cl]
	if _, err := readExact(resp.Body, p, 0); err != nil {
		return nil, err
	}
	return p, nil
}

// readUnknown appends r's bytes to p until EOF and fails with
// ErrTooLarge once it holds more than limit bytes. Past p's capacity the
// bytes go to chunks of doubling size, joined once at the end: growing
// one buffer would copy all read so far at each doubling, and a body
// that never ends (a hostile server's) would hold the caller past its
// deadline for the last copy. The memory taken never passes about twice
// the bytes received, nor the chunks limit+1.
func readUnknown(r io.Reader, p []byte, limit int64) ([]byte, error) {
	var full [][]byte // the chunks filled before p
	var total int64   // their bytes
	for {
		if len(p) == cap(p) {
			if total+int64(len(p)) > limit {
				return nil, fmt.Errorf("%w: a body of more than %d bytes", ErrTooLarge, limit)
			}
			if len(p) > 0 {
				full, total = append(full, p), total+int64(len(p))
			}
			p = make([]byte, 0, min(max(total, minGrow), limit+1-total))
		}
		n, err := r.Read(p[len(p):cap(p)])
		p = p[:len(p)+n]
		if total+int64(len(p)) > limit {
			return nil, fmt.Errorf("%w: a body of more than %d bytes", ErrTooLarge, limit)
		}
		if err == io.EOF {
			return joinChunks(full, p, total), nil
		}
		if err != nil {
			return nil, retryable{fmt.Errorf("%w: after %d bytes of a body of unknown length: %w", ErrShortBody, total+int64(len(p)), err)}
		}
	}
}

// joinChunks returns the chunks of full (total bytes) followed by last,
// as one slice: last itself when full is empty.
func joinChunks(full [][]byte, last []byte, total int64) []byte {
	if len(full) == 0 {
		return last
	}
	out := make([]byte, 0, total+int64(len(last)))
	for _, c := range full {
		out = append(out, c...)
	}
	return append(out, last...)
}

// ReadAtSize fills p with the object's bytes at off and returns the
// object's size, from the response's Content-Range, so that no HEAD is
// needed. A negative off counts from the end: the request asks for the
// last -off bytes. A range that runs past the object's end fails with an
// error wrapping io.ErrUnexpectedEOF (the size is still returned when
// the server said it); a failed attempt is retried whole.
func (c *Client) ReadAtSize(ctx context.Context, e *Endpoint, p []byte, off int64) (int64, error) {
	if off < 0 && int64(len(p)) > -off {
		return 0, fmt.Errorf("remote: %d bytes from %d before the end", len(p), -off)
	}
	var size int64 = -1
	err := c.do(ctx, e, http.MethodGet, func(ctx context.Context) (err error) {
		size, err = c.readAtSizeOnce(ctx, e, p, off)
		return err
	})
	return size, err
}

func (c *Client) readAtSizeOnce(ctx context.Context, e *Endpoint, p []byte, off int64) (int64, error) {
	if len(p) == 0 && off >= 0 {
		return -1, nil
	}
	resp, first, last, total, err := c.getSized(ctx, e, off, len(p), nil)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	rng := resp.Request.Header.Get("Range")
	want, asked := int64(len(p)), int64(len(p))
	if off < 0 {
		off, asked = total+off, -off // where the asked-for suffix starts
	}
	if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable || off < 0 || off+want > total {
		return total, fmt.Errorf("remote: %s of a %d-byte object: %w", rng, total, io.ErrUnexpectedEOF)
	}
	if first != off || last-first+1 < want || (resp.StatusCode == http.StatusPartialContent && last-first+1 != asked) {
		return total, fmt.Errorf("%w: got bytes %d-%d for %s", ErrBadContentRange, first, last, rng)
	}
	_, err = readAnswer(resp.Body, p, off, last-first+1)
	return total, err
}

// getSized sends a ranged GET (get: n bytes at off, a suffix when off is
// negative; pin as get's) that a 206, 200 or 416 may answer, and returns the answer
// with the range it holds and the object's size (responseRange); the
// caller closes its body.
func (c *Client) getSized(ctx context.Context, e *Endpoint, off int64, n int, pin *Pin) (resp *http.Response, first, last, total int64, err error) {
	resp, err = c.get(ctx, e, off, n, pin, http.StatusPartialContent, http.StatusOK, http.StatusRequestedRangeNotSatisfiable)
	if err != nil {
		return nil, 0, 0, -1, err
	}
	if first, last, total, err = responseRange(resp); err != nil {
		resp.Body.Close()
		return nil, 0, 0, -1, fmt.Errorf("%w: %s for %s", ErrBadContentRange, err, resp.Request.Header.Get("Range"))
	}
	return resp, first, last, total, nil
}

// readAnswer fills p, the bytes at off, from the start of an answer's
// body, which holds n bytes (its range): all of them when that is p,
// and then the body must end there (readExact); else only its start
// (readStart), the rest dropped with the connection when the body is
// closed (a 200 holding the whole object, the first bytes of an
// asked-for suffix).
func readAnswer(body io.Reader, p []byte, off, n int64) (int, error) {
	if n == int64(len(p)) {
		return readExact(body, p, off)
	}
	return readStart(body, p, off)
}

// MaxSlack bounds the bytes ReadWithin asks for beyond those it keeps.
const MaxSlack = 1 << 20

// ReadWithin is ReadAtSize for p's bytes at off (off >= 0) asking for the
// wider range [lo, hi) that holds them, at most MaxSlack bytes more, and
// dropping the bytes around them: a caller that knows an object's size
// asks for all of it (lo 0, hi the size) where it wants all but a few
// bytes, which a server may send straight from its file where a part
// takes it a copy (versitygw: sendfile(2) for a whole object, a read
// and a write per buffer for a range). It returns the object's size; a
// range past the end fails as ReadAtSize's do.
//
// An attempt that failed after some of p's bytes came is resumed after
// them, from the same version of the object (If-Match with the ETag of
// the first answer; ErrObjectChanged where it was replaced meanwhile),
// so that p's bytes, once in, never change. progress, when not nil, is
// called in the calling goroutine with n, the count of p's bytes in
// (p[:n]), each time it grows: a caller can use them while the rest
// comes.
func (c *Client) ReadWithin(ctx context.Context, e *Endpoint, p []byte, off, lo, hi int64, progress func(n int)) (int64, error) {
	end := off + int64(len(p))
	if lo < 0 || lo > off || hi < end || hi-lo-int64(len(p)) > MaxSlack {
		return -1, fmt.Errorf("remote: range %d-%d does not hold the %d bytes at %d within %d more", lo, hi, len(p), off, MaxSlack)
	}
	var size int64 = -1
	r := withinRead{p: p, off: off, lo: lo, hi: hi, progress: progress}
	err := c.do(ctx, e, http.MethodGet, func(ctx context.Context) (err error) {
		size, err = c.readWithinOnce(ctx, e, &r)
		return err
	})
	return size, err
}

// withinRead is a ReadWithin across its attempts: done of p's bytes
// are in, of the version pin holds.
type withinRead struct {
	p           []byte
	off, lo, hi int64
	progress    func(n int)
	done        int
	pin         Pin
}

func (c *Client) readWithinOnce(ctx context.Context, e *Endpoint, r *withinRead) (int64, error) {
	if r.lo == r.hi {
		return -1, nil
	}
	from := r.lo
	if r.done > 0 {
		from = r.off + int64(r.done) // resumed: the rest of p, then the slack after it
	}
	resp, first, last, total, err := c.getSized(ctx, e, from, int(r.hi-from), &r.pin)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	rng := resp.Request.Header.Get("Range")
	if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable || r.hi > total {
		return total, fmt.Errorf("remote: %s of a %d-byte object: %w", rng, total, io.ErrUnexpectedEOF)
	}
	if first != from || last != r.hi-1 {
		return total, fmt.Errorf("%w: got bytes %d-%d for %s", ErrBadContentRange, first, last, rng)
	}
	if err := skip(resp.Body, r.off-from, from); err != nil {
		return total, err
	}
	if err := r.fill(resp.Body); err != nil {
		return total, err
	}
	end := r.off + int64(len(r.p))
	if err := skip(resp.Body, r.hi-end, end); err != nil {
		return total, err
	}
	return total, atEnd(resp.Body, r.hi)
}

// fill reads the rest of p from body: at once (readStart) without
// progress, else as the bytes come, reporting each read's.
func (r *withinRead) fill(body io.Reader) error {
	if r.progress == nil {
		n, err := readStart(body, r.p[r.done:], r.off+int64(r.done))
		r.done += n
		return err
	}
	for r.done < len(r.p) {
		n, err := body.Read(r.p[r.done:])
		if n > 0 {
			r.done += n
			r.progress(r.done)
		}
		switch {
		case err == io.EOF && r.done < len(r.p):
			err = io.ErrUnexpectedEOF
		case err == io.EOF:
			err = nil
		}
		if err != nil {
			return shortBody(int64(r.done), int64(len(r.p)), r.off, err)
		}
	}
	return nil
}

// skip drops the next n bytes of a body, those at off: a body that ends
// first gives a retryable ErrShortBody, as readStart's do.
func skip(body io.Reader, n, off int64) error {
	if m, err := io.CopyN(io.Discard, body, n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return shortBody(m, n, off, err)
	}
	return nil
}

// responseRange returns the range a 206, 200 or 416 response holds and
// the object's size: a 200 holds the whole object.
func responseRange(resp *http.Response) (first, last, total int64, err error) {
	cr := resp.Header.Get("Content-Range")
	switch resp.StatusCode {
	case http.StatusOK:
		if resp.ContentLength < 0 {
			return 0, 0, 0, fmt.Errorf("no Content-Length in a whole-object answer")
		}
		return 0, resp.ContentLength - 1, resp.ContentLength, nil
	case http.StatusRequestedRangeNotSatisfiable:
		s, ok := strings.CutPrefix(cr, "bytes */")
		if total, err = strconv.ParseInt(s, 10, 64); !ok || err != nil || total < 0 {
			return 0, 0, -1, nil // the size is unknown; the range is not there
		}
		return 0, -1, total, nil
	}
	first, last, total, err = parseContentRange(cr)
	if err == nil && total < 0 {
		err = fmt.Errorf("no object size in Content-Range %q", cr)
	}
	return first, last, total, err
}

// DeleteObject removes an object; a missing one is not an error.
func (c *Client) DeleteObject(ctx context.Context, e *Endpoint) error {
	_, err := c.request(ctx, e, http.MethodDelete, "", nil, 0, http.StatusNotFound)
	return err
}

// virtualHosted matches AWS host names that carry the bucket
// (bucket.s3.region.amazonaws.com); other S3 URLs are path-style
// (host/bucket/key).
var virtualHosted = regexp.MustCompile(`(?i)^.+\.s3([.-][^.]+)?\.amazonaws\.com$`)

// bucket returns the endpoint of e's bucket (the same signing, the
// bucket's root URL) and the object key of e.
func (e *Endpoint) bucket() (*Endpoint, string, error) {
	if e.root == nil || (e.Type != S3 && e.Type != S3Public) {
		return nil, "", fmt.Errorf("%w: no bucket in %s", ErrUnsupportedURL, e)
	}
	b := *e
	u := *e.root
	b.URL, b.key = &u, ""
	return &b, e.key, nil
}

// ListLimit bounds one ListObjectsV2 answer read into memory.
const listLimit = 16 << 20

// The bounds of one List over all its answers: a server that answers
// "truncated" with a fresh continuation token forever, listing nothing
// new or ever more keys, gets ErrTooLarge instead of a caller that loops
// and collects until its memory or its patience runs out. S3 lists up to
// 1000 keys an answer: 65536 answers hold 65M keys, more than the 256
// MiB that keeps (names and string headers) at 4 bytes a name.
var (
	listAnswersLimit  = 1 << 16
	listKeyBytesLimit = 256 << 20
)

// List returns the keys of the objects whose key starts with the key of
// e (an S3 endpoint naming a prefix) followed by sub, relative to that,
// in the order S3 lists them (UTF-8 binary). It follows continuation
// tokens. Folder markers are left out: zero-byte objects whose key ends
// in "/", which the AWS console's "Create folder" makes; any other key,
// valid as an object key or not, is kept.
func (c *Client) List(ctx context.Context, e *Endpoint, sub string) ([]string, error) {
	if e.Type != S3 && e.Type != S3Public {
		return nil, fmt.Errorf("%w: listing needs an S3 endpoint, not %v", ErrUnsupportedURL, e.Type)
	}
	b, prefix, err := e.bucket()
	if err != nil {
		return nil, err
	}
	prefix += sub
	var keys []string
	token, kept := "", 0
	for answers := 1; ; answers++ {
		if answers > listAnswersLimit {
			return nil, fmt.Errorf("%w: ListObjectsV2 %s: still truncated after %d answers", ErrTooLarge, b, listAnswersLimit)
		}
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		// SigV4 wants %20, not +, in the canonical query.
		rep, err := c.requestLimit(ctx, b, http.MethodGet, strings.ReplaceAll(q.Encode(), "+", "%20"), nil, 0, listLimit, nil)
		if err != nil {
			return nil, err
		}
		if rep.over {
			return nil, fmt.Errorf("%w: ListObjectsV2 %s: an answer of more than %d bytes", ErrTooLarge, b, listLimit)
		}
		data := rep.data
		var res struct {
			Contents []struct {
				Key  string `xml:"Key"`
				Size *int64 `xml:"Size"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		if err := xml.Unmarshal(data, &res); err != nil {
			return nil, fmt.Errorf("remote: ListObjectsV2 %s: %w", b, err)
		}
		for _, o := range res.Contents {
			if o.Size != nil && *o.Size == 0 && strings.HasSuffix(o.Key, "/") {
				continue // a folder marker
			}
			if k, ok := strings.CutPrefix(o.Key, prefix); ok {
				if kept += len(k) + 16; kept > listKeyBytesLimit { // the name and its string header
					return nil, fmt.Errorf("%w: ListObjectsV2 %s: more than %d bytes of key names", ErrTooLarge, b, listKeyBytesLimit)
				}
				keys = append(keys, k)
			}
		}
		if !res.IsTruncated {
			return keys, nil
		}
		if res.NextContinuationToken == "" || res.NextContinuationToken == token {
			return nil, fmt.Errorf("remote: ListObjectsV2 %s: truncated answer without a new continuation token", b)
		}
		token = res.NextContinuationToken
	}
}

// ReadHead fills p with the object's first bytes with one ranged GET and
// returns how many it holds (fewer than len(p) only for a shorter
// object) and the object's size, from the answer's Content-Range (or
// Content-Length, from a server that sends the whole object; or "*/0"
// in a 416, for an empty object). It stands for the HEAD that opening a
// handle would send: the answer's ETag pins the object's version as
// Size's does, and the first bytes (a file format's header) come with
// it. An answer that gives no size (a Content-Range ending in "/*", a
// 416 without one, a whole object without Content-Length) returns size
// -1 and no bytes: ask Size. Not for WebHDFS, whose reads carry no size.
func (c *Client) ReadHead(ctx context.Context, e *Endpoint, p []byte) (n int, size int64, err error) {
	if e.Type == WebHDFS || len(p) == 0 {
		return 0, -1, fmt.Errorf("remote: ReadHead needs a ranged GET of at least one byte (%v, %d bytes)", e.Type, len(p))
	}
	err = c.do(ctx, e, http.MethodGet, func(ctx context.Context) (err error) {
		n, size, err = c.readHeadOnce(ctx, e, p)
		return err
	})
	return n, size, err
}

func (c *Client) readHeadOnce(ctx context.Context, e *Endpoint, p []byte) (int, int64, error) {
	resp, err := c.get(ctx, e, 0, len(p), c.pin, http.StatusPartialContent, http.StatusOK, http.StatusRequestedRangeNotSatisfiable)
	if err != nil {
		return 0, -1, err
	}
	defer resp.Body.Close()
	first, last, total, err := responseRange(resp)
	if total < 0 || (resp.StatusCode == http.StatusOK && err != nil) {
		// No size in the answer ("*/…" or none in a 416, no
		// Content-Length in a 200): the caller asks Size.
		return 0, -1, nil
	}
	if err != nil {
		return 0, -1, fmt.Errorf("%w: %s for the first %d bytes", ErrBadContentRange, err, len(p))
	}
	want := min(int64(len(p)), total)
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if total != 0 { // bytes=0-… is satisfiable for any object of a byte or more
			return 0, -1, fmt.Errorf("%w: HTTP 416 for the first bytes of a %d-byte object", ErrBadContentRange, total)
		}
		return 0, 0, nil
	case first != 0 || last-first+1 < want || (resp.StatusCode == http.StatusPartialContent && last-first+1 > want):
		return 0, -1, fmt.Errorf("%w: got bytes %d-%d/%d for the first %d bytes", ErrBadContentRange, first, last, total, len(p))
	}
	if _, err := readAnswer(resp.Body, p[:want], 0, last-first+1); err != nil {
		return 0, -1, err
	}
	return int(want), total, nil
}
