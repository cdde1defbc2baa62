package kvik

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kvikgo/kvik/internal/remote"
)

// Log levels under KvikIO's names (KVIKIO_LOG_LEVEL), on log/slog's
// scale: LevelDebug, LevelInfo, LevelWarn and LevelError are slog's own;
// LevelTrace is below debug and LevelCritical above error. LevelOff logs
// nothing.
const (
	LevelTrace    slog.Level = slog.LevelDebug - 4
	LevelDebug    slog.Level = slog.LevelDebug
	LevelInfo     slog.Level = slog.LevelInfo
	LevelWarn     slog.Level = slog.LevelWarn
	LevelError    slog.Level = slog.LevelError
	LevelCritical slog.Level = slog.LevelError + 4
	LevelOff      slog.Level = math.MaxInt32
)

// logLevelNames are KvikIO's level names, most verbose first.
var logLevelNames = []struct {
	name  string
	level slog.Level
}{
	{"TRACE", LevelTrace}, {"DEBUG", LevelDebug}, {"INFO", LevelInfo}, {"WARN", LevelWarn},
	{"ERROR", LevelError}, {"CRITICAL", LevelCritical}, {"OFF", LevelOff},
}

// ParseLogLevel parses one of KvikIO's level names: TRACE, DEBUG, INFO,
// WARN, ERROR, CRITICAL or OFF, case-insensitive, surrounding space
// ignored. Anything else is an error wrapping ErrInvalidArgument (KvikIO
// takes it for OFF).
func ParseLogLevel(s string) (slog.Level, error) {
	v := strings.ToUpper(strings.TrimSpace(s))
	for _, n := range logLevelNames {
		if v == n.name {
			return n.level, nil
		}
	}
	return 0, fmt.Errorf("%w: %q is not a log level (want TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL or OFF)", ErrInvalidArgument, s)
}

// LogLevelName returns KvikIO's name of l (TRACE ... OFF), or slog's name
// for a level between them ("INFO+2").
func LogLevelName(l slog.Level) string {
	for _, n := range logLevelNames {
		if l == n.level {
			return n.name
		}
	}
	return l.String()
}

// logs holds the loggers. active is what log sites use: the
// application's logger if it set one, else the built-in logger of the
// current settings, nil when nothing would be logged.
var logs struct {
	active atomic.Pointer[slog.Logger]

	mu         sync.Mutex
	user       *slog.Logger        // set by SetLogger
	builtin    *slog.Logger        // from LogLevel and LogFile
	configured bool                // builtin has been made
	key        [2]string           // the LogLevel and LogFile builtin was made for
	files      map[string]*os.File // log files opened, kept for the process
}

// discard is what Logger returns while logging is off.
var discard = slog.New(slog.DiscardHandler)

// SetLogger sends kvik's log records to l, whatever LogLevel says: l's
// handler decides what it keeps. nil goes back to the built-in logger,
// which LogLevel and LogFile (KVIKIO_LOG_LEVEL, KVIKIO_LOG_FILE) set up.
// It returns a function that restores the previous logger.
//
//	restore := kvik.SetLogger(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
//	defer restore()
func SetLogger(l *slog.Logger) (restore func()) {
	loadState() // the built-in logger must exist to be restored to
	logs.mu.Lock()
	defer logs.mu.Unlock()
	prev := logs.user
	logs.user = l
	refreshLoggerLocked()
	return func() {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.user = prev
		refreshLoggerLocked()
	}
}

// Logger returns the logger kvik writes to: the one SetLogger set, else
// the built-in one, or a logger that discards everything when logging is
// off. Packages built on kvik (zarr, safetensors) log through it.
func Logger() *slog.Logger {
	loadState()
	if l := logs.active.Load(); l != nil {
		return l
	}
	return discard
}

// refreshLoggerLocked sets the active logger; logs.mu is held.
func refreshLoggerLocked() {
	l := logs.user
	if l == nil {
		l = logs.builtin
	}
	if l != nil && l.Handler() == slog.DiscardHandler {
		l = nil
	}
	if l != nil {
		l = slog.New(redactHandler{l.Handler()})
	}
	logs.active.Store(l)
}

// logAt returns the active logger when it takes records at level, nil
// otherwise. Log sites call it first, so that a disabled level costs an
// atomic load and builds no attributes (every log site runs after the
// settings, and so the logger, are loaded):
//
//	if l := logAt(LevelDebug); l != nil {
//		l.LogAttrs(ctx, LevelDebug, "kvik: ...", attrs...)
//	}
func logAt(level slog.Level) *slog.Logger {
	l := logs.active.Load()
	if l == nil || !l.Enabled(context.Background(), level) {
		return nil
	}
	return l
}

// configureLogs builds the built-in logger for d's LogLevel and LogFile,
// opening the file (truncated, as KvikIO does) the first time it is
// named; an unusable file is an error and changes nothing.
func configureLogs(d Defaults) error {
	logs.mu.Lock()
	defer logs.mu.Unlock()
	key := [2]string{LogLevelName(d.LogLevel), d.LogFile}
	if logs.configured && key == logs.key {
		return nil
	}
	var l *slog.Logger
	if d.LogLevel != LevelOff {
		w := os.Stderr
		if d.LogFile != "" {
			if w = logs.files[d.LogFile]; w == nil {
				f, err := os.OpenFile(d.LogFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("log file: %w", err)
				}
				if logs.files == nil {
					logs.files = map[string]*os.File{}
				}
				logs.files[d.LogFile], w = f, f
			}
		}
		l = slog.New(NewLogHandler(w, d.LogLevel))
	}
	logs.builtin, logs.key, logs.configured = l, key, true
	refreshLoggerLocked()
	return nil
}

// NewLogHandler returns the handler of the built-in logger: slog's text
// handler writing records of level and above to w, with levels under
// KvikIO's names (TRACE rather than slog's DEBUG-4).
func NewLogHandler(w io.Writer, level slog.Level) slog.Handler {
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: levelNames})
}

// levelNames prints levels under KvikIO's names.
func levelNames(_ []string, a slog.Attr) slog.Attr {
	if l, ok := a.Value.Any().(slog.Level); ok && a.Key == slog.LevelKey {
		a.Value = slog.StringValue(LogLevelName(l))
	}
	return a
}

// RedactURL returns a URL fit to print: the password of its userinfo
// masked, its query (a presigned signature, a token) cut to "?…"; a local
// path (no "://") as it is. kvik's errors and log records print URLs this
// way.
func RedactURL(url string) string { return remote.Redact(url) }

// RedactText returns s with every secret masked: userinfo passwords of
// the URLs in it; the values of presigned signatures, credentials and
// tokens (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token,
// Signature, AWSAccessKeyId, sig, Authorization, S3 secret keys and
// session tokens as a server may echo them); the keys, tokens and
// passwords of every remote endpoint opened so far; and the values of
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. Every log record kvik
// writes, the text of its remote errors and the kvik command's output go
// through it.
func RedactText(s string) string { return remote.RedactText(s) }

// RedactError returns err, or an error wrapping it whose text is
// RedactText's when that differs; errors.Is and errors.As still see err.
func RedactError(err error) error { return remote.RedactError(err) }

// redactHandler passes records on with RedactText applied to the message
// and to every attribute, whatever handler (the application's included)
// writes them.
type redactHandler struct{ h slog.Handler }

func (r redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, remote.RedactText(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = redactAttr(a)
	}
	return redactHandler{r.h.WithAttrs(clean)}
}

func (r redactHandler) WithGroup(name string) slog.Handler { return redactHandler{r.h.WithGroup(name)} }

// redactAttr masks the secrets in a's value: strings, errors and any
// other value whose printed form holds one (which is then printed).
func redactAttr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(remote.RedactText(a.Value.String()))
	case slog.KindGroup:
		g := a.Value.Group()
		clean := make([]slog.Attr, len(g))
		for i, ga := range g {
			clean[i] = redactAttr(ga)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		v := a.Value.Any()
		if err, ok := v.(error); ok {
			if clean := remote.RedactError(err); clean != err {
				a.Value = slog.AnyValue(clean)
			}
			break
		}
		if s := fmt.Sprint(v); remote.RedactText(s) != s {
			a.Value = slog.StringValue(remote.RedactText(s))
		}
	}
	return a
}
