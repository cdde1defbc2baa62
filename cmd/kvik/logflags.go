package main

import (
	"flag"
	"log/slog"
	"strconv"

	"github.com/kvikgo/kvik"
)

// addLogFlags gives fs the logging flags every command takes: -v, once
// for INFO, twice for DEBUG, three times for TRACE (or -v=LEVEL), and
// --log-level LEVEL with KvikIO's level names (KVIKIO_LOG_LEVEL). Each
// takes effect as it is parsed, the last one winning, until the command
// ends.
func addLogFlags(e *env, fs *flag.FlagSet) {
	fs.Var(&verboseFlag{e: e}, "v", "log more: -v INFO, -v -v DEBUG, -v -v -v TRACE, or -v=LEVEL")
	fs.Func("log-level", "log `LEVEL`: TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL or OFF (default KVIKIO_LOG_LEVEL, else OFF)",
		func(s string) error {
			level, err := kvik.ParseLogLevel(s)
			if err != nil {
				return err
			}
			e.setLogLevel(level)
			return nil
		})
}

// verboseFlag is -v: a boolean flag that counts, or takes a level.
type verboseFlag struct {
	e     *env
	count int
}

// verboseLevels are the levels of -v given once, twice and three times.
var verboseLevels = []slog.Level{kvik.LevelInfo, kvik.LevelDebug, kvik.LevelTrace}

func (v *verboseFlag) IsBoolFlag() bool { return true }
func (v *verboseFlag) String() string   { return "" }

func (v *verboseFlag) Set(s string) error {
	if on, err := strconv.ParseBool(s); err == nil {
		if on {
			v.e.verbose = true
			v.count++
			v.e.setLogLevel(verboseLevels[min(v.count, len(verboseLevels))-1])
		}
		return nil
	}
	level, err := kvik.ParseLogLevel(s)
	if err != nil {
		return err
	}
	v.e.setLogLevel(level)
	return nil
}

// setLogLevel logs kvik's records of level and above until the command
// ends: to KVIKIO_LOG_FILE when the settings name one, else to the
// command's standard error.
func (e *env) setLogLevel(level slog.Level) {
	if d, err := kvik.GetDefaults(); err == nil && d.LogFile != "" {
		if restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.LogLevel = level }); err == nil {
			atExit(restore)
			return
		}
	}
	l := slog.New(slog.DiscardHandler)
	if level != kvik.LevelOff {
		l = slog.New(kvik.NewLogHandler(e.stderr, level))
	}
	atExit(kvik.SetLogger(l))
}
