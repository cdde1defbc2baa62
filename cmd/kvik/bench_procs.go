package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procRef measures the reference that one process loading a model onto N
// GPUs is held against: N processes of kvik itself, one per GPU, each
// loading the share of the tensors that the balanced load puts on its
// GPU (--share K/N, the GPU chosen by CUDA_VISIBLE_DEVICES), their timed
// loads started together (--start-at/--slot), after one untimed load each
// (--warmup 1) in the time before the first slot.
type procRef struct {
	exe, kind, name string
	set             []int // the parent's ordinals, one process each
	repeats         int
	slot            time.Duration
	// margin is the time from starting the processes to their first
	// timed load: process start, the CUDA driver's, the warm-up load.
	margin time.Duration
	// visible is the parent's CUDA_VISIBLE_DEVICES, if set.
	visible    string
	hasVisible bool
	// runAll runs the commands at once and returns each one's standard
	// output, or its error with what it wrote to standard error.
	runAll func(ctx context.Context, cmds []childCmd) ([][]byte, []error)
}

// childCmd is one process of the reference: kvik's arguments and the
// variables added to the parent's environment.
type childCmd struct {
	gpu  int // the parent's ordinal
	args []string
	env  []string
}

// lateMarker is in the error of a load that could not start in its slot.
const lateMarker = "after its --start-at/--slot time"

// newProcRef returns the reference for the set of GPUs, its processes
// run from the executable of this process.
func newProcRef(kind, name string, set []int, repeats int, one stResult, settle time.Duration) (*procRef, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding kvik's executable for the process-per-GPU reference: %w", err)
	}
	v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	return &procRef{exe: exe, kind: kind, name: name, set: set, repeats: repeats,
		slot:    slotFor(one, settle),
		margin:  2*time.Second + time.Duration(len(set))*250*time.Millisecond + 2*time.Duration(one.Median*float64(time.Second)),
		visible: v, hasVisible: ok, runAll: runCommands(exe)}, nil
}

// visibleDevice returns the CUDA_VISIBLE_DEVICES of the process for the
// parent's ordinal d: d itself, or the d-th entry of the parent's list.
func (p *procRef) visibleDevice(d int) (string, error) {
	if !p.hasVisible {
		return strconv.Itoa(d), nil
	}
	entries := strings.Split(p.visible, ",")
	if d >= len(entries) || strings.TrimSpace(entries[d]) == "" {
		return "", fmt.Errorf("GPU %d is not in CUDA_VISIBLE_DEVICES=%q", d, p.visible)
	}
	return strings.TrimSpace(entries[d]), nil
}

// commands returns the processes' commands, their first timed loads at
// time at.
func (p *procRef) commands(at time.Time) ([]childCmd, error) {
	cmds := make([]childCmd, len(p.set))
	for k, d := range p.set {
		v, err := p.visibleDevice(d)
		if err != nil {
			return nil, err
		}
		cmds[k] = childCmd{gpu: d, env: []string{"CUDA_VISIBLE_DEVICES=" + v}, args: []string{
			"bench", "--" + p.kind, p.name, "--share", fmt.Sprintf("%d/%d", k, len(p.set)),
			"--repeats", strconv.Itoa(p.repeats), "--warmup", "1",
			"--start-at", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64), "--slot", p.slot.String(), "--json"}}
	}
	return cmds, nil
}

// measure runs the processes and returns their loads' sum, repetition by
// repetition. When a process could not start a load in its slot, it
// tries once more with twice the margin and slot.
func (p *procRef) measure(ctx context.Context) (*stResult, error) {
	for try := 0; ; try++ {
		r, err := p.once(ctx)
		if err == nil || try == 1 || !strings.Contains(err.Error(), lateMarker) {
			return r, err
		}
		p.margin, p.slot = 2*p.margin, 2*p.slot
	}
}

func (p *procRef) once(ctx context.Context) (*stResult, error) {
	cmds, err := p.commands(time.Now().Add(p.margin))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.margin+time.Duration(p.repeats+1)*p.slot+time.Minute)
	defer cancel()
	outs, errs := p.runAll(ctx, cmds)
	var shares []stResult
	for k, c := range cmds {
		if errs[k] != nil {
			return nil, fmt.Errorf("the process loading share %d/%d onto GPU %d: %w", k, len(cmds), c.gpu, errs[k])
		}
		r, err := p.parse(outs[k])
		if err != nil {
			return nil, fmt.Errorf("the process loading share %d/%d onto GPU %d: %w", k, len(cmds), c.gpu, err)
		}
		shares = append(shares, r)
	}
	return sumInStep(fmt.Sprintf("%d processes, each its share, in step", len(cmds)), shares), nil
}

// parse reads one process's kvik bench --json output: one row of
// p.repeats timed loads.
func (p *procRef) parse(out []byte) (stResult, error) {
	var rs []stResult
	if err := json.Unmarshal(out, &rs); err != nil {
		return stResult{}, fmt.Errorf("reading its --json output: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Seconds) != p.repeats || rs[0].Bytes <= 0 {
		return stResult{}, fmt.Errorf("its --json output has %d rows, want one of %s", len(rs), count(p.repeats, "load"))
	}
	for _, s := range rs[0].Seconds {
		if !(s > 0) {
			return stResult{}, fmt.Errorf("its --json output has a load of %v s", s)
		}
	}
	return rs[0], nil
}

// sumInStep is the row of loads run together, one from each of shares:
// repetition i moved every share's bytes at the sum of their rates. Its
// Seconds are what that rate takes for all the bytes.
func sumInStep(name string, shares []stResult) *stResult {
	var total int64
	for _, s := range shares {
		total += s.Bytes
	}
	r := &stResult{Name: name}
	for i := range shares[0].Seconds {
		rate := 0.0
		for _, s := range shares {
			rate += float64(s.Bytes) / s.Seconds[i]
		}
		r.Seconds = append(r.Seconds, float64(total)/rate)
		r.CloseSeconds = append(r.CloseSeconds, 0)
	}
	r.finish(total)
	return r
}

// runCommands returns a runAll that runs exe with each command's
// arguments and the parent's environment plus its variables.
func runCommands(exe string) func(context.Context, []childCmd) ([][]byte, []error) {
	return func(ctx context.Context, cmds []childCmd) ([][]byte, []error) {
		outs, errs := make([][]byte, len(cmds)), make([]error, len(cmds))
		var wg sync.WaitGroup
		for k, c := range cmds {
			cmd := exec.CommandContext(ctx, exe, c.args...)
			cmd.Env = append(os.Environ(), c.env...)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Start(); err != nil {
				errs[k] = err
				continue
			}
			wg.Go(func() {
				if err := cmd.Wait(); err != nil {
					errs[k] = childError(err, stderr.String())
				}
				outs[k] = out.Bytes()
			})
		}
		wg.Wait()
		return outs, errs
	}
}

// childError is a process's failure with the last line it wrote to
// standard error (kvik's one-line error).
func childError(err error, stderr string) error {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := strings.TrimPrefix(lines[len(lines)-1], "kvik: "); last != "" {
		return errors.New(last)
	}
	return err
}
