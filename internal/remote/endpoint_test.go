package remote

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
)

func TestCandidates(t *testing.T) {
	for raw, want := range map[string][]Type{
		"s3://bucket/key/x.bin":                                              {S3, S3Public},
		"s3://bucket/":                                                       nil,
		"https://bkt.s3.us-east-2.amazonaws.com/a/b":                         {S3, S3Public, HTTP},
		"https://s3.us-east-2.amazonaws.com/bkt/a":                           {S3, S3Public, HTTP},
		"http://bkt.s3.amazonaws.com/a":                                      {S3, S3Public, HTTP},
		"https://s3-eu-west-1.amazonaws.com/bkt/a":                           {S3, S3Public, HTTP},
		"https://bkt.s3.amazonaws.com/a?X-Amz-Algorithm=A&X-Amz-Signature=s": {S3Presigned, HTTP},
		"http://nn:9870/webhdfs/v1/user/x?user.name=me":                      {WebHDFS, HTTP},
		"http://nn/webhdfs/v1/user/x":                                        {HTTP}, // no port: not WebHDFS
		"http://example.com/file.bin":                                        {HTTP},
		"http://example.com/":                                                nil,
		"ftp://example.com/file":                                             nil,
	} {
		if got := Candidates(raw); !reflect.DeepEqual(got, want) {
			t.Errorf("Candidates(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestObjectURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		cfg  S3Config
		want string
	}{
		{"s3://b/k/x y", S3Config{Region: "eu-west-1"}, "https://b.s3.eu-west-1.amazonaws.com/k/x%20y"},
		{"s3://b/k%20z+1", S3Config{EndpointURL: "http://127.0.0.1:9000/", Region: "r"}, "http://127.0.0.1:9000/b/k%20z%2B1"},
		{"http://h:1/b/a=b", S3Config{}, "http://h:1/b/a%3Db"},
	} {
		e, err := New(S3Public, c.raw, c.cfg)
		if err != nil || e.URL.String() != c.want {
			t.Errorf("New(S3Public, %q) = %v, %v; want %s", c.raw, e, err, c.want)
		}
	}
	if _, err := New(S3, "s3://b/k", S3Config{Region: "r"}); err == nil {
		t.Error("S3 without credentials accepted")
	}
	if _, err := New(S3Public, "s3://b/k", S3Config{}); err == nil {
		t.Error("s3:// without region or endpoint accepted")
	}
}

func TestParseContentRange(t *testing.T) {
	for s, ok := range map[string]bool{
		"bytes 0-0/1": true, "bytes 5-9/*": true, "bytes 10-4/20": false, "bytes 0-9/5": false,
		"bytes -1-3/9": false, "0-3/9": false, "bytes 0-3": false, "bytes a-3/9": false,
	} {
		if _, _, _, err := parseContentRange(s); (err == nil) != ok {
			t.Errorf("parseContentRange(%q): %v", s, err)
		}
	}
}

func TestPartSize(t *testing.T) {
	if p := PartSize(1<<30, 1<<20); p != MinPartSize {
		t.Errorf("PartSize raised to the minimum: %d", p)
	}
	size := int64(MaxParts)*MinPartSize*3 + 7
	if p := PartSize(size, 0); (size+p-1)/p > MaxParts {
		t.Errorf("PartSize(%d) = %d needs more than %d parts", size, p, MaxParts)
	}
}

// TestKeyURL checks the one place request URLs are made: every S3 URL
// form, prefixes and their keys, each key byte escaped once as SigV4
// signs it, nothing decoded twice, nothing path-cleaned.
func TestKeyURL(t *testing.T) {
	ep := S3Config{EndpointURL: "http://127.0.0.1:9000/", Region: "r"}
	aws := S3Config{Region: "eu-west-1"}
	for _, c := range []struct {
		raw     string
		cfg     S3Config
		want    string // the request URL
		key     string // the object key
		wantErr error
	}{
		{"s3://b/dir/a%2520b.bin", ep, "http://127.0.0.1:9000/b/dir/a%2520b.bin", "dir/a%20b.bin", nil},
		{"s3://b/reports/50%25off.bin", ep, "http://127.0.0.1:9000/b/reports/50%25off.bin", "reports/50%off.bin", nil},
		{"s3://b/x%2f..%2fy", ep, "http://127.0.0.1:9000/b/x/../y", "", ErrInvalidKey},
		{"s3://b/x%252f..%252fy", ep, "http://127.0.0.1:9000/b/x%252f..%252fy", "x%2f..%2fy", nil},
		{"s3://b/tmp%zz", ep, "", "", ErrInvalidKey},
		{"s3://b/a//b", ep, "", "", ErrInvalidKey},
		{"s3://b/a/", ep, "", "", ErrInvalidKey},
		{"s3://b/./a", ep, "", "", ErrInvalidKey},
		{"s3://b/k?x#y", aws, "https://b.s3.eu-west-1.amazonaws.com/k%3Fx%23y", "k?x#y", nil},
		{"s3://evil.com?/k", aws, "", "", ErrUnsupportedURL},
		{"s3://u@evil.com/k", aws, "", "", ErrUnsupportedURL},
		{"s3://../k", ep, "", "", ErrUnsupportedURL},
		{"https://bkt.s3.us-east-2.amazonaws.com/a%2520b", S3Config{}, "https://bkt.s3.us-east-2.amazonaws.com/a%2520b", "a%20b", nil},
		{"https://s3.us-east-2.amazonaws.com/bkt/a%20b+c", S3Config{}, "https://s3.us-east-2.amazonaws.com/bkt/a%20b%2Bc", "a b+c", nil},
		{"http://h:1/bkt/a/../b", S3Config{}, "", "", ErrInvalidKey},
	} {
		e, err := New(S3Public, c.raw, c.cfg)
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("New(%q) = %v, %v; want %v", c.raw, e, err, c.wantErr)
			}
			continue
		}
		if err != nil || e.URL.String() != c.want || e.Key() != c.key {
			t.Errorf("New(%q) = %v (key %q), %v; want %s (key %q)", c.raw, e, e.Key(), err, c.want, c.key)
		}
	}

	p, err := NewPrefix(S3, "s3://b/pre%20fix/", S3Config{EndpointURL: "http://h:2", Region: "r", AccessKeyID: "AKID", SecretAccessKey: "SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"50%25":                    "http://h:2/b/pre%20fix/50%2525",
		"a%2f..%2f..%2fx":          "http://h:2/b/pre%20fix/a%252f..%252f..%252fx",
		"tmp%zz":                   "http://h:2/b/pre%20fix/tmp%25zz",
		"d/é ?#":                   "http://h:2/b/pre%20fix/d/%C3%A9%20%3F%23",
		"..":                       "",
		"a/../../x":                "",
		"":                         "",
		"a/":                       "",
		"a\x00b":                   "",
		"%2e%2e/literal-not-a-dir": "http://h:2/b/pre%20fix/%252e%252e/literal-not-a-dir",
	} {
		o, err := p.Join(key)
		if want == "" {
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Join(%q) = %v, %v; want ErrInvalidKey", key, o, err)
			}
			continue
		}
		if err != nil || o.URL.String() != want || o.Key() != "pre fix/"+key {
			t.Errorf("Join(%q) = %v, %v; want %s", key, o, err, want)
		}
	}
	b, k, err := p.bucket()
	if err != nil || b.URL.String() != "http://h:2/b" || k != "pre fix/" {
		t.Errorf("bucket() = %v, %q, %v", b, k, err)
	}
	h, err := NewPrefix(HTTP, "https://h/files%20x/", S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := h.Join("a%20b"); err != nil || o.URL.String() != "https://h/files%20x/a%2520b" {
		t.Errorf("HTTP Join = %v, %v", o, err)
	}
	if _, err := NewPrefix(S3Presigned, "https://h/x", S3Config{}); !errors.Is(err, ErrUnsupportedURL) {
		t.Errorf("presigned prefix: %v", err)
	}
}

// TestCheckRedirect checks the redirect policy on its own: no https ->
// http, no credentials to another origin, unsigned redirects followed.
func TestCheckRedirect(t *testing.T) {
	req := func(raw string, hdr ...string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	signed := []string{"Authorization", "AWS4-HMAC-SHA256 x"}
	token := []string{"X-Amz-Security-Token", "tok"}
	for _, c := range []struct {
		from   *http.Request
		to     string
		refuse bool
	}{
		{req("http://a:1/x", signed...), "http://a:1/y", false},
		{req("http://a/x", signed...), "http://a:80/y", false},
		{req("http://a:1/x", signed...), "http://a:2/x", true},
		{req("http://a:1/x", signed...), "http://b:1/x", true},
		{req("http://a:1/x", signed...), "https://a:1/x", true},
		{req("http://a:1/x", token...), "http://b:1/x", true},
		{req("http://u:p@a:1/x"), "http://b:1/x", true},
		{req("http://a:1/x"), "http://b:9/x", false},
		{req("https://a/x"), "http://a/x", true},
		{req("https://a/x"), "https://b/x", false},
	} {
		err := CheckRedirect(req(c.to), []*http.Request{c.from})
		if refused := errors.Is(err, ErrRedirect); refused != c.refuse {
			t.Errorf("%s -> %s: %v, refuse %v", c.from.URL, c.to, err, c.refuse)
		}
	}
	// https earlier in the chain counts too.
	via := []*http.Request{req("https://a/x"), req("https://b/x")}
	if err := CheckRedirect(req("http://c/x"), via); !errors.Is(err, ErrRedirect) {
		t.Errorf("https -> https -> http: %v", err)
	}
}

// TestObjectPath: the object name a URL gives is the key the requests
// use, decoded once: an s3:// key with its '?' and '#', an http(s)
// path without its query; a bad escape in an s3:// key is ErrInvalidKey.
func TestObjectPath(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		err       error
	}{
		{"s3://b/p/x%2541.bin", "p/x%41.bin", nil},
		{"S3://b/q?x=1#f.bin", "q?x=1#f.bin", nil},
		{"s3://b", "", nil},
		{"s3://b/%zz", "", ErrInvalidKey},
		{"s3:///k", "", ErrUnsupportedURL},
		{"https://h:9/bkt/a%20b.bin?X-Amz-Signature=s", "/bkt/a b.bin", nil},
		{"http://h/d/%2e%2e", "/d/..", nil},
	} {
		got, err := ObjectPath(c.raw)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ObjectPath(%q) = %q, %v; want %q, %v", c.raw, got, err, c.want, c.err)
		}
	}
}
