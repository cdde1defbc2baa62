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
	// For S3 and prefix endpoints it is built by keyURL from root and
	// key, and nowhere else.
	URL *url.URL
	// root is the URL keys are appended to: an S3 bucket's root (for
	// virtual-hosted AWS URLs the host's root), or a plain HTTP prefix;
	// nil for an endpoint made from a whole URL (plain HTTP, presigned,
	// WebHDFS), whose URL is sent as given.
	root *url.URL
	// key is the object's key below root, literal: a '%' is a '%'. A
	// prefix endpoint's key is empty or ends in "/".
	key string
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
	s3Prefix   = regexp.MustCompile(`(?i)^s3://([^/]+)(?:/(.*))?$`)
	bucketName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
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

// isS3Scheme reports an s3:// URL. Such URLs are not parsed as URLs: the
// text after the bucket is the key, percent-decoded once (s3Location).
func isS3Scheme(raw string) bool {
	return len(raw) >= 5 && strings.EqualFold(raw[:5], "s3://")
}

// Candidates returns the endpoint types whose URL form raw has, in the
// order KvikIO's auto-detection tries them: S3 then S3Public (s3:// or an
// AWS S3 URL), presigned S3, WebHDFS, and any other http(s) URL with a
// path.
func Candidates(raw string) []Type {
	if isS3Scheme(raw) {
		if s3Scheme.MatchString(raw) {
			return []Type{S3, S3Public}
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var types []Type
	switch {
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
	if isS3Scheme(raw) {
		return (t == S3 || t == S3Public) && s3Scheme.MatchString(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch t {
	case S3, S3Public:
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
// endpoint override for s3:// URLs). An S3 URL's key must pass CheckKey
// (ErrInvalidKey): no request ever goes to a bucket's root or to a
// cleaned-up path.
func New(t Type, raw string, cfg S3Config) (*Endpoint, error) {
	if !Accepts(t, raw) {
		if isS3Scheme(raw) {
			return nil, fmt.Errorf("%w: %q is not a %v URL (s3://bucket/key)", ErrUnsupportedURL, Redact(raw), t)
		}
		return nil, fmt.Errorf("%w: %q is not a %v URL", ErrUnsupportedURL, Redact(raw), t)
	}
	e := &Endpoint{Type: t, secrets: secretsOf(raw, cfg)}
	switch t {
	case S3, S3Public:
		root, key, err := s3Location(raw, cfg, false)
		if err != nil {
			return nil, err
		}
		if err := CheckKey(key); err != nil {
			return nil, err
		}
		e.root, e.key, e.URL = root, key, keyURL(root, key)
	default:
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnsupportedURL, err)
		}
		e.URL = u
	}
	return e, e.setup(cfg)
}

// setup adds what the endpoint's type needs besides its URL.
func (e *Endpoint) setup(cfg S3Config) error {
	switch e.Type {
	case S3:
		if !cfg.hasCredentials() {
			return fmt.Errorf("%w: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in Go also the kvik.WithS3Credentials option)", ErrNoCredentials)
		}
		if cfg.Region == "" {
			return fmt.Errorf("%w: set AWS_DEFAULT_REGION (in Go also the kvik.WithS3Region option)", ErrNoCredentials)
		}
		e.creds = &aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey, SessionToken: cfg.SessionToken}
		e.region = cfg.Region
		// The path is sent escaped once, as keyURL made it, and S3
		// signs the path as sent.
		e.signer = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	case WebHDFS:
		q := e.URL.Query()
		e.user = q.Get("user.name")
		e.URL.RawQuery = ""
	}
	return nil
}

// NewPrefix builds the endpoint of a prefix: the objects whose keys
// start with the path of raw, which Join names. t is S3, S3Public or HTTP
// (a read-only HTTP base URL). An S3 prefix's own key must be empty (the
// whole bucket) or pass CheckKey once its trailing "/" is dropped.
func NewPrefix(t Type, raw string, cfg S3Config) (*Endpoint, error) {
	e := &Endpoint{Type: t, secrets: secretsOf(raw, cfg)}
	switch t {
	case S3, S3Public:
		if !isS3Scheme(raw) && !Accepts(t, strings.TrimRight(raw, "/")+"/k") {
			return nil, fmt.Errorf("%w: %q is not a %v prefix", ErrUnsupportedURL, Redact(raw), t)
		}
		root, key, err := s3Location(raw, cfg, true)
		if err != nil {
			return nil, err
		}
		if key = strings.TrimRight(key, "/"); key != "" {
			if err := CheckKey(key); err != nil {
				return nil, err
			}
			key += "/"
		}
		e.root, e.key = root, key
	case HTTP:
		u, err := url.Parse(raw)
		if err != nil || !isHTTP(u) || u.Host == "" {
			return nil, fmt.Errorf("%w: %q is not an HTTP prefix", ErrUnsupportedURL, Redact(raw))
		}
		e.root = u
	default:
		return nil, fmt.Errorf("%w: a %v URL names one object, not a prefix", ErrUnsupportedURL, t)
	}
	e.URL = keyURL(e.root, e.key)
	return e, e.setup(cfg)
}

// Join returns the endpoint of the object key below the prefix e (made
// by NewPrefix). key is taken literally, never percent-decoded: it must
// pass CheckKey, so it cannot leave the prefix.
func (e *Endpoint) Join(key string) (*Endpoint, error) {
	if e.root == nil {
		return nil, fmt.Errorf("%w: %s is not a prefix", ErrUnsupportedURL, e)
	}
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	o := *e
	o.key = e.key + key
	o.URL = keyURL(e.root, o.key)
	return &o, nil
}

// Key returns the object key of an S3 or prefix endpoint.
func (e *Endpoint) Key() string { return e.key }

// CheckKey reports, as ErrInvalidKey, an object key that is empty, has
// an empty, "." or ".." segment (a leading, trailing or doubled "/"), or
// holds a NUL byte: such keys are ambiguous (servers and proxies clean or
// reject such paths) and could reach another object, a bucket's root or
// another bucket.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: %q holds a NUL byte", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q has an empty, \".\" or \"..\" segment", ErrInvalidKey, key)
		}
	}
	return nil
}

// s3Location returns the root URL of the bucket an S3 URL names and the
// object key in it. An s3://bucket/key URL is not parsed as a URL: the
// text after "bucket/" is percent-decoded exactly once (KvikIO asks for
// %20 for a space, so s3://b/a%2520b names the key "a%20b"; a malformed
// escape is ErrInvalidKey), and the bucket's root is path-style under
// cfg.EndpointURL, else AWS's virtual-hosted host for the region. An
// http(s) URL's path is decoded once by url.Parse; AWS's virtual-hosted
// hosts carry the bucket, other URLs are path-style (host/bucket/key).
// prefix allows an empty key.
func s3Location(raw string, cfg S3Config, prefix bool) (*url.URL, string, error) {
	if !isS3Scheme(raw) {
		u, err := url.Parse(raw)
		if err != nil || !isHTTP(u) || u.Host == "" {
			return nil, "", fmt.Errorf("%w: %q is not an S3 URL", ErrUnsupportedURL, Redact(raw))
		}
		root := *u
		root.RawQuery, root.Fragment, root.RawFragment, root.ForceQuery = "", "", "", false
		path := strings.TrimPrefix(u.Path, "/")
		if virtualHosted.MatchString(u.Hostname()) {
			root.Path, root.RawPath = "/", ""
			return &root, path, nil
		}
		bucket, key, _ := strings.Cut(path, "/")
		if !bucketName.MatchString(bucket) || bucket == "." || bucket == ".." {
			return nil, "", fmt.Errorf("%w: no bucket in %q", ErrUnsupportedURL, Redact(raw))
		}
		root.Path, root.RawPath = "/"+bucket, ""
		return &root, key, nil
	}
	bucket, key, err := s3Parts(raw, prefix)
	if err != nil {
		return nil, "", err
	}
	var base string
	switch {
	case cfg.EndpointURL != "":
		base = strings.TrimRight(cfg.EndpointURL, "/") + "/" + bucket
	case cfg.Region != "":
		base = "https://" + bucket + ".s3." + cfg.Region + ".amazonaws.com/"
	default:
		return nil, "", fmt.Errorf("%w: s3:// URLs need a region (AWS_DEFAULT_REGION) or an endpoint URL (AWS_ENDPOINT_URL)", ErrNoCredentials)
	}
	u, err := url.Parse(base)
	if err != nil || !isHTTP(u) || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, "", fmt.Errorf("%w: bad S3 endpoint URL %q", ErrUnsupportedURL, Redact(cfg.EndpointURL))
	}
	return u, key, nil
}

// s3Parts returns the bucket and the key of an s3://bucket/key URL: the
// text after "bucket/", percent-decoded exactly once (see s3Location).
// prefix allows an empty key.
func s3Parts(raw string, prefix bool) (bucket, key string, err error) {
	re := s3Scheme
	if prefix {
		re = s3Prefix
	}
	m := re.FindStringSubmatch(raw)
	if m == nil {
		return "", "", fmt.Errorf("%w: %q is not an s3://bucket/key URL", ErrUnsupportedURL, Redact(raw))
	}
	bucket = m[1]
	if !bucketName.MatchString(bucket) || bucket == "." || bucket == ".." {
		return "", "", fmt.Errorf("%w: bad bucket name in %q", ErrUnsupportedURL, Redact(raw))
	}
	if key, err = url.PathUnescape(m[2]); err != nil {
		return "", "", fmt.Errorf("%w: %q: %v", ErrInvalidKey, Redact(raw), err)
	}
	return bucket, key, nil
}

// ObjectPath returns the name of the object a URL gives, decoded as the
// requests name it: an s3:// URL's key (s3Parts), else the URL's path,
// decoded once by url.Parse, without its query. It may be empty.
func ObjectPath(raw string) (string, error) {
	if isS3Scheme(raw) {
		_, key, err := s3Parts(raw, true)
		return key, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrUnsupportedURL, Redact(raw), err)
	}
	return u.Path, nil
}

// keyURL is the one place a request URL is made from a root and an
// object key, for every operation (GET, HEAD, PUT, multipart, DELETE;
// LIST sends the key as a query parameter): the key is appended to the
// root's path with each byte escaped exactly once by EscapeKey, never
// decoded and never path-cleaned.
func keyURL(root *url.URL, key string) *url.URL {
	u := *root
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	u.Path = strings.TrimSuffix(root.Path, "/") + "/" + key
	u.RawPath = strings.TrimSuffix(root.EscapedPath(), "/") + "/" + EscapeKey(key)
	return &u
}

// EscapeKey escapes an object key as S3's SigV4 canonical URI does:
// every byte but A-Z a-z 0-9 - _ . ~ and the separating slashes becomes
// %XX, so the path sent is the path signed and any server decodes it
// back to exactly key.
func EscapeKey(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
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
	return b.String()
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

// rangeRequest builds a GET for n bytes at off, or for the last -off
// bytes when off is negative (not for WebHDFS, whose reads take an
// offset), in the identity encoding; send signs it.
func (e *Endpoint) rangeRequest(ctx context.Context, off int64, n int) (*http.Request, error) {
	u := *e.URL
	rng := fmt.Sprintf("bytes=%d-%d", off, off+int64(n)-1)
	switch {
	case off < 0 && e.Type == WebHDFS:
		return nil, fmt.Errorf("remote: WebHDFS reads take an offset, not the last %d bytes", -off)
	case off < 0:
		rng = "bytes=" + strconv.FormatInt(off, 10)
	case e.Type == WebHDFS:
		// WebHDFS takes the range as query parameters and answers with a
		// redirect to a datanode, which the client follows.
		u.RawQuery = e.query("OPEN") + "&offset=" + strconv.FormatInt(off, 10) + "&length=" + strconv.Itoa(n)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if e.Type != WebHDFS {
		req.Header.Set("Range", rng)
	}
	// The object's bytes, not a compressed form of them (get refuses
	// one).
	req.Header.Set("Accept-Encoding", "identity")
	return req, nil
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
