// Package remote reads and writes objects over HTTP: plain HTTP(S), S3
// (SigV4-signed, public or presigned) and WebHDFS, with ranged requests,
// KvikIO's retry policy and checks that every response holds exactly the
// bytes asked for.
package remote

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Type is the kind of endpoint, as KvikIO's RemoteEndpointType.
type Type int

// Endpoint types. Auto picks one from the URL.
const (
	Auto Type = iota
	S3
	S3Public
	S3Presigned
	WebHDFS
	HTTP
)

func (t Type) String() string {
	switch t {
	case Auto:
		return "auto"
	case S3:
		return "S3"
	case S3Public:
		return "S3 public"
	case S3Presigned:
		return "S3 presigned URL"
	case WebHDFS:
		return "WebHDFS"
	case HTTP:
		return "HTTP"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// S3Config holds what a signed S3 endpoint needs. Empty fields are taken
// from the AWS_* environment variables.
type S3Config struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	Region                                     string
	// EndpointURL replaces AWS's own endpoints (an S3-compatible server);
	// objects are then addressed path-style: EndpointURL/bucket/key.
	EndpointURL string
}

// FromEnv fills empty fields from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_DEFAULT_REGION (or AWS_REGION) and
// AWS_ENDPOINT_URL.
func (c S3Config) FromEnv(getenv func(string) string) S3Config {
	fill := func(v *string, names ...string) {
		for _, n := range names {
			if *v == "" {
				*v = getenv(n)
			}
		}
	}
	fill(&c.AccessKeyID, "AWS_ACCESS_KEY_ID")
	fill(&c.SecretAccessKey, "AWS_SECRET_ACCESS_KEY")
	fill(&c.SessionToken, "AWS_SESSION_TOKEN")
	fill(&c.Region, "AWS_DEFAULT_REGION", "AWS_REGION")
	fill(&c.EndpointURL, "AWS_ENDPOINT_URL")
	return c
}

func (c S3Config) hasCredentials() bool { return c.AccessKeyID != "" && c.SecretAccessKey != "" }

// Endpoint is one remote object.
type Endpoint struct {
	Type Type
	// URL is the object's http(s) URL; for WebHDFS without the query.
	URL *url.URL
	// user is WebHDFS's user.name, if the URL gave one.
	user string
	// S3 signing; nil for unsigned endpoints.
	creds  *aws.Credentials
	region string
	signer *v4.Signer
	// secrets are masked in the text of errors (see scrub).
	secrets []string
}

// String returns the URL as Redact prints it: no password, no query.
func (e *Endpoint) String() string {
	u := *e.URL
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}

// User returns WebHDFS's user.name: the URL's, or the default set with
// SetDefaultUser.
func (e *Endpoint) User() string { return e.user }

// SetDefaultUser sets WebHDFS's user.name when the URL gave none
// (KVIKIO_WEBHDFS_USERNAME, which KvikIO also ranks below the URL's).
func (e *Endpoint) SetDefaultUser(name string) {
	if e.Type == WebHDFS && e.user == "" {
		e.user = name
	}
}

var (
	s3Scheme   = regexp.MustCompile(`(?i)^s3://([^/]+)/(.+)$`)
	webhdfsURL = regexp.MustCompile(`(?i)^https?://[^/]+:\d+/webhdfs/v1/.+$`)
	// AWS's S3 URL forms: virtual-hosted and path-style, with and
	// without a region, and the legacy s3-<region> host names.
	awsS3URLs = []*regexp.Regexp{
		regexp.MustCompile(`(?i)^https?://[^/]+\.s3\.[^.]+\.amazonaws\.com/.+$`),
		regexp.MustCompile(`(?i)^https?://s3\.[^.]+\.amazonaws\.com/[^/]+/.+$`),
		regexp.MustCompile(`(?i)^https?://[^/]+\.s3\.amazonaws\.com/.+$`),
		regexp.MustCompile(`(?i)^https?://s3\.amazonaws\.com/[^/]+/.+$`),
		regexp.MustCompile(`(?i)^https?://[^/]+\.s3-[^.]+\.amazonaws\.com/.+$`),
		regexp.MustCompile(`(?i)^https?://s3-[^.]+\.amazonaws\.com/[^/]+/.+$`),
	}
)

func isAWSS3URL(raw string) bool {
	for _, re := range awsS3URLs {
		if re.MatchString(raw) {
			return true
		}
	}
	return false
}

func isPresigned(u *url.URL) bool {
	q := u.Query()
	return q.Get("X-Amz-Algorithm") != "" && q.Get("X-Amz-Signature") != ""
}

// Candidates returns the endpoint types whose URL form raw has, in the
// order KvikIO's auto-detection tries them: S3 then S3Public (s3:// or an
// AWS S3 URL), presigned S3, WebHDFS, and any other http(s) URL with a
// path.
func Candidates(raw string) []Type {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var types []Type
	switch {
	case strings.EqualFold(u.Scheme, "s3"):
		if s3Scheme.MatchString(raw) {
			types = append(types, S3, S3Public)
		}
	case isHTTP(u) && isPresigned(u):
		types = append(types, S3Presigned)
	case isHTTP(u) && isAWSS3URL(raw):
		types = append(types, S3, S3Public)
	case webhdfsURL.MatchString(raw):
		types = append(types, WebHDFS)
	}
	if isHTTP(u) && len(u.Path) > 1 {
		types = append(types, HTTP)
	}
	return types
}

func isHTTP(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https")
}

// Accepts reports whether an endpoint of type t can be built for raw when
// asked for explicitly: S3 types also take any http(s) object URL (an
// S3-compatible server's path-style URL, say).
func Accepts(t Type, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch t {
	case S3, S3Public:
		if strings.EqualFold(u.Scheme, "s3") {
			return s3Scheme.MatchString(raw)
		}
		return isHTTP(u) && len(u.Path) > 1 && !isPresigned(u)
	case S3Presigned:
		return isHTTP(u) && isPresigned(u)
	case WebHDFS:
		return webhdfsURL.MatchString(raw)
	case HTTP:
		return isHTTP(u) && len(u.Path) > 1
	}
	return false
}

// New builds an endpoint of type t (not Auto) for raw. cfg is used by S3
// (credentials, region, endpoint override) and S3Public (region and
// endpoint override for s3:// URLs).
func New(t Type, raw string, cfg S3Config) (*Endpoint, error) {
	if !Accepts(t, raw) {
		return nil, fmt.Errorf("%w: %q is not a %v URL", ErrUnsupportedURL, Redact(raw), t)
	}
	u, err := objectURL(raw, cfg)
	if err != nil {
		return nil, err
	}
	e := &Endpoint{Type: t, URL: u, secrets: secretsOf(raw, cfg)}
	switch t {
	case S3, S3Public:
		setS3Path(u)
	}
	switch t {
	case S3:
		if !cfg.hasCredentials() {
			return nil, fmt.Errorf("%w: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in Go also the kvik.WithS3Credentials option)", ErrNoCredentials)
		}
		if cfg.Region == "" {
			return nil, fmt.Errorf("%w: set AWS_DEFAULT_REGION (in Go also the kvik.WithS3Region option)", ErrNoCredentials)
		}
		e.creds = &aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey, SessionToken: cfg.SessionToken}
		e.region = cfg.Region
		// S3 wants the path escaped once, as sent.
		e.signer = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	case WebHDFS:
		q := u.Query()
		e.user = q.Get("user.name")
		u.RawQuery = ""
	}
	return e, nil
}

// objectURL turns s3://bucket/key into an http(s) URL: path-style under
// the endpoint override, else AWS's virtual-hosted form for the region.
func objectURL(raw string, cfg S3Config) (*url.URL, error) {
	m := s3Scheme.FindStringSubmatch(raw)
	if m == nil {
		return url.Parse(raw)
	}
	bucket, key := m[1], m[2]
	// Keys may come percent-encoded (KvikIO asks for %20 for spaces).
	if k, err := url.PathUnescape(key); err == nil {
		key = k
	}
	var base string
	switch {
	case cfg.EndpointURL != "":
		base = strings.TrimRight(cfg.EndpointURL, "/") + "/" + bucket
	case cfg.Region != "":
		base = "https://" + bucket + ".s3." + cfg.Region + ".amazonaws.com"
	default:
		return nil, fmt.Errorf("%w: s3:// URLs need a region (AWS_DEFAULT_REGION) or an endpoint URL (AWS_ENDPOINT_URL)", ErrNoCredentials)
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: bad S3 endpoint URL %q", ErrUnsupportedURL, Redact(cfg.EndpointURL))
	}
	u = u.JoinPath(strings.Split(key, "/")...)
	return u, nil
}

// setS3Path encodes the path as S3's SigV4 canonical form does: every
// byte but A-Z a-z 0-9 - _ . ~ and the separating slashes escaped, so the
// path sent is the path signed.
func setS3Path(u *url.URL) {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(u.Path); i++ {
		c := u.Path[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	u.RawPath = b.String()
}

// sign adds SigV4 headers to req for signed endpoints; the payload is
// not hashed (UNSIGNED-PAYLOAD), so bodies stream from our buffers.
func (e *Endpoint) sign(ctx context.Context, req *http.Request) error {
	if e.signer == nil {
		return nil
	}
	const unsigned = "UNSIGNED-PAYLOAD"
	req.Header.Set("X-Amz-Content-Sha256", unsigned)
	return e.signer.SignHTTP(ctx, *e.creds, req, unsigned, "s3", e.region, time.Now())
}

// rangeRequest builds a GET for n bytes at off.
func (e *Endpoint) rangeRequest(ctx context.Context, off int64, n int) (*http.Request, error) {
	u := *e.URL
	if e.Type == WebHDFS {
		// WebHDFS takes the range as query parameters and answers with a
		// redirect to a datanode, which the client follows.
		u.RawQuery = e.query("OPEN") + "&offset=" + strconv.FormatInt(off, 10) + "&length=" + strconv.Itoa(n)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if e.Type != WebHDFS {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+int64(n)-1))
	}
	return req, e.sign(ctx, req)
}

func (e *Endpoint) query(op string) string {
	q := ""
	if e.user != "" {
		q = "user.name=" + url.QueryEscape(e.user) + "&"
	}
	return q + "op=" + op
}

// IsS3 reports whether an endpoint forced to type t (Auto: detected)
// for raw is an S3 one: signed, public or presigned.
func IsS3(t Type, raw string) bool {
	if t == Auto {
		if c := Candidates(raw); len(c) > 0 {
			t = c[0]
		}
	}
	return t == S3 || t == S3Public || t == S3Presigned
}

// IsURL reports whether name starts with a scheme this package reaches
// (s3://, http://, https://); anything else is taken for a local path.
func IsURL(name string) bool {
	scheme, _, ok := strings.Cut(name, "://")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "s3", "http", "https":
		return true
	}
	return false
}
