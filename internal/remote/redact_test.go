package remote

import (
	"errors"
	"net/url"
	"strconv"
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

// TestRedactText checks the patterns masked in free text, whatever
// endpoint they came from, and that ordinary text is left alone.
func TestRedactText(t *testing.T) {
	for in, want := range map[string]string{
		"GET http://me:pa55word@host/x failed":                                       "GET http://me:xxxxx@host/x failed",
		"https://h/o?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc123&x=1":           "https://h/o?X-Amz-Credential=xxxxx&X-Amz-Signature=xxxxx&x=1",
		"u?sv=1&sig=Zm9vYmFy%3D&se=2":                                                "u?sv=1&sig=xxxxx&se=2",
		"?AWSAccessKeyId=AKIA1&Signature=c2ln&Expires=1":                             "?AWSAccessKeyId=xxxxx&Signature=xxxxx&Expires=1",
		"<SessionToken>Fwo+/==</SessionToken><SecretAccessKey>k/K</SecretAccessKey>": "<SessionToken>xxxxx</SessionToken><SecretAccessKey>xxxxx</SecretAccessKey>",
		`{"SessionToken": "Fwo+/=="}`:                                                `{"SessionToken": "xxxxx"}`,
		"AWS_SESSION_TOKEN=Fwo+/== next":                                             "AWS_SESSION_TOKEN=xxxxx next",
		"x-amz-security-token:Fwo+/==\n":                                             "x-amz-security-token:xxxxx\n",
		"Authorization: AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=ff\n":          "Authorization: xxxxx\n",
		"<Code>SignatureDoesNotMatch</Code> no credentials or region; config=1":      "<Code>SignatureDoesNotMatch</Code> no credentials or region; config=1",
		"/data/a b/50%/file?.bin":                                                    "/data/a b/50%/file?.bin",
	} {
		if got := RedactText(in); got != want {
			t.Errorf("RedactText(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// TestSnippetStraddle puts each known secret at every offset around the
// cut: the snippet holds no byte of it at the cut, whether the secret
// is masked whole or left out, and stays about n bytes long.
func TestSnippetStraddle(t *testing.T) {
	cfg := S3Config{AccessKeyID: "AKIDSTRADDLE", SecretAccessKey: "SKEYqzj3/Kx9+wLmn0PqRsTuVw", SessionToken: "STOKFwoGZXIvYXdzEJr//////////wEaDH+abc/def==", Region: "r"}
	e, err := New(S3, "s3://bkt/key", cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 512
	for _, secret := range []string{cfg.SecretAccessKey, cfg.SessionToken} {
		for off := n - len(secret) - 2; off <= n+2; off++ {
			body := strings.Repeat(".", off) + secret + strings.Repeat("-", 600)
			b := []byte(body)[:min(len(body), int(e.snippetLimit(n)))]
			got := e.snippet(b, n)
			if strings.Contains(got, secret[:4]) {
				t.Fatalf("secret at %d: snippet ends %q", off, got[max(0, len(got)-40):])
			}
			if len(got) > n+len(Mask) {
				t.Fatalf("secret at %d: snippet of %d bytes", off, len(got))
			}
		}
	}
}

// TestKnownSecrets checks that the secrets of an endpoint are masked in
// text made far from it, and that many URLs with long query values do not
// push an S3 key out.
func TestKnownSecrets(t *testing.T) {
	const key, tok = "KNOWNsecretKEY/1234+abcd", "KNOWNsessionTOKEN=="
	if _, err := New(S3, "s3://bkt/k", S3Config{AccessKeyID: "AKIDKNOWN", SecretAccessKey: key, SessionToken: tok, Region: "r"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * maxKnown {
		if _, err := New(HTTP, "http://h/o?versionId=v"+strings.Repeat("0", 8)+strconv.Itoa(i), S3Config{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range []string{"echo " + key, "echo " + url.QueryEscape(key), tok + " tail"} {
		if out := RedactText(in); strings.Contains(out, "KNOWN") {
			t.Errorf("RedactText(%q) = %q", in, out)
		}
	}
}
