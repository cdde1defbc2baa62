package main

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestEachKey checks that every key is copied once, and that the first
// failure is returned and stops the keys not yet started.
func TestEachKey(t *testing.T) {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("c/", i)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	if err := eachKey(keys, 4, func(k string) error {
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
	boom := errors.New("boom")
	var calls atomic.Int64
	err := eachKey(keys, 2, func(k string) error {
		calls.Add(1)
		if k == "c/3" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("%v, want the failure", err)
	}
	if c := calls.Load(); c > 10 {
		t.Fatalf("%d keys started; the failure at the fourth should stop the rest", c)
	}
}
