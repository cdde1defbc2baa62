package kvik

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// TestLogDisabledCostsNothing checks that a log site whose level is off
// allocates nothing, with logging off and with a logger that takes only
// warnings.
func TestLogDisabledCostsNothing(t *testing.T) {
	site := func() {
		if l := logAt(LevelDebug); l != nil {
			l.LogAttrs(context.Background(), LevelDebug, "kvik: test", slog.Int("n", 1))
		}
	}
	restore := SetLogger(slog.New(slog.DiscardHandler))
	defer restore()
	if logAt(LevelCritical) != nil {
		t.Fatal("a discarding logger counts as on")
	}
	if n := testing.AllocsPerRun(1000, site); n != 0 {
		t.Fatalf("logging off: %v allocations per disabled site", n)
	}
	SetLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: LevelWarn})))
	if logAt(LevelDebug) != nil || logAt(LevelWarn) == nil {
		t.Fatal("levels not honoured")
	}
	if n := testing.AllocsPerRun(1000, site); n != 0 {
		t.Fatalf("debug site under a warn logger: %v allocations", n)
	}
}

// BenchmarkLogDisabled times a log site whose level is off: logging off,
// and a logger that takes only warnings.
func BenchmarkLogDisabled(b *testing.B) {
	for _, c := range []struct {
		name string
		l    *slog.Logger
	}{
		{"off", slog.New(slog.DiscardHandler)},
		{"warn-logger", slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: LevelWarn}))},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer SetLogger(c.l)()
			b.ReportAllocs()
			for b.Loop() {
				if l := logAt(LevelDebug); l != nil {
					l.LogAttrs(context.Background(), LevelDebug, "kvik: bench", slog.Int("n", 1))
				}
			}
		})
	}
}
