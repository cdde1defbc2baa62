package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress draws a one-line progress bar on a terminal; when stderr is not
// a terminal it draws nothing. It is safe for concurrent use.
type progress struct {
	w     io.Writer
	on    bool
	label string
	total int64
	bytes bool // count bytes (show sizes and rate) rather than steps

	mu    sync.Mutex
	done  int64
	what  string
	start time.Time
	drawn time.Time
}

// newProgress starts a bar of total units; bytes selects byte units.
func newProgress(e *env, label string, total int64, bytes bool) *progress {
	return &progress{w: e.stderr, on: e.progress, label: label, total: total, bytes: bytes, start: time.Now()}
}

// add advances the bar by n units, with what describing the current step.
func (p *progress) add(n int64, what string) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	changed := what != p.what
	p.what = what
	if now := time.Now(); changed || now.Sub(p.drawn) >= 100*time.Millisecond || p.done >= p.total {
		p.drawn = now
		p.draw()
	}
}

// draw renders the bar; p.mu is held.
func (p *progress) draw() {
	const width = 24
	frac := 1.0
	if p.total > 0 {
		frac = min(float64(p.done)/float64(p.total), 1)
	}
	fill := int(frac * width)
	bar := strings.Repeat("#", fill) + strings.Repeat(".", width-fill)
	var count string
	if p.bytes {
		count = fmt.Sprintf("%s/%s  %.2f GB/s", formatSize(p.done), formatSize(p.total), gbps(p.done, time.Since(p.start).Seconds()))
	} else {
		count = fmt.Sprintf("%d/%d", p.done, p.total)
	}
	fmt.Fprintf(p.w, "\r\033[K%s [%s] %3.0f%%  %s  %s", p.label, bar, frac*100, count, p.what)
}

// finish erases the bar.
func (p *progress) finish() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprint(p.w, "\r\033[K")
}
