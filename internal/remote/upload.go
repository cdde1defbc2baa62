package remote

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Body opens a fresh reader over a request body for each attempt.
type Body func() (io.Reader, error)

// S3 multipart limits.
const (
	MinPartSize = 5 << 20
	MaxParts    = 10000
)

// closeNotifier reports when the transport has finished with a request
// body, so that the memory behind it may be reused.
type closeNotifier struct {
	r    io.Reader
	once sync.Once
	done chan struct{}
}

func (c *closeNotifier) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *closeNotifier) Close() error {
	c.once.Do(func() {
		if cl, ok := c.r.(io.Closer); ok {
			cl.Close()
		}
		close(c.done)
	})
	return nil
}

// reply is what request keeps of a response.
type reply struct {
	status int
	hdr    http.Header
	data   []byte // the first replyKeep bytes of the body
	over   bool   // the body was longer than the bytes kept
}

// replyKeep is how much of a reply's body request keeps.
const replyKeep = 64 << 10

// request sends one S3 request with query q and body (nil for none) of
// size bytes, under the retry policy. A status other than 200, 204 or one
// of also is an error; the reply holds the first replyKeep bytes of the
// body.
func (c *Client) request(ctx context.Context, e *Endpoint, method, q string, body Body, size int64, also ...int) (reply, error) {
	return c.requestLimit(ctx, e, method, q, body, size, replyKeep, nil, also...)
}

// requestLimit is request keeping up to limit bytes of the body, with
// the headers hdr (nil for none) set on every attempt.
func (c *Client) requestLimit(ctx context.Context, e *Endpoint, method, q string, body Body, size, limit int64, hdr http.Header, also ...int) (reply, error) {
	keep := func(resp *http.Response) (reply, error) { return e.keepReply(method, resp, limit) }
	return c.exchange(ctx, e, method, q, body, size, hdr, keep, also...)
}

// exchange sends the request of requestLimit and makes the reply of an
// answer with an expected status with read, which may return a retryable
// error to try again.
func (c *Client) exchange(ctx context.Context, e *Endpoint, method, q string, body Body, size int64, hdr http.Header, read func(*http.Response) (reply, error), also ...int) (reply, error) {
	var rep reply
	err := c.do(ctx, e, method, func(ctx context.Context) error {
		u := *e.URL
		u.RawQuery = q
		var rc *closeNotifier
		var rbody io.Reader
		if body != nil {
			r, err := body()
			if err != nil {
				return err
			}
			rc = &closeNotifier{r: r, done: make(chan struct{})}
			rbody = rc
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), rbody)
		if err != nil {
			return err
		}
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := c.send(e, req, append([]int{http.StatusOK, http.StatusNoContent}, also...)...)
		if rc != nil && size > 0 {
			<-rc.done // the transport closes the body once it is done with it
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		rep, err = read(resp)
		return err
	})
	return rep, err
}

// keepReply reads the first limit bytes of the body of resp, an answer
// to method, into its reply. An error document in a 2xx answer is an
// error.
func (e *Endpoint) keepReply(method string, resp *http.Response, limit int64) (reply, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return reply{}, retryable{err}
	}
	over := int64(len(data)) > limit
	if over {
		data = data[:limit]
	}
	if text, ok := errorDoc(data); ok && resp.StatusCode < 300 {
		return reply{}, &StatusError{Method: method, URL: e.String(), Code: resp.StatusCode, Body: e.snippet([]byte(text), maxErrBody)}
	}
	return reply{status: resp.StatusCode, hdr: resp.Header, data: data, over: over}, nil
}

// PutObject writes a whole object in one request. With sum not nil the
// request carries *sum, the body's CRC-32C, in x-amz-checksum-crc32c,
// which the server checks against what it received: a body cut short
// (an attempt abandoned mid-way, which some servers store as it is, and
// which may land after the retry that replaced it) is refused instead
// of becoming the object.
func (c *Client) PutObject(ctx context.Context, e *Endpoint, size int64, body Body, sum *uint32, cond Condition) error {
	hdr := cond.header()
	if sum != nil {
		hdr.Set("X-Amz-Checksum-Crc32c", base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, *sum)))
	}
	_, err := c.requestLimit(ctx, e, http.MethodPut, "", body, size, replyKeep, hdr)
	return cond.failed(err)
}

// Condition is what a conditional write (S3's If-Match and
// If-None-Match on PutObject and CompleteMultipartUpload) asks of the
// object it replaces: with IfMatch set, that it still have that ETag;
// with IfAbsent, that there be none. The zero Condition asks nothing.
type Condition struct {
	IfMatch  string
	IfAbsent bool
}

func (c Condition) header() http.Header {
	h := http.Header{}
	if c.IfMatch != "" {
		h.Set("If-Match", c.IfMatch)
	}
	if c.IfAbsent {
		h.Set("If-None-Match", "*")
	}
	return h
}

// failed turns the answers of a write whose condition did not hold into
// ErrObjectChanged: 412; 409, a conflicting write in flight (which S3
// asks the writer to retry); and, with IfMatch, 404 (the object deleted
// meanwhile, as versitygw answers). A retry of a write that succeeded
// unseen gets one of them too: its caller reads the object again.
func (c Condition) failed(err error) error {
	var se *StatusError
	if c == (Condition{}) || !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code == http.StatusPreconditionFailed, se.Code == http.StatusConflict,
		se.Code == http.StatusNotFound && c.IfMatch != "":
		return fmt.Errorf("%w: %w", ErrObjectChanged, se)
	}
	return err
}

// CreateMultipart starts a multipart upload and returns its id.
func (c *Client) CreateMultipart(ctx context.Context, e *Endpoint) (string, error) {
	rep, err := c.request(ctx, e, http.MethodPost, "uploads=", nil, 0)
	if err != nil {
		return "", err
	}
	var res struct {
		UploadID string `xml:"UploadId"`
	}
	if err := xml.Unmarshal(rep.data, &res); err != nil || res.UploadID == "" {
		return "", fmt.Errorf("%w: CreateMultipartUpload %s: no upload id in %q", ErrBadResponse, e, e.snippet(rep.data, 200))
	}
	return res.UploadID, nil
}

// UploadPart uploads part num (from 1) and returns its ETag.
func (c *Client) UploadPart(ctx context.Context, e *Endpoint, id string, num int, size int64, body Body) (string, error) {
	q := "partNumber=" + strconv.Itoa(num) + "&uploadId=" + url.QueryEscape(id)
	rep, err := c.request(ctx, e, http.MethodPut, q, body, size)
	if err != nil {
		return "", err
	}
	etag := rep.hdr.Get("ETag")
	if etag == "" {
		return "", fmt.Errorf("remote: UploadPart %d of %s: no ETag", num, e)
	}
	return etag, nil
}

// CompleteMultipart joins the parts, whose ETags are in part order. It
// succeeds only on a CompleteMultipartUploadResult (checkComplete): a
// 200 with an error document is tried again, as S3 advises, and any
// other answer fails with ErrBadResponse.
func (c *Client) CompleteMultipart(ctx context.Context, e *Endpoint, id string, etags []string, cond Condition) error {
	type part struct {
		PartNumber int
		ETag       string
	}
	doc := struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUpload"`
		Parts   []part   `xml:"Part"`
	}{}
	for i, t := range etags {
		doc.Parts = append(doc.Parts, part{i + 1, t})
	}
	body, err := xml.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = c.exchange(ctx, e, http.MethodPost, "uploadId="+url.QueryEscape(id),
		func() (io.Reader, error) { return bytes.NewReader(body), nil }, int64(len(body)), cond.header(),
		func(resp *http.Response) (reply, error) { return reply{}, e.checkComplete(resp.Body) })
	return cond.failed(err)
}

// AbortMultipart discards an upload and the parts it holds; an upload
// already gone (404 NoSuchUpload) is no error.
func (c *Client) AbortMultipart(ctx context.Context, e *Endpoint, id string) error {
	_, err := c.request(ctx, e, http.MethodDelete, "uploadId="+url.QueryEscape(id), nil, 0, http.StatusNotFound)
	return err
}

// UploadExists reports whether the multipart upload id is still known to
// the server (ListParts answers; 404 NoSuchUpload means it is gone).
func (c *Client) UploadExists(ctx context.Context, e *Endpoint, id string) (bool, error) {
	rep, err := c.request(ctx, e, http.MethodGet, "uploadId="+url.QueryEscape(id), nil, 0, http.StatusNotFound)
	return err == nil && rep.status != http.StatusNotFound, err
}

// AbortMultipartFully aborts the upload id and checks that it is gone,
// aborting again (up to tries times, with a short pause) when a part
// upload that was still in flight on the server brought it back: S3
// documents that parts being uploaded during an abort may still land.
func (c *Client) AbortMultipartFully(ctx context.Context, e *Endpoint, id string, tries int) error {
	for try := 1; ; try++ {
		if err := c.AbortMultipart(ctx, e, id); err != nil {
			return err
		}
		exists, err := c.UploadExists(ctx, e, id)
		if err != nil || !exists {
			return err
		}
		if try == tries {
			return fmt.Errorf("remote: upload %s still listed after %d aborts", id, tries)
		}
		select {
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PartSize returns the part size for an object of size bytes: want, raised
// to S3's minimum and so that no more than MaxParts are needed.
func PartSize(size int64, want int) int64 {
	p := max(int64(want), MinPartSize)
	if need := (size + MaxParts - 1) / MaxParts; need > p {
		p = need
	}
	return p
}

// maxErrBody is how much of a server's error body an error quotes.
const maxErrBody = 512
