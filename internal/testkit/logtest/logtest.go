// Package logtest keeps the log records kvik writes (kvik.SetLogger),
// for tests to inspect. It is imported by tests only.
package logtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Capture is a slog.Handler that keeps every record of Level and above.
type Capture struct {
	Level slog.Level
	mu    sync.Mutex
	recs  []Record
}

// Record is a kept record: its level, message and attributes as text.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// Enabled reports whether l is at least c.Level.
func (c *Capture) Enabled(_ context.Context, l slog.Level) bool { return l >= c.Level }

// WithAttrs returns c: kvik's records carry their attributes themselves.
func (c *Capture) WithAttrs([]slog.Attr) slog.Handler { return c }

// WithGroup returns c.
func (c *Capture) WithGroup(string) slog.Handler { return c }

// Handle keeps r.
func (c *Capture) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, rec)
	return nil
}

// Find returns the records with message msg, in the order written.
func (c *Capture) Find(msg string) []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Record
	for _, r := range c.recs {
		if r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// Text renders every record, for checks that a string appears nowhere.
func (c *Capture) Text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range c.recs {
		fmt.Fprintf(&b, "%v %s %v\n", r.Level, r.Msg, r.Attrs)
	}
	return b.String()
}

// Reset drops the records kept so far.
func (c *Capture) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = nil
}
