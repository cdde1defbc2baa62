package kvik_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/zarr"
)

// processCounts returns the goroutines, open files and sockets of the
// process.
func processCounts() (goroutines, files, sockets int) {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			sockets++
		}
	}
	return runtime.NumGoroutine(), len(ents), sockets
}

// soakStats counts a soak's operations by kind: ok and failed.
type soakStats struct {
	mu sync.Mutex
	m  map[string][2]int
}

// keepGoing reports whether a worker doing ops should go on: before the
// deadline, or after it (up to hard) while one of its ops has not yet
// succeeded, so that a short soak on a slow machine still checks each.
func (s *soakStats) keepGoing(deadline, hard time.Time, ops ...string) bool {
	now := time.Now()
	if now.Before(deadline) {
		return true
	}
	if now.After(hard) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		if s.m[op][0] == 0 {
			return true
		}
	}
	return false
}

func (s *soakStats) add(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[op]
	if err != nil {
		c[1]++
	} else {
		c[0]++
	}
	s.m[op] = c
}

// TestRemoteSoak keeps concurrent remote reads, format loads, uploads
// (single PUTs and multipart), zarr writes and deletes going against
// versitygw through a proxy that injects resets, stalls, 5xx answers,
// short bodies and redirects into 8% of the requests, for KVIK_REMOTE_SOAK
// (a duration; 3 s by default, e.g. KVIK_REMOTE_SOAK=10m on demand).
// Every byte read with a nil error is checked against what was written;
// after every write, failed or not, the stored object is the old one (or
// none) or the new one, never torn, and the new one after a success.
// Goroutines, open files and sockets are logged before and after, and
// must come back to where they were; their peak stays bounded.
func TestRemoteSoak(t *testing.T) {
	dur := 3 * time.Second
	if s := os.Getenv("KVIK_REMOTE_SOAK"); s != "" {
		var err error
		if dur, err = time.ParseDuration(s); err != nil {
			t.Fatalf("KVIK_REMOTE_SOAK=%q: %v", s, err)
		}
	}
	v := s3test.Start(t)
	proxy := httpfault.NewProxy(t, v.URL, 0, 28)
	proxy.StallFor = 5 * time.Second
	var traceMu sync.Mutex
	var trace []string
	t0 := time.Now()
	proxy.Trace = func(r *http.Request, k httpfault.Kind, status int, start, end time.Time) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return
		}
		traceMu.Lock()
		defer traceMu.Unlock()
		trace = append(trace, fmt.Sprintf("%8.3f-%8.3f %s %s?%s %s -> %d", start.Sub(t0).Seconds(), end.Sub(t0).Seconds(), r.Method, r.URL.Path, r.URL.RawQuery, k, status))
	}
	t.Cleanup(kvik.SetRemoteBackoff(5 * time.Millisecond))
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
		// Attempts time out well after a loaded server answers: an
		// abandoned attempt that the server still completes could land
		// after a later write (versitygw: the last to finish wins).
		d.HTTPTimeout, d.HTTPMaxAttempts, d.TaskSize = 4*time.Second, 4, 256<<10
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
	faulty := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	rng := rand.New(rand.NewPCG(28, 5))
	ctx := context.Background()

	// Read-only objects: a plain one and an npy file, written straight
	// to the server's directory.
	plain := randomBytes(rng, 3<<20+rng.IntN(1<<20))
	plainURL := v.Put(t, "soak/plain.bin", plain)
	arr := randomBytes(rng, 2*(1<<19+rng.IntN(1<<18)))
	npyPath := t.TempDir() + "/a.npy"
	if err := npy.Save(context.Background(), npyPath, npy.SaveArray{Dtype: npy.Uint16, Shape: []int64{int64(len(arr) / 2)}, Data: arr}); err != nil {
		t.Fatal(err)
	}
	npyBytes, err := os.ReadFile(npyPath)
	if err != nil {
		t.Fatal(err)
	}
	npyURL := v.Put(t, "soak/a.npy", npyBytes)

	// Warm up (worker pools, the server) before the baseline counts.
	if h, err := kvik.OpenRemote(ctx, plainURL, faulty...); err != nil {
		t.Fatal(err)
	} else {
		h.ReadAt(make([]byte, 1<<20), 0)
		h.Close()
	}
	g0, f0, s0 := processCounts()
	t.Logf("before: %d goroutines, %d open files, %d sockets", g0, f0, s0)
	proxy.SetRate(0.08)

	stats := &soakStats{m: map[string][2]int{}}
	deadline := time.Now().Add(dur)
	hard := deadline.Add(2 * time.Minute)
	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		failed.Store(true)
		t.Errorf(format, args...)
	}
	opCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 60*time.Second) }

	// Peaks, sampled while the soak runs.
	var peakG, peakF, peakS atomic.Int64
	stop, monDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(monDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			g, f, s := processCounts()
			for _, p := range []struct {
				a *atomic.Int64
				v int
			}{{&peakG, g}, {&peakF, f}, {&peakS, s}} {
				if int64(p.v) > p.a.Load() {
					p.a.Store(int64(p.v))
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	// Readers: random ranges of the plain object, and npy loads.
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !failed.Load() && stats.keepGoing(deadline, hard, "open", "ranged read", "npy load") {
				if w == 2 {
					a, err := npy.LoadHost(ctx, npyURL, nil, faulty...)
					stats.add("npy load", err)
					if err == nil && !bytes.Equal(a.Data, arr) {
						fail("npy load through faults: wrong data")
					}
					continue
				}
				ctx, cancel := opCtx()
				h, err := kvik.OpenRemote(ctx, plainURL, faulty...)
				stats.add("open", err)
				if err == nil {
					for range 4 {
						off := rng.Int64N(int64(len(plain)))
						p := make([]byte, rng.IntN(len(plain)-int(off))+1)
						n, err := h.PRead(ctx, p, off).Get()
						stats.add("ranged read", err)
						if err == nil && (n != len(p) || !bytes.Equal(p, plain[off:off+int64(n)])) {
							fail("ranged read of %d bytes at %d through faults: %d bytes, wrong data", len(p), off, n)
						}
					}
					h.Close()
				}
				cancel()
			}
		})
	}

	// Uploaders, each owning its keys: saves (PUT and multipart) and
	// deletes, each followed by a look at the stored object.
	prefix, err := kvik.NewRemotePrefix(v.URLOf("soak/up"), faulty...)
	if err != nil {
		t.Fatal(err)
	}
	defer prefix.Close()
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			key := fmt.Sprintf("soak/up/w%d.bin", w)
			var cur []byte // nil: no object
			var history [][]byte
			for !failed.Load() && stats.keepGoing(deadline, hard, "upload", "multipart upload", "delete") {
				ctx, cancel := opCtx()
				old := cur
				var next []byte
				var err error
				op := "upload"
				if rng.IntN(5) == 0 {
					op = "delete"
					err = prefix.Delete(ctx, fmt.Sprintf("w%d.bin", w))
				} else {
					n := 1 + rng.IntN(1<<20)
					if rng.IntN(3) == 0 {
						n = 5<<20 + rng.IntN(3<<20) // multipart
					}
					next = randomBytes(rng, n)
					err = kvik.SaveFile(ctx, v.URLOf(key), []kvik.Piece{{Data: next}}, faulty...)
					if op = "upload"; n > 5<<20 {
						op = "multipart upload"
					}
				}
				cancel()
				stats.add(op, err)
				got, ok := v.Object(key)
				if ok && !bytes.Equal(got, next) && !bytes.Equal(got, old) {
					for i, h := range history {
						if bytes.Equal(h, got) {
							t.Logf("%s of %s (%v): the object holds the version written %d writes before", op, key, err, len(history)-i)
						}
					}
				}
				if next != nil {
					history = append(history[max(len(history)-8, 0):], next)
				}
				switch {
				case op == "delete" && !ok:
					cur = nil
				case op == "delete" && err == nil:
					fail("delete of %s succeeded but the object is there", key)
				case op != "delete" && ok && bytes.Equal(got, next):
					cur = next
				case op != "delete" && err == nil:
					fail("%s of %s succeeded at %.3f but the object holds %d bytes (present %v, old %d bytes, equal %v)", op, key, time.Since(t0).Seconds(), len(got), ok, len(old), bytes.Equal(got, old))
					traceMu.Lock()
					for _, l := range trace[max(len(trace)-40, 0):] {
						if strings.Contains(l, key) {
							t.Log(l)
						}
					}
					traceMu.Unlock()
				case ok && old != nil && bytes.Equal(got, old):
				case !ok && old == nil:
				default:
					fail("failed %s of %s (%v) left %d bytes (present %v): neither the old object nor the new", op, key, err, len(got), ok)
				}
			}
		})
	}

	// A zarr writer: whole chunks of a compressed array, each checked
	// afterwards through a store that bypasses the proxy.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(9, 3))
		const chunk, nchunks = 32 << 10, 12
		m := zarr.Metadata{Shape: []int{chunk * nchunks}, ChunkShape: []int{chunk}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 1},
			Codecs: []zarr.Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}}
		direct, err := zarr.OpenURL(ctx, v.URLOf("soak/z.zarr"), zarr.WithRemoteOptions(v.Opts()...))
		if err != nil {
			fail("zarr store: %v", err)
			return
		}
		defer direct.Close()
		if _, err := zarr.Create(ctx, direct, "a", m); err != nil {
			fail("zarr create: %v", err)
			return
		}
		check, err := zarr.Open(ctx, direct, "a")
		if err != nil {
			fail("zarr open: %v", err)
			return
		}
		model := make([][]byte, nchunks)
		for i := range model {
			model[i] = make([]byte, chunk) // fill value 0
		}
		for !failed.Load() && stats.keepGoing(deadline, hard, "zarr open", "zarr write") {
			ctx, cancel := opCtx()
			s, err := zarr.OpenURL(ctx, v.URLOf("soak/z.zarr"), zarr.WithRemoteOptions(faulty...))
			stats.add("zarr open", err)
			if err != nil {
				cancel()
				continue
			}
			a, err := zarr.Open(ctx, s, "a")
			if err == nil {
				first := rng.IntN(nchunks)
				n := 1 + rng.IntN(min(3, nchunks-first))
				data := randomBytes(rng, n*chunk)
				err = a.WriteRegion(ctx, []int{first * chunk}, []int{(first + n) * chunk}, data)
				stats.add("zarr write", err)
				for c := first; c < first+n; c++ {
					got := make([]byte, chunk)
					if rerr := check.ReadRegion(ctx, []int{c * chunk}, []int{(c + 1) * chunk}, got); rerr != nil {
						fail("zarr check read of chunk %d: %v", c, rerr)
						break
					}
					next := data[(c-first)*chunk : (c-first+1)*chunk]
					switch {
					case bytes.Equal(got, next):
						model[c] = next
					case err == nil:
						fail("zarr write succeeded but chunk %d holds other bytes", c)
					case !bytes.Equal(got, model[c]):
						fail("failed zarr write (%v) left chunk %d neither old nor new", err, c)
					}
				}
			}
			s.Close()
			cancel()
		}
	})

	wg.Wait()
	close(stop)
	<-monDone
	proxy.SetRate(0)
	prefix.Close()
	proxy.CloseIdle()
	t.Logf("faults injected: %v", proxy.Counts())
	stats.mu.Lock()
	for op, c := range stats.m {
		t.Logf("%-16s %5d ok %5d failed", op, c[0], c[1])
		if c[0] == 0 {
			t.Errorf("no %s succeeded in %v", op, dur)
		}
	}
	stats.mu.Unlock()

	// Idle connections close and goroutines end shortly after; wait for
	// the counts to settle.
	var g1, f1, s1 int
	for settle := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		runtime.GC()
		g1, f1, s1 = processCounts()
		if (g1 <= g0+8 && f1 <= f0+8 && s1 <= s0+8) || time.Now().After(settle) {
			break
		}
	}
	t.Logf("after: %d goroutines, %d open files, %d sockets (peak %d, %d, %d)", g1, f1, s1, peakG.Load(), peakF.Load(), peakS.Load())
	if g1 > g0+8 || f1 > f0+8 || s1 > s0+8 {
		t.Errorf("leak: %d goroutines, %d files, %d sockets after; %d, %d, %d before", g1, f1, s1, g0, f0, s0)
	}
	if p := peakS.Load(); p > int64(s0)+512 {
		t.Errorf("%d sockets open at the peak, %d before", p, s0)
	}
}
