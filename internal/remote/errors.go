package remote

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/kvikgo/kvik/internal/hostmem"
)

// Errors of remote transfers; the root package re-exports them.
var (
	// ErrShortBody reports a response body that ended, or whose
	// connection broke, before the bytes its Content-Range or
	// Content-Length announced.
	ErrShortBody = errors.New("remote: response body shorter than announced")
	// ErrBadContentRange reports a response that does not hold the bytes
	// asked for: a wrong or missing Content-Range, or a body longer than
	// the range.
	ErrBadContentRange = errors.New("remote: response does not match the requested range")
	// ErrTimeout reports a request attempt that ran past the HTTP timeout.
	ErrTimeout = errors.New("remote: request timed out")
	// ErrUnsupportedURL reports a URL no endpoint accepts.
	ErrUnsupportedURL = errors.New("remote: unsupported URL")
	// ErrCertificate reports a server certificate that is not trusted
	// (an unknown CA, a wrong host name, an expired certificate) or a CA
	// bundle that holds none.
	ErrCertificate = errors.New("remote: TLS certificate not trusted")
	// ErrNoCredentials reports an S3 endpoint without credentials or region.
	ErrNoCredentials = errors.New("remote: missing S3 credentials or region")
	// ErrInvalidKey reports an object key that could leave its prefix or
	// name a bucket's root: empty, with an empty, "." or ".." segment, or
	// a malformed %-escape in an s3:// URL. It is refused before any
	// request.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrRedirect reports a redirect that was not followed: from https to
	// http, or of a request carrying credentials to another origin. The
	// error is a *RedirectError.
	ErrRedirect = errors.New("remote: redirect refused")
	// ErrTooLarge reports a size from a server, a file or metadata beyond
	// its bound: a body longer than the caller expects or a configured
	// cap allows, or an allocation larger than the machine's memory. It
	// is not retried. It is hostmem's, whose bounds on allocations it
	// reports too.
	ErrTooLarge = hostmem.ErrTooLarge
	// ErrObjectChanged reports an object replaced while it was being
	// read: a ranged request after the first found another version (HTTP
	// 412 to its If-Match, or another ETag). It is not retried, so that
	// no read returns bytes of two versions. It also reports a
	// conditional write whose Condition failed.
	ErrObjectChanged = errors.New("remote: object changed during the read")
	// ErrBadResponse reports an answer with an expected status whose
	// body is not what the request asks for: a CompleteMultipartUpload
	// answered with an empty body, an HTML page or another document, a
	// CreateMultipartUpload without an upload id.
	ErrBadResponse = errors.New("remote: malformed response")
)

// StatusError is an HTTP response with an unexpected status code. A 404
// matches fs.ErrNotExist and a 401 or 403 fs.ErrPermission in errors.Is.
type StatusError struct {
	Method string
	URL    string // without query, so presigned signatures stay out of logs
	Code   int
	Body   string // the start of the response body, for S3 error codes
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("remote: %s %s: HTTP %d %s", e.Method, e.URL, e.Code, http.StatusText(e.Code))
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Is maps status codes onto the fs errors that callers test for.
func (e *StatusError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == http.StatusNotFound
	case fs.ErrPermission:
		return e.Code == http.StatusForbidden || e.Code == http.StatusUnauthorized
	}
	return false
}
