package kvik

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvikgo/kvik/internal/remote"
)

// SetRemoteBackoff shortens the first retry's backoff for tests.
func SetRemoteBackoff(d time.Duration) (restore func()) {
	old := remoteBaseDelay
	remoteBaseDelay = d
	return func() { remoteBaseDelay = old }
}

// SetRemoteVariant switches how remote reads receive bodies and returns a
// function that restores the previous choice, so that a benchmark can
// alternate variants in one process. A variant is one or more of these,
// joined by "+": "default" (the built-in choice), "direct" (bodies read
// straight into the destination), "stageS" (through reused buffers of S
// bytes, with an optional k or m suffix), "rcvbufS" (SO_RCVBUF of S),
// "rbufS" (the transport's ReadBufferSize), "taskS" (TaskSize),
// "threadsN" (NumThreads), "nowaves" (host tasks of TaskSize),
// "wavesN" (tasks larger than TaskSize, about N per worker), "procsN"
// (GOMAXPROCS). rcvbuf, rbuf and
// threads act on handles opened after the switch (they shape the
// transport).
func SetRemoteVariant(v string) (restore func(), err error) {
	oldBody := remote.CurrentTuning()
	oldProcs, oldWaves := runtime.GOMAXPROCS(0), tune.remoteWaves
	var undo []func()
	restore = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		remote.SetTuning(oldBody)
		runtime.GOMAXPROCS(oldProcs)
		tune.remoteWaves = oldWaves
	}
	for _, part := range strings.Split(v, "+") {
		u, err := setRemoteVariant(part)
		if err != nil {
			return restore, err
		}
		if u != nil {
			undo = append(undo, u)
		}
	}
	return restore, nil
}

func setRemoteVariant(v string) (undo func(), err error) {
	num := func(prefix string, parse func(string) (int, error)) (int, error) {
		n, err := parse(v[len(prefix):])
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("remote variant %q: want a positive number after %q", v, prefix)
		}
		return n, nil
	}
	defaults := func(prefix string, set func(d *Defaults, n int)) (func(), error) {
		n, err := num(prefix, parseSize)
		if err != nil {
			return nil, err
		}
		return UpdateDefaults(func(d *Defaults) { set(d, n) })
	}
	var n int
	switch {
	case v == "default":
	case v == "direct":
		t := remote.CurrentTuning()
		t.BodyStage = 0
		remote.SetTuning(t)
	case strings.HasPrefix(v, "stage"):
		t := remote.CurrentTuning()
		if t.BodyStage, err = num("stage", parseSize); err == nil {
			remote.SetTuning(t)
		}
	case strings.HasPrefix(v, "rcvbuf"):
		t := remote.CurrentTuning()
		if t.SocketReadBuffer, err = num("rcvbuf", parseSize); err == nil {
			remote.SetTuning(t)
		}
	case strings.HasPrefix(v, "rbuf"):
		t := remote.CurrentTuning()
		if t.ConnReadBuffer, err = num("rbuf", parseSize); err == nil {
			remote.SetTuning(t)
		}
	case strings.HasPrefix(v, "task"):
		return defaults("task", func(d *Defaults, n int) { d.TaskSize = n })
	case strings.HasPrefix(v, "threads"):
		return defaults("threads", func(d *Defaults, n int) { d.NumThreads = n })
	case v == "nowaves":
		tune.remoteWaves = 0
	case strings.HasPrefix(v, "waves"):
		tune.remoteWaves, err = num("waves", strconv.Atoi)
	case strings.HasPrefix(v, "procs"):
		if n, err = num("procs", strconv.Atoi); err == nil {
			runtime.GOMAXPROCS(n)
		}
	default:
		err = fmt.Errorf("unknown remote variant %q", v)
	}
	return nil, err
}
