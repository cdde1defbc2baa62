package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestEachKey checks that every key is copied once, and that the first
// failure is returned, cancels the context of those in flight and stops
// the keys not yet started.
func TestEachKey(t *testing.T) {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("c/", i)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	if err := eachKey(context.Background(), keys, 4, func(_ context.Context, k string) error {
		mu.Lock()
		seen[k]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if seen[k] != 1 {
			t.Fatalf("%s copied %d times", k, seen[k])
		}
	}
	// The keys after the failing fourth wait for its failure to cancel
	// their context (which happens before its slot frees), so that the
	// loop cannot run through them all before the failure is seen.
	boom := errors.New("boom")
	var calls atomic.Int64
	err := eachKey(context.Background(), keys, 2, func(ctx context.Context, k string) error {
		calls.Add(1)
		switch i, _ := strconv.Atoi(strings.TrimPrefix(k, "c/")); {
		case i == 3:
			return boom
		case i > 3:
			<-ctx.Done()
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("%v, want the failure", err)
	}
	if c := calls.Load(); c > 8 {
		t.Fatalf("%d keys started; the failure at the fourth should stop the rest", c)
	}
}
