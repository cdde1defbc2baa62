package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
)

// TestLogRecordsRedacted logs secrets through kvik's logger in every
// place a record holds text: the message, string, error, group and
// other attributes, and attributes added with With; the application's
// handler must see none of them.
func TestLogRecordsRedacted(t *testing.T) {
	var buf bytes.Buffer
	defer kvik.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: kvik.LevelTrace})))()
	const pw, sig, tok = "pw9Secret77", "sigQ0123456789abcdef", "FwoGZXIvYXdzEJr+tokenTOK"
	t.Setenv("AWS_SESSION_TOKEN", tok)
	u := "https://me:" + pw + "@host/o?X-Amz-Signature=" + sig
	l := kvik.Logger().With(slog.String("with", u), slog.Group("g", slog.String("u", u)))
	l.LogAttrs(context.Background(), kvik.LevelWarn, "GET "+u+" failed: <SessionToken>"+tok+"</SessionToken>",
		slog.String("url", u), slog.Any("error", errors.New("echo "+tok)),
		slog.Any("list", []string{u}), slog.Group("req", slog.String("auth", "Authorization: Basic "+pw)))
	out := buf.String()
	if !strings.Contains(out, "failed") {
		t.Fatalf("no record: %q", out)
	}
	for _, s := range []string{pw, sig, tok, tok[:8]} {
		if strings.Contains(out, s) {
			t.Errorf("%q in log output %s", s, out)
		}
	}
}
