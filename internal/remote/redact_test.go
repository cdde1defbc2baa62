package remote

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"http://user:PASSWORD@host/obj":                       "http://user:xxxxx@host/obj",
		"https://host/o?X-Amz-Signature=abc&X-Amz-Credential": "https://host/o?…",
		"http://user:p%40ss@host:9/a/b?x=1#frag":              "http://user:xxxxx@host:9/a/b?…",
		"s3://bucket/key":                                     "s3://bucket/key",
		"http://host/plain":                                   "http://host/plain",
		"http://u:PASSWORD@ho st/x":                           "http://xxxxx@ho st/x", // does not parse
		"":                                                    "",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestScrub checks that an endpoint masks every secret it knows of in
// error text: the password, long query values and S3 keys, and that
// errors.Is still sees the error underneath.
func TestScrub(t *testing.T) {
	raw := "https://bkt.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20260101&X-Amz-Signature=0123456789abcdef"
	e, err := New(S3Presigned, raw, S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	base := errors.New("boom")
	in := &url.Error{Op: "Get", URL: raw, Err: base}
	got := e.scrubErr(in)
	for _, secret := range []string{"0123456789abcdef", "AKIDEXAMPLE", "X-Amz-Signature"} {
		if strings.Contains(got.Error(), secret) {
			t.Errorf("%q left in %q", secret, got)
		}
	}
	if !errors.Is(got, base) {
		t.Errorf("scrubbed error lost its cause: %v", got)
	}
	s, err := New(S3, "s3://bkt/key", S3Config{AccessKeyID: "AKIDKEY", SecretAccessKey: "SECRETKEY", SessionToken: "SESSIONTOKEN", Region: "r"})
	if err != nil {
		t.Fatal(err)
	}
	body := "<Error><StringToSign>AKIDKEY SECRETKEY x-amz-security-token:SESSIONTOKEN</StringToSign></Error>"
	if out := s.scrub(body); strings.Contains(out, "SECRET") || strings.Contains(out, "SESSION") || strings.Contains(out, "AKIDKEY") {
		t.Errorf("scrub left a key: %q", out)
	}
	h, err := New(HTTP, "http://me:hunter22@host/f", S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	if h.String() != "http://me:xxxxx@host/f" || strings.Contains(h.scrub("auth hunter22 failed"), "hunter22") {
		t.Errorf("HTTP endpoint prints %q", h.String())
	}
}
