// Command kvik inspects, benchmarks and uses kvikgo's file I/O between
// storage and host or GPU memory.
//
// Usage:
//
//	kvik info [--json] [PATH]     what this machine offers for GPU file I/O
//	kvik bench [flags]            compare kvik's I/O paths with baselines and ceilings
//	kvik cp [flags] SRC DST       copy a file through GPU (or host) memory, verified
//	kvik version                  kvik's version, VCS revision and Go version
//	kvik help [COMMAND]           show help
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error, 130
// after an interrupt (SIGINT or SIGTERM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvikgo/kvik/cuda"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitInterrupted is what shells expect after Ctrl-C.
	exitInterrupted = 130
)

// command is one subcommand of kvik.
type command struct {
	name    string
	summary string
	// run executes the command with its arguments (after the name).
	run func(e *env, args []string) error
	// flags builds the command's flag set, for parsing and for help.
	flags func(e *env) *flag.FlagSet
	// stops: run returns soon after e.ctx is cancelled, having undone
	// what it started on a server (an upload's parts), so an interrupt
	// waits for it (handleInterrupt).
	stops bool
}

// env is what a command may touch: its output streams and terminal.
type env struct {
	// ctx is the command's context, cancelled by an interrupt.
	ctx            context.Context
	stdout, stderr io.Writer
	// progress is true when stderr is a terminal, so progress bars show.
	progress bool
	// verbose is true after -v: errors come with their detail.
	verbose bool
}

// commands lists kvik's subcommands in the order help shows them.
func commands() []*command {
	return []*command{
		{name: "info", summary: "show CUDA, cuFile, kvik settings and what a path supports", run: runInfo, flags: infoFlags},
		{name: "bench", summary: "benchmark kvik's I/O paths against baselines and hardware ceilings", run: runBench, flags: benchFlagSet},
		{name: "cp", summary: "copy a file through GPU (or host) memory and verify it", run: runCp, flags: cpFlags, stops: true},
		{name: "version", summary: "print kvik's version, VCS revision and Go version", run: runVersion, flags: versionFlags},
	}
}

func main() {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, progress: isTerminal(os.Stderr)}
	os.Exit(run(e, os.Args[1:]))
}

// run dispatches args to a command and returns the exit status.
func run(e *env, args []string) int {
	e = e.redacted()
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "kvik: no command (see kvik help)")
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(e, args[1:])
	case "-version", "--version":
		name = "version"
	}
	cmd := findCommand(name)
	if cmd == nil {
		fmt.Fprintf(e.stderr, "kvik: unknown command %q (see kvik help)\n", name)
		return exitUsage
	}
	ctx, interrupted := handleInterrupt(cmd.stops)
	e.ctx = ctx
	err := cmd.run(e, args[1:])
	sig := interrupted()
	runCleanups()
	if sig != nil {
		if err != nil {
			report(e, cmd.name, err) // what was cut short, and any failed cleanup
		}
		return exitInterrupted
	}
	return report(e, cmd.name, err)
}

// report prints err, if any, as one line and maps it to an exit status.
func report(e *env, name string, err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "kvik: %s: %s (see kvik %s -h)\n", name, oneLine(ue.msg), name)
		return exitUsage
	case errors.As(err, new(reportedError)):
		return exitFailure // the command's output shows it already
	}
	fmt.Fprintf(e.stderr, "kvik: %s: %s\n", name, dropInnerPrefix(shortenTried(oneLine(err.Error()))))
	var le *cuda.LoadError
	if e.verbose && errors.As(err, &le) {
		fmt.Fprintf(e.stderr, "kvik: %s: %+v\n", name, le) // -v: every path tried
	}
	return exitFailure
}

// reportedError is a failure that the command has shown in its output
// (kvik info's report): it sets the exit status without a second message.
type reportedError struct{ error }

// dropInnerPrefix removes the "kvik: " that the library's errors start
// with from a message that report prefixes with "kvik: NAME: " already:
// "open ftp://x/y: kvik: invalid argument" reads "open ftp://x/y: invalid
// argument".
func dropInnerPrefix(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "kvik: "), ": kvik: ", ": ")
}

// oneLine folds a message onto one line, its unprintable characters
// escaped (escapeUnprintable).
func oneLine(s string) string {
	return escapeUnprintable(strings.Join(strings.Fields(s), " "))
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// runHelp prints kvik's usage, or one command's with `kvik help CMD`.
func runHelp(e *env, args []string) int {
	if len(args) == 0 {
		printUsage(e.stdout)
		return exitOK
	}
	cmd := findCommand(args[0])
	if cmd == nil {
		fmt.Fprintf(e.stderr, "kvik: help: unknown command %q (see kvik help)\n", args[0])
		return exitUsage
	}
	fs := cmd.flags(e)
	fs.SetOutput(e.stdout)
	fs.Usage()
	return exitOK
}

// printUsage writes the overview of kvik's commands.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "kvik: fast file I/O between storage and host or GPU memory (kvikgo)")
	fmt.Fprintln(w, "\nUsage:\n  kvik COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help    show this help, or a command's: kvik help COMMAND")
	fmt.Fprintln(w, "\nRun 'kvik COMMAND -h' for a command's flags.")
	fmt.Fprintln(w, "Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted.")
	fmt.Fprintln(w, "KVIKIO_* environment variables set kvik's defaults (see kvik info).")
	fmt.Fprintln(w, "Every command takes -v (INFO; twice DEBUG, three times TRACE) and --log-level LEVEL.")
}

// usageError is a mistake in the command line; it exits with status 2.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// newFlagSet returns a flag set for command name whose help text shows
// usage line and description, then the flags.
func newFlagSet(e *env, name, usage, desc string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stdout) // only -h prints: errors go through report
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: kvik %s %s\n\n%s\n\nFlags:\n", name, usage, strings.TrimSpace(desc))
		fs.PrintDefaults()
	}
	addLogFlags(e, fs)
	return fs
}

// parseFlags parses args with fs, allowing flags after positional
// arguments (kvik cp SRC DST --memory host); "--" ends the flags. Parse
// errors become usageErrors; -h gives flag.ErrHelp after printing help.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	out := fs.Output()
	for {
		fs.SetOutput(io.Discard)
		err := fs.Parse(args)
		fs.SetOutput(out)
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return nil, err
		}
		if err != nil {
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// cleanups holds functions that undo a command's side effects on the
// system, such as temporary files; they run when the command ends or on an
// interrupt, while other goroutines may still run, so they must not free
// memory in use.
var cleanups struct {
	mu  sync.Mutex
	fns []func()
}

// atExit registers fn to run when the command ends or is interrupted.
func atExit(fn func()) {
	cleanups.mu.Lock()
	defer cleanups.mu.Unlock()
	cleanups.fns = append(cleanups.fns, fn)
}

// runCleanups runs the registered cleanups, last first, once each.
func runCleanups() {
	cleanups.mu.Lock()
	fns := cleanups.fns
	cleanups.fns = nil
	cleanups.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// interruptGrace is how long an interrupted command that stops (an
// upload aborting its parts) has to return before kvik exits anyway.
const interruptGrace = 30 * time.Second

// handleInterrupt returns the context of a command, cancelled on SIGINT
// or SIGTERM, and a function to call when the command has returned: it
// stops the watch and returns the signal received, if any. A command
// that stops (cmd.stops) gets interruptGrace to return; a second signal,
// or the grace's end, exits at once. Other commands exit at once. Exiting
// at once runs the cleanups (temporary files) first and exits with 130.
func handleInterrupt(stops bool) (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var got os.Signal
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case got = <-ch:
		case <-done:
			return
		}
		cancel()
		msg := fmt.Sprintf("\nkvik: interrupted (%v)\n", got)
		if stops {
			fmt.Fprintf(os.Stderr, "\nkvik: interrupted (%v): stopping (again to exit now)\n", got)
			t := time.NewTimer(interruptGrace)
			select {
			case <-ch:
			case <-t.C:
			case <-done:
				return // the command returned: run reports it
			}
			msg = "kvik: exiting before the command stopped (an upload's parts may stay)\n"
		}
		runCleanups()
		fmt.Fprint(os.Stderr, msg)
		os.Exit(exitInterrupted)
	}()
	return ctx, func() os.Signal {
		signal.Stop(ch)
		close(done)
		<-finished // or the process exits
		cancel()
		return got
	}
}
