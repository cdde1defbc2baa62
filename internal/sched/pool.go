package sched

import "sync"

// Pool runs submitted functions with at most Limit of them at once, in
// submission order. Workers exist only while there is work, so an idle Pool
// holds no goroutines. The limit can change at any time; queued work is
// never dropped. The zero value runs one function at a time.
type Pool struct {
	// Thread, if set, is called by each worker goroutine as it starts,
	// before its first function, and the function it returns (if not
	// nil) as the worker stops: workers that belong on some CPUs bind
	// their threads there (internal/staging's NUMA placement). Set it
	// before the first Submit.
	Thread func() (release func())

	mu      sync.Mutex
	limit   int
	running int
	queue   []func()
	head    int
}

// NewPool returns a pool that runs up to limit functions at once.
func NewPool(limit int) *Pool {
	p := &Pool{}
	p.SetLimit(limit)
	return p
}

// Limit returns the current concurrency limit.
func (p *Pool) Limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limitLocked()
}

func (p *Pool) limitLocked() int { return max(p.limit, 1) }

// SetLimit changes the concurrency limit. Raising it starts queued work at
// once; lowering it lets running functions finish and holds back the rest.
func (p *Pool) SetLimit(n int) {
	p.mu.Lock()
	p.limit = n
	p.startLocked()
	p.mu.Unlock()
}

// Submit queues f to run on a worker.
func (p *Pool) Submit(f func()) {
	p.mu.Lock()
	p.queue = append(p.queue, f)
	p.startLocked()
	p.mu.Unlock()
}

// Pending returns the number of queued functions not yet started.
func (p *Pool) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) - p.head
}

func (p *Pool) startLocked() {
	for p.running < p.limitLocked() {
		f := p.popLocked()
		if f == nil {
			return
		}
		p.running++
		go p.work(f)
	}
}

func (p *Pool) popLocked() func() {
	if p.head == len(p.queue) {
		return nil
	}
	f := p.queue[p.head]
	p.queue[p.head] = nil
	p.head++
	if p.head == len(p.queue) {
		p.queue, p.head = p.queue[:0], 0
	}
	return f
}

func (p *Pool) work(f func()) {
	if p.Thread != nil {
		if release := p.Thread(); release != nil {
			defer release()
		}
	}
	for f != nil {
		f()
		p.mu.Lock()
		f = nil
		if p.running <= p.limitLocked() {
			f = p.popLocked()
		}
		if f == nil {
			p.running--
		}
		p.mu.Unlock()
	}
}
