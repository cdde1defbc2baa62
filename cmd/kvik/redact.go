package main

import (
	"io"

	"github.com/kvikgo/kvik"
)

// redacted returns a copy of e whose output streams mask secrets
// (kvik.RedactText): whatever a command prints, a password, a presigned
// signature or a token a server echoed never reaches the terminal.
func (e *env) redacted() *env {
	c := *e
	c.stdout, c.stderr = redactWriter{e.stdout}, redactWriter{e.stderr}
	return &c
}

// redactWriter writes each Write's bytes through kvik.RedactText. The
// command writes whole lines or documents, so no secret is split across
// two Writes.
type redactWriter struct{ w io.Writer }

func (r redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, kvik.RedactText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
