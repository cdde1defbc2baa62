// Package redacttest is a hostile server for redaction tests: it echoes
// the secrets of the URLs and credentials it is given in its error
// bodies, one of them straddling the 512-byte cut errors quote, and
// checks that text holds none of them.
package redacttest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var timeZero time.Time // no Last-Modified

// Secrets are the values that must never be printed. Each starts with a
// tag of 6 bytes that appears nowhere else, so that Check also finds the
// first bytes of a secret cut in two.
type Secrets struct {
	Password   string // of http://user:Password@
	Signature  string // X-Amz-Signature of a presigned URL
	Credential string // X-Amz-Credential (the access key and scope)
	URLToken   string // X-Amz-Security-Token of a presigned URL
	Sig        string // sig= of a SAS-style URL
	SecretKey  string // AWS_SECRET_ACCESS_KEY
	Session    string // AWS_SESSION_TOKEN
}

// NewSecrets returns distinct secrets; the session token has the '+',
// '/' and '=' of a real one.
func NewSecrets() Secrets {
	return Secrets{
		Password:   "PWDtag" + "h7Ks2LqM9xQe",
		Signature:  "SIGtag" + "0f3a9c1b7e5d2a4c6b8e0f1a3c5e7d9b",
		Credential: "CRDtag" + "AKIAXK2/20260101/us-east-1/s3/aws4_request",
		URLToken:   "UTKtag" + "IQoJb3JpZ2luX2VjEJr+/Wq9AbCdEf==",
		Sig:        "SASsig" + "q0Zt3hJk8LmN4pRs",
		SecretKey:  "SKYtag" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE",
		Session:    "SESTAG" + "FwoGZXIvYXdzEJr//////////wEaDH+abc/def==",
	}
}

func (s Secrets) all() []string {
	return []string{s.Password, s.Signature, s.Credential, s.URLToken, s.Sig, s.SecretKey, s.Session}
}

// Env is the environment that makes s3:// URLs go to srv with the
// secret keys.
func (s Secrets) Env(srv *Server) []string {
	return []string{
		"AWS_ENDPOINT_URL=" + srv.URL, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIAREDACTTEST", "AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_SESSION_TOKEN=" + s.Session,
	}
}

// For returns the secrets the client knows of when it uses url: those
// of the environment and those url holds. A server may echo others, which
// no client can know to mask.
func (s Secrets) For(url string) Secrets {
	k := Secrets{SecretKey: s.SecretKey, Session: s.Session}
	if strings.Contains(url, s.Password) {
		k.Password = s.Password
	}
	if strings.Contains(url, s.Signature) {
		k.Signature, k.Credential, k.URLToken = s.Signature, s.Credential, s.URLToken
	}
	if strings.Contains(url, escape(s.Sig)) {
		k.Sig = s.Sig
	}
	return k
}

// Check fails t if out holds any of the secrets or the first 6 bytes of
// one.
func (s Secrets) Check(t testing.TB, label, out string) {
	t.Helper()
	for _, v := range s.all() {
		if v == "" {
			continue
		}
		if strings.Contains(out, v[:6]) {
			i := strings.Index(out, v[:6])
			t.Errorf("%s: secret %.6s… printed: …%s…", label, v, out[max(0, i-80):min(len(out), i+60)])
		}
	}
}

// Modes of the server, the first segment of a URL's path (an s3://
// URL's bucket): M403 and M500 answer every request with that status and
// a body that echoes every secret; MBad serves Junk, a file of no known
// format that holds the secrets; MIndex serves a safetensors index whose
// shard answers 403; MGood serves Good, a valid safetensors file, and
// takes uploads.
const (
	MGood  = "mgood"
	M403   = "m403"
	M500   = "m500"
	MBad   = "mbad"
	MIndex = "midx"
)

// Server is the hostile server.
type Server struct {
	*httptest.Server
	Secrets Secrets
	// Refused is a loopback address nothing listens on.
	Refused string
	n       atomic.Int64
}

// NewServer starts the server on loopback; t's cleanup closes it.
func NewServer(t testing.TB, s Secrets) *Server {
	srv := &Server{Secrets: s}
	srv.Server = httptest.NewServer(http.HandlerFunc(srv.serve))
	t.Cleanup(srv.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Refused = l.Addr().String()
	l.Close()
	return srv
}

// Body is an error body of the server: an S3 error document that
// echoes every secret, raw and in the elements S3 uses, with secret i
// (of all) starting 6 bytes before the 512th byte, where errors cut.
func (srv *Server) Body(i int) []byte {
	all := srv.Secrets.all()
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>")
	for b.Len() < 506 {
		b.WriteByte('.')
	}
	b.Truncate(506)
	b.WriteString(all[i%len(all)])
	b.WriteString(" echoed: " + strings.Join(all, " "))
	fmt.Fprintf(&b, "</Message><StringToSign>AWS4-HMAC-SHA256 x-amz-security-token:%s</StringToSign>", srv.Secrets.Session)
	fmt.Fprintf(&b, "<SessionToken>%s</SessionToken><SecretAccessKey>%s</SecretAccessKey>", srv.Secrets.Session, srv.Secrets.SecretKey)
	b.WriteString("<RequestId>1</RequestId></Error>")
	return b.Bytes()
}

// Good is a safetensors file of one F32 tensor "w" of 4 elements.
func Good() []byte {
	hdr := `{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	b := []byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}
	b = append(b, hdr...)
	return append(b, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40)
}

// Junk is what MBad serves: no safetensors, npy, gguf or zarr document,
// with the secrets inside.
func (srv *Server) Junk() []byte {
	var b bytes.Buffer
	b.Write([]byte{0x40, 0, 0, 0, 0, 0, 0, 0}) // a safetensors header length
	b.WriteString(`{"bad": "` + strings.Join(srv.Secrets.all(), `", "`))
	for b.Len() < 4096 {
		b.WriteString(" junk")
	}
	return b.Bytes()
}

func (srv *Server) serve(w http.ResponseWriter, r *http.Request) {
	mode, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	n := int(srv.n.Add(1))
	switch {
	case mode == MBad:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.WriteHeader(http.StatusOK) // uploads "succeed"
			return
		}
		http.ServeContent(w, r, "junk", timeZero, bytes.NewReader(srv.Junk()))
		return
	case mode == MGood:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.ServeContent(w, r, "good", timeZero, bytes.NewReader(Good()))
		return
	case mode == MIndex && strings.HasSuffix(rest, ".index.json"):
		http.ServeContent(w, r, "index.json", timeZero, strings.NewReader(`{"metadata": {}, "weight_map": {"w": "model-00001.safetensors"}}`))
		return
	}
	code := http.StatusForbidden
	if mode == M500 {
		code = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write(srv.Body(n))
	}
}

// URLs returns the secret-bearing URLs of path (without a leading
// slash) for each mode: with a password, presigned, SAS-style with sig=,
// and s3:// (for Env's credentials); and the same forms at the refused
// address.
func (srv *Server) URLs(path string) []string {
	s := srv.Secrets
	host := strings.TrimPrefix(srv.URL, "http://")
	var us []string
	for _, h := range []string{host, srv.Refused} {
		for _, m := range []string{M403, M500, MBad, MIndex, MGood} {
			if h == srv.Refused && m != M403 {
				break // refused whatever the mode
			}
			p := m + "/" + path
			us = append(us,
				"http://user:"+s.Password+"@"+h+"/"+p,
				"http://"+h+"/"+p+"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="+escape(s.Credential)+
					"&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token="+escape(s.URLToken)+
					"&X-Amz-Signature="+s.Signature,
				"http://"+h+"/"+p+"?sv=2024-01-01&sp=r&sig="+escape(s.Sig),
			)
			if h == host {
				us = append(us, "s3://"+p)
			}
		}
	}
	return us
}

// escape percent-encodes v for a query, as a presigned URL holds it.
func escape(v string) string {
	r := strings.NewReplacer("/", "%2F", "+", "%2B", "=", "%3D")
	return r.Replace(v)
}
