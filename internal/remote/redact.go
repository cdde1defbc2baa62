package remote

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
)

// Redact returns raw fit to print in an error or a log: the password of
// its userinfo masked (url.URL.Redacted), its query, which may hold a
// presigned signature or a token, cut to "?…", and its fragment dropped.
// Every URL this module prints goes through it.
func Redact(raw string) string {
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
		host = "xxxxx" + host[i:]
	}
	if path != "" || strings.Contains(rest, "/") {
		return scheme + "://" + host + "/" + path
	}
	return scheme + "://" + host
}

// minSecret is the shortest query value taken for a secret: signatures,
// credentials and tokens are long, while short values ("OPEN", "0") are
// common words that masking would garble.
const minSecret = 8

// secretsOf lists the strings of raw and cfg that must never be printed:
// userinfo passwords, long query values (signatures, credentials,
// tokens) and the S3 keys.
func secretsOf(raw string, cfg S3Config) []string {
	const minKey = 4 // shorter keys and passwords are not real ones
	var s []string
	add := func(v string, minLen int) {
		if len(v) >= minLen {
			s = append(s, v)
			if esc := url.QueryEscape(v); esc != v {
				s = append(s, esc)
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
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v, minSecret)
			}
		}
	}
	add(cfg.AccessKeyID, minKey)
	add(cfg.SecretAccessKey, minKey)
	add(cfg.SessionToken, minKey)
	return s
}

// scrub masks every secret of e in s.
func (e *Endpoint) scrub(s string) string {
	for _, v := range e.secrets {
		s = strings.ReplaceAll(s, v, "xxxxx")
	}
	return s
}

// scrubErr returns err, or an error that wraps it with the secrets of e
// masked in its text (a transport error quotes the whole URL, query
// included).
func (e *Endpoint) scrubErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = e.String()
	}
	msg := err.Error()
	if clean := e.scrub(msg); clean != msg {
		return &redactedError{err: err, msg: clean}
	}
	return err
}

// redactedError is an error whose text had secrets masked; errors.Is and
// errors.As still see the error underneath.
type redactedError struct {
	err error
	msg string
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }
