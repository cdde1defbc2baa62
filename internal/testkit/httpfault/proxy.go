package httpfault

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Kind is a fault a Proxy injects into one request.
type Kind int

// Faults of a Proxy.
const (
	Pass      Kind = iota // forward unchanged
	ResetConn             // RST: before forwarding, or after (a GET's body half sent)
	Stall                 // hold the request until the client gives up (or StallFor)
	Status5xx             // answer 503 (or 500) without forwarding
	ShortBody             // a GET's answer cut in half, the connection closed cleanly
	Redirect              // 307 to the same URL, which the client may follow
	numKinds
)

func (k Kind) String() string {
	return [...]string{"pass", "reset", "stall", "5xx", "short", "redirect"}[k]
}

// Proxy forwards every request to a target server (the Host header kept,
// so that signatures still match) and injects a fault into a Rate share
// of them, of a kind drawn at random: resets, stalls, 5xx, short bodies,
// redirects. Counts says how many of each it injected.
type Proxy struct {
	*httptest.Server
	target    *url.URL
	transport *http.Transport
	// StallFor bounds a stall (the client normally gives up first).
	StallFor time.Duration
	// Trace, when set before requests come, sees every request with its
	// fault, the status the target answered (0: not forwarded, or no
	// answer) and when it was received and answered.
	Trace func(r *http.Request, k Kind, status int, start, end time.Time)

	mu     sync.Mutex
	rng    *rand.Rand
	rate   float64
	counts [numKinds]atomic.Int64
}

// NewProxy starts a proxy to target injecting faults into rate (0..1) of
// the requests, drawn from seed; it stops when the test ends.
func NewProxy(t testing.TB, target string, rate float64, seed uint64) *Proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: u, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rate: rate, StallFor: 10 * time.Second,
		transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	p.Server = httptest.NewServer(p)
	t.Cleanup(func() { p.Close(); p.transport.CloseIdleConnections() })
	return p
}

// SetRate changes the share of requests given a fault.
func (p *Proxy) SetRate(rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = rate
}

// Counts returns how many requests got each kind of fault, by name.
func (p *Proxy) Counts() map[string]int64 {
	m := map[string]int64{}
	for k := range numKinds {
		m[k.String()] = p.counts[k].Load()
	}
	return m
}

// CloseIdle drops the proxy's idle connections to the target.
func (p *Proxy) CloseIdle() { p.transport.CloseIdleConnections() }

func (p *Proxy) draw() (Kind, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := Pass
	if p.rng.Float64() < p.rate {
		k = Kind(1 + p.rng.IntN(int(numKinds)-1))
	}
	return k, p.rng.IntN(2) == 0
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, early := p.draw()
	p.counts[kind].Add(1)
	status := 0
	if p.Trace != nil {
		start := time.Now()
		defer func() { p.Trace(r, kind, status, start, time.Now()) }()
	}
	switch kind {
	case Stall:
		t := time.NewTimer(p.StallFor)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
		// Never forwarded: a server that comes back later and completes
		// an abandoned write would overwrite the writes after it (a real
		// hazard of retried writes, which the soak does not probe).
		reset(w)
		return
	case Status5xx:
		code := http.StatusServiceUnavailable
		if early {
			code = http.StatusInternalServerError
		}
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		http.Error(w, "<Error><Code>SlowDown</Code><Message>injected</Message></Error>", code)
		return
	case Redirect:
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		w.Header().Set("Location", r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	case ResetConn:
		if early {
			// Part of the request is read, nothing forwarded: the
			// server never sees it.
			io.CopyN(io.Discard, r.Body, max(r.ContentLength/2, 0))
			reset(w)
			return
		}
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	if kind == ResetConn || kind == ShortBody {
		if r.Method == http.MethodHead {
			reset(w) // a HEAD has no body to cut: its answer is lost
			return
		}
		p.cut(w, resp, kind == ResetConn)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// forward sends r to the target with its Host header and body.
func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	u := *p.target
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
	if err != nil {
		return nil, err
	}
	out.Host = r.Host
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = http.NoBody
	}
	for k, vs := range r.Header {
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
			continue
		}
		out.Header[k] = vs
	}
	// Redirects go back to the client, as the target sent them.
	c := &http.Client{Transport: p.transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c.Do(out)
}

// cut sends resp's status, headers and half its body over the raw
// connection, then resets it (rst) or closes it cleanly.
func (p *Proxy) cut(w http.ResponseWriter, resp *http.Response, rst bool) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	resp.Header.Del("Transfer-Encoding")
	resp.Header.Del("Connection")
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	resp.Header.Write(bw)
	bw.WriteString("\r\n")
	bw.Write(body[:len(body)/2])
	bw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		tc.SetLinger(0)
	}
}

// reset resets the request's connection without an answer.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
