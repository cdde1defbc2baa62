package main

import (
	"strings"
	"testing"
	"time"
)

// TestWaitSlot checks that --start-at/--slot start run k at its time,
// never before, and refuse a run whose time has passed.
func TestWaitSlot(t *testing.T) {
	o := &benchOptions{startAt: time.Now().Add(30 * time.Millisecond), slot: 20 * time.Millisecond}
	for k := range 3 {
		if err := o.waitSlot(k); err != nil {
			t.Fatalf("run %d: %v", k, err)
		}
		if at := o.startAt.Add(time.Duration(k) * o.slot); time.Now().Before(at) {
			t.Fatalf("run %d started before its slot at %v", k, at)
		}
	}
	late := &benchOptions{startAt: time.Now().Add(-50 * time.Millisecond), slot: 10 * time.Millisecond}
	if err := late.waitSlot(2); err == nil || !strings.Contains(err.Error(), "after its --start-at/--slot time") {
		t.Fatalf("a run 30 ms late: %v", err)
	}
	if err := (&benchOptions{}).waitSlot(5); err != nil {
		t.Fatalf("without --slot: %v", err)
	}
}
