package remote

import (
	"encoding/base64"
	"errors"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Mask replaces every secret that redaction removes.
const Mask = "xxxxx"

// Redact returns raw fit to print in an error or a log: the password of
// its userinfo masked (url.URL.Redacted), its query, which may hold a
// presigned signature or a token, cut to "?…", and its fragment dropped.
// A string without "://" (a local path) is returned as it is. Every URL
// this module prints goes through it.
func Redact(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	s, _, hasQuery := strings.Cut(raw, "?")
	s, _, _ = strings.Cut(s, "#")
	if u, err := url.Parse(s); err == nil {
		s = u.Redacted()
	} else {
		s = maskUserinfo(s)
	}
	if hasQuery {
		s += "?…"
	}
	return s
}

// maskUserinfo masks the userinfo of a URL that does not parse.
func maskUserinfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	host, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = Mask + host[i:]
	}
	if path != "" || strings.Contains(rest, "/") {
		return scheme + "://" + host + "/" + path
	}
	return scheme + "://" + host
}

// Patterns of secrets in free text: a URL's userinfo password, and the
// value after a name that signs or authorizes a request, whether a query
// parameter (X-Amz-Signature=…, sig=…), a header (x-amz-security-token:…,
// Authorization: …), an XML element (<SessionToken>…) or a JSON or
// environment entry ("SecretAccessKey": "…", AWS_SESSION_TOKEN=…).
var (
	userinfoRE = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s@"'<>?#]*?):([^/\s@"'<>?#]+)@`)
	namedRE    = regexp.MustCompile(`(?i)\b((?:x-amz-|x-goog-)?(?:signature|credential|security-token)|awsaccesskeyid|signatureprovided|sig|access_token|(?:aws_)?(?:secret_?access_?key|session_?token|security_?token))(\s*["']?\s*[:=>]\s*["']?\s*)([^\s"'<>&,;]+)`)
	authRE     = regexp.MustCompile(`(?i)\b(authorization)(\s*["']?\s*[:=]\s*["']?\s*)([^\r\n"'<]+)`)
)

// minSecret is the shortest query value taken for a secret: signatures,
// credentials and tokens are long, while short values ("OPEN", "0") are
// common words that masking would garble.
const minSecret = 8

// known holds the secrets of the endpoints built so far, so that text
// made far from the endpoint (a log record, a CLI line, an error wrapped
// by a caller) is masked too: keys (S3 keys, session tokens, passwords)
// and query values (presigned signatures, credentials, tokens) of
// minSecret bytes or more, the newest maxKnown of each, so that many URLs
// with long query values never push a key out.
var known struct {
	mu           sync.RWMutex
	keys, values []string
}

const maxKnown = 256

// remember adds secrets to list, which known.mu guards.
func remember(list *[]string, secrets []string) {
	known.mu.Lock()
	defer known.mu.Unlock()
next:
	for _, s := range secrets {
		if len(s) < minSecret {
			continue
		}
		for _, k := range *list {
			if k == s {
				continue next
			}
		}
		*list = append(*list, s)
	}
	if n := len(*list) - maxKnown; n > 0 {
		*list = append((*list)[:0:0], (*list)[n:]...)
	}
}

// secretEnv names the environment variables whose values are always
// masked: a hostile server may echo them.
var secretEnv = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"}

// allSecrets returns extra, the known secrets and those of the
// environment.
func allSecrets(extra []string) []string {
	known.mu.RLock()
	s := make([]string, 0, len(extra)+len(known.keys)+len(known.values)+2*len(secretEnv))
	s = append(s, extra...)
	s = append(s, known.keys...)
	s = append(s, known.values...)
	known.mu.RUnlock()
	for _, name := range secretEnv {
		if v := os.Getenv(name); len(v) >= minSecret {
			s = append(s, v, url.QueryEscape(v))
		}
	}
	return s
}

// RedactText returns s with every secret masked: userinfo passwords of
// the URLs in it, the values of signatures, credentials and tokens
// (presigned query parameters, S3 keys and session tokens in a server's
// body or a header), the secrets of every endpoint built so far and those
// of the AWS environment variables. It is the one redaction of the
// module: errors, log records and the CLI's lines go through it.
func RedactText(s string) string { return redactText(s, allSecrets(nil)) }

func redactText(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	s = userinfoRE.ReplaceAllString(s, "${1}${2}:"+Mask+"@")
	s = namedRE.ReplaceAllString(s, "${1}${2}"+Mask)
	s = authRE.ReplaceAllString(s, "${1}${2}"+Mask)
	return s
}

// Snippet returns the start of b, about n bytes, redacted: the cut is
// made after masking, so that no secret straddling it leaks its first
// bytes; a secret that starts before n is masked whole. b should hold at
// least SnippetLimit(n) bytes of the text when there are more.
func Snippet(b []byte, n int) string { return snippet(b, n, allSecrets(nil)) }

// SnippetLimit is how many bytes to read for a Snippet of n bytes: enough
// for the longest known secret starting before n to end inside them.
func SnippetLimit(n int) int64 { return snippetLimit(n, allSecrets(nil)) }

func snippetLimit(n int, secrets []string) int64 {
	l := 0
	for _, s := range secrets {
		l = max(l, len(s))
	}
	return int64(n + l + 256)
}

func snippet(b []byte, n int, secrets []string) string {
	s := string(b)
	cut := min(n, len(s))
	// Move the cut past any secret or pattern match that straddles it.
	for moved := true; moved && cut < len(s); {
		moved = false
		for _, v := range secrets {
			for i := 0; v != "" && i < cut; {
				j := strings.Index(s[i:], v)
				if j < 0 || i+j >= cut {
					break
				}
				if end := i + j + len(v); end > cut {
					cut, moved = end, true
				}
				i += j + 1
			}
		}
		for _, re := range []*regexp.Regexp{userinfoRE, namedRE, authRE} {
			for _, m := range re.FindAllStringIndex(s, -1) {
				if m[0] < cut && m[1] > cut {
					cut, moved = m[1], true
				}
			}
		}
	}
	s = s[:cut]
	for len(s) > 0 && !utf8.ValidString(s[max(0, len(s)-utf8.UTFMax):]) {
		s = s[:len(s)-1] // a rune cut in two
	}
	return redactText(s, secrets)
}

// RedactError returns err, or an error wrapping it whose text is
// RedactText's, when that differs; errors.Is and errors.As still see err.
func RedactError(err error) error { return redactError(err, allSecrets(nil)) }

func redactError(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := redactText(msg, secrets); clean != msg {
		return &redactedError{err: err, msg: clean}
	}
	return err
}

// secretsOf lists the strings of raw and cfg that must never be printed:
// userinfo passwords, long query values (signatures, credentials,
// tokens) and the S3 keys.
func secretsOf(raw string, cfg S3Config) []string {
	const minKey = 4 // shorter keys and passwords are not real ones
	var keys, values []string
	s := &keys
	add := func(v string, minLen int) {
		if len(v) >= minLen {
			*s = append(*s, v)
			if esc := url.QueryEscape(v); esc != v {
				*s = append(*s, esc)
			}
		}
	}
	for _, raw := range []string{raw, cfg.EndpointURL} {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if p, ok := u.User.Password(); ok && len(p) >= minKey {
			add(p, minKey)
			// The Authorization header net/http makes of the userinfo.
			add(base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+p)), minKey)
		}
		s = &values
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v, minSecret)
			}
		}
		s = &keys
	}
	add(cfg.AccessKeyID, minKey)
	add(cfg.SecretAccessKey, minKey)
	add(cfg.SessionToken, minKey)
	remember(&known.keys, keys)
	remember(&known.values, values)
	return append(keys, values...)
}

// scrub masks every secret of e, and every secret RedactText masks, in s.
func (e *Endpoint) scrub(s string) string {
	return redactText(s, allSecrets(e.secrets))
}

// snippet is Snippet with e's secrets too.
func (e *Endpoint) snippet(b []byte, n int) string {
	return snippet(b, n, allSecrets(e.secrets))
}

// snippetLimit is SnippetLimit with e's secrets too.
func (e *Endpoint) snippetLimit(n int) int64 {
	return snippetLimit(n, allSecrets(e.secrets))
}

// scrubErr returns err, or an error that wraps it with the secrets of e
// masked in its text (a transport error quotes the whole URL, query
// included).
func (e *Endpoint) scrubErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = e.String()
	}
	return redactError(err, allSecrets(e.secrets))
}

// redactedError is an error whose text had secrets masked; errors.Is and
// errors.As still see the error underneath.
type redactedError struct {
	err error
	msg string
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }
