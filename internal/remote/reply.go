package remote

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// errorDocLimit is how much of an error answer's body is read for its
// S3 error document.
const errorDocLimit = 16 << 10

// errorDoc returns "Code: Message" of the S3 error document (root
// element Error) in b, or false when b holds none. The rest of the
// document (RequestId, HostId, the string to sign) is not quoted; a
// document cut short gives what it holds.
func errorDoc(b []byte) (string, bool) {
	d := xml.NewDecoder(bytes.NewReader(b))
	if t, err := firstElement(d); err != nil || t.Name.Local != "Error" {
		return "", false
	}
	text := errorText(d)
	return text, text != ""
}

// errTextFirst is firstElement's error for text before any element.
var errTextFirst = errors.New("text before any element")

// firstElement reads d up to its first element, past a prolog, comments
// and whitespace.
func firstElement(d *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return xml.StartElement{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return t, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return xml.StartElement{}, errTextFirst
			}
		}
	}
}

// errorText reads the rest of an Error element from d, up to its end or
// d's, and returns "Code: Message", each folded onto one line.
func errorText(d *xml.Decoder) string {
	var code, msg strings.Builder
	var field *strings.Builder
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			field = nil
			if depth == 2 && t.Name.Local == "Code" {
				field = &code
			} else if depth == 2 && t.Name.Local == "Message" {
				field = &msg
			}
		case xml.EndElement:
			depth--
			field = nil
		case xml.CharData:
			if field != nil {
				field.Write(t)
			}
		}
	}
	var parts []string
	for _, s := range []string{code.String(), msg.String()} {
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// quote is what an error quotes of an answer's body: its S3 error
// document's code and message, else the body's start; redacted, at
// most about maxErrBody bytes.
func (e *Endpoint) quote(body []byte) string {
	if text, ok := errorDoc(body); ok {
		return e.snippet([]byte(text), maxErrBody)
	}
	return e.snippet(bytes.TrimSpace(body), maxErrBody)
}

// completeLimit bounds the body of an answer to CompleteMultipartUpload
// read before its first element: S3 sends whitespace while it joins the
// parts.
const completeLimit = 1 << 20

// checkComplete reads the body of a 2xx answer to CompleteMultipartUpload
// up to its first element: a CompleteMultipartUploadResult is success;
// an Error (S3 answers 200 and then an error when the join fails) is a
// retryable *StatusError, since S3 advises trying again; anything else,
// an empty body included, is ErrBadResponse, and a body that holds no
// element within completeLimit bytes ErrTooLarge.
func (e *Endpoint) checkComplete(body io.Reader) error {
	lr := &io.LimitedReader{R: body, N: completeLimit}
	d := xml.NewDecoder(lr)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: CompleteMultipartUpload %s: %s", ErrBadResponse, e, fmt.Sprintf(format, args...))
	}
	t, err := firstElement(d)
	var se *xml.SyntaxError
	switch {
	case err == nil:
	case lr.N <= 0:
		return fmt.Errorf("%w: CompleteMultipartUpload %s: no element in the first %d bytes of the answer", ErrTooLarge, e, completeLimit)
	case err == io.EOF:
		return bad("an answer without a document")
	case err == errTextFirst || errors.As(err, &se):
		return bad("not an XML document: %v", err)
	default:
		return retryable{err} // the connection broke
	}
	switch t.Name.Local {
	case "CompleteMultipartUploadResult":
		return nil
	case "Error":
		text := errorText(d) // a document cut short is still an error
		return retryable{&StatusError{Method: http.MethodPost, URL: e.String(), Code: http.StatusOK, Body: e.snippet([]byte(text), maxErrBody)}}
	}
	return bad("a <%s> document", e.snippet([]byte(t.Name.Local), 64))
}
