package kvik

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvikgo/kvik/internal/remote"
)

// Defaults holds the settings that KvikIO reads from KVIKIO_* environment
// variables. The package keeps one current set; read it with GetDefaults
// and change it with SetDefaults.
type Defaults struct {
	// CompatMode chooses between cuFile and the POSIX path (KVIKIO_COMPAT_MODE).
	CompatMode CompatMode
	// NumThreads is the number of I/O workers per pool (KVIKIO_NTHREADS).
	NumThreads int
	// TaskSize is the largest piece of an operation that one worker
	// handles (KVIKIO_TASK_SIZE), in bytes.
	TaskSize int
	// GDSThreshold is the size below which device I/O goes through the
	// POSIX path synchronously (KVIKIO_GDS_THRESHOLD), in bytes.
	GDSThreshold int
	// BounceBufferSize is the size of each bounce buffer
	// (KVIKIO_BOUNCE_BUFFER_SIZE), in bytes.
	BounceBufferSize int
	// AutoDirectIORead enables opportunistic O_DIRECT reads
	// (KVIKIO_AUTO_DIRECT_IO_READ). When true, every read uses O_DIRECT
	// for its page-aligned middle, whatever DirectIOReadPolicy says.
	AutoDirectIORead bool
	// DirectIOReadPolicy chooses between buffered and O_DIRECT reads when
	// AutoDirectIORead is false (KVIK_DIRECT_IO_READ_POLICY): by page-cache
	// residency (the default), always buffered, or always direct.
	DirectIOReadPolicy ReadPolicy
	// AutoDirectIOReadOverread lets device reads widen to aligned bounds
	// and keep the wanted part (KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD).
	AutoDirectIOReadOverread bool
	// AutoDirectIOWrite enables opportunistic O_DIRECT writes
	// (KVIKIO_AUTO_DIRECT_IO_WRITE).
	AutoDirectIOWrite bool
	// ThreadPoolPerBlockDevice gives each block device its own pool of
	// NumThreads workers (KVIKIO_THREAD_POOL_PER_BLOCK_DEVICE).
	ThreadPoolPerBlockDevice bool
	// HTTPMaxAttempts is how many times a remote request is tried before
	// its error is returned (KVIKIO_HTTP_MAX_ATTEMPTS).
	HTTPMaxAttempts int
	// HTTPTimeout bounds each remote request attempt, body included
	// (KVIKIO_HTTP_TIMEOUT, in whole seconds).
	HTTPTimeout time.Duration
	// HTTPStatusCodes are the HTTP status codes that make a remote request
	// be retried (KVIKIO_HTTP_STATUS_CODES, comma-separated).
	HTTPStatusCodes HTTPStatusSet
	// RemoteMaxRequests caps the remote requests in flight in the whole
	// process, over every handle and upload
	// (KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS); 0 means no cap.
	// WithMaxRequests caps one handle's requests too.
	RemoteMaxRequests int
	// RemoteVerbose logs every remote request at LevelDebug rather than
	// LevelTrace (KVIKIO_REMOTE_VERBOSE).
	RemoteVerbose bool
	// WebHDFSUsername is the user.name of WebHDFS requests whose URL
	// names none (KVIKIO_WEBHDFS_USERNAME); "" sends none.
	WebHDFSUsername string
	// LogLevel is the level of the built-in logger (KVIKIO_LOG_LEVEL):
	// LevelOff, the default, logs nothing. SetLogger replaces the
	// built-in logger with the application's.
	LogLevel slog.Level
	// LogFile is the file the built-in logger writes to
	// (KVIKIO_LOG_FILE), truncated when first opened; "" is standard
	// error.
	LogFile string
	// NUMAPlacement puts each GPU's staging buffers and worker threads on
	// the GPU's NUMA node where the host has several
	// (KVIK_NUMA_PLACEMENT: auto, the default, or off).
	NUMAPlacement NUMAPlacement
}

// HTTPStatusSet is a set of HTTP status codes (100 to 999). It is a value
// type, so that Defaults stays comparable with ==.
type HTTPStatusSet [16]uint64

// NewHTTPStatusSet returns the set of codes; codes outside 100..999 are
// left out.
func NewHTTPStatusSet(codes ...int) HTTPStatusSet {
	var s HTTPStatusSet
	for _, c := range codes {
		if c >= 100 && c <= 999 {
			s[c/64] |= 1 << (c % 64)
		}
	}
	return s
}

// Has reports whether code is in the set.
func (s HTTPStatusSet) Has(code int) bool {
	return code >= 100 && code <= 999 && s[code/64]&(1<<(code%64)) != 0
}

// Codes returns the codes in increasing order.
func (s HTTPStatusSet) Codes() []int {
	var codes []int
	for c := 100; c <= 999; c++ {
		if s.Has(c) {
			codes = append(codes, c)
		}
	}
	return codes
}

// String returns the codes comma-separated, as KVIKIO_HTTP_STATUS_CODES
// takes them.
func (s HTTPStatusSet) String() string {
	codes := s.Codes()
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// DefaultNumThreads is the built-in worker count: one per CPU, at least 4
// and at most 16. KvikIO's built-in is 1, which leaves most of a modern
// disk's or the page cache's bandwidth unused (see docs/defaults.md).
func DefaultNumThreads() int { return min(max(runtime.NumCPU(), 4), 16) }

// BuiltinDefaults returns the settings used when no environment variable
// is set.
func BuiltinDefaults() Defaults {
	return Defaults{
		CompatMode:        CompatAuto,
		NumThreads:        DefaultNumThreads(),
		TaskSize:          4 << 20,
		GDSThreshold:      16 << 10,
		BounceBufferSize:  16 << 20,
		AutoDirectIOWrite: true,
		HTTPMaxAttempts:   3,
		HTTPTimeout:       60 * time.Second,
		HTTPStatusCodes:   NewHTTPStatusSet(429, 500, 502, 503, 504),
		RemoteMaxRequests: 256,
		LogLevel:          LevelOff,
	}
}

// Validate reports the first setting out of range, wrapping
// ErrInvalidArgument.
func (d Defaults) Validate() error {
	switch {
	case d.CompatMode != CompatOff && d.CompatMode != CompatOn && d.CompatMode != CompatAuto:
		return fmt.Errorf("%w: compat mode %d", ErrInvalidArgument, int(d.CompatMode))
	case d.NumThreads <= 0:
		return fmt.Errorf("%w: NumThreads %d must be positive", ErrInvalidArgument, d.NumThreads)
	case d.TaskSize <= 0:
		return fmt.Errorf("%w: TaskSize %d must be positive", ErrInvalidArgument, d.TaskSize)
	case d.GDSThreshold < 0:
		return fmt.Errorf("%w: GDSThreshold %d must not be negative", ErrInvalidArgument, d.GDSThreshold)
	case d.BounceBufferSize <= 0:
		return fmt.Errorf("%w: BounceBufferSize %d must be positive", ErrInvalidArgument, d.BounceBufferSize)
	case d.HTTPMaxAttempts <= 0:
		return fmt.Errorf("%w: HTTPMaxAttempts %d must be positive", ErrInvalidArgument, d.HTTPMaxAttempts)
	case d.HTTPTimeout <= 0:
		return fmt.Errorf("%w: HTTPTimeout %v must be positive", ErrInvalidArgument, d.HTTPTimeout)
	case d.DirectIOReadPolicy < ReadPolicyAuto || d.DirectIOReadPolicy > ReadPolicyDirect:
		return fmt.Errorf("%w: DirectIOReadPolicy %d", ErrInvalidArgument, int(d.DirectIOReadPolicy))
	case d.NUMAPlacement != NUMAAuto && d.NUMAPlacement != NUMAOff:
		return fmt.Errorf("%w: NUMAPlacement %d", ErrInvalidArgument, int(d.NUMAPlacement))
	case d.RemoteMaxRequests < 0:
		return fmt.Errorf("%w: RemoteMaxRequests %d must not be negative (0: no cap)", ErrInvalidArgument, d.RemoteMaxRequests)
	}
	return nil
}

// Setting describes one setting for display (kvik info): its name, the
// environment variable, the value and where the value came from
// ("built-in", "env" or "set").
type Setting struct {
	Name, Env, Value, Source string
}

// envVar binds a Defaults field to its environment variable.
type envVar struct {
	name, env string
	parse     func(d *Defaults, v string) error
	format    func(d Defaults) string
}

var envVars = []envVar{
	{"CompatMode", "KVIKIO_COMPAT_MODE",
		func(d *Defaults, v string) (err error) { d.CompatMode, err = ParseCompatMode(v); return },
		func(d Defaults) string { return d.CompatMode.String() }},
	{"NumThreads", "KVIKIO_NTHREADS", intParser(func(d *Defaults) *int { return &d.NumThreads }),
		func(d Defaults) string { return strconv.Itoa(d.NumThreads) }},
	{"TaskSize", "KVIKIO_TASK_SIZE", intParser(func(d *Defaults) *int { return &d.TaskSize }),
		func(d Defaults) string { return strconv.Itoa(d.TaskSize) }},
	{"GDSThreshold", "KVIKIO_GDS_THRESHOLD", intParser(func(d *Defaults) *int { return &d.GDSThreshold }),
		func(d Defaults) string { return strconv.Itoa(d.GDSThreshold) }},
	{"BounceBufferSize", "KVIKIO_BOUNCE_BUFFER_SIZE", intParser(func(d *Defaults) *int { return &d.BounceBufferSize }),
		func(d Defaults) string { return strconv.Itoa(d.BounceBufferSize) }},
	{"AutoDirectIORead", "KVIKIO_AUTO_DIRECT_IO_READ", boolParser(func(d *Defaults) *bool { return &d.AutoDirectIORead }),
		func(d Defaults) string { return strconv.FormatBool(d.AutoDirectIORead) }},
	{"DirectIOReadPolicy", readPolicyEnv,
		func(d *Defaults, v string) (err error) { d.DirectIOReadPolicy, err = ParseReadPolicy(v); return },
		func(d Defaults) string { return d.DirectIOReadPolicy.String() }},
	{"AutoDirectIOReadOverread", "KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD", boolParser(func(d *Defaults) *bool { return &d.AutoDirectIOReadOverread }),
		func(d Defaults) string { return strconv.FormatBool(d.AutoDirectIOReadOverread) }},
	{"AutoDirectIOWrite", "KVIKIO_AUTO_DIRECT_IO_WRITE", boolParser(func(d *Defaults) *bool { return &d.AutoDirectIOWrite }),
		func(d Defaults) string { return strconv.FormatBool(d.AutoDirectIOWrite) }},
	{"ThreadPoolPerBlockDevice", "KVIKIO_THREAD_POOL_PER_BLOCK_DEVICE", boolParser(func(d *Defaults) *bool { return &d.ThreadPoolPerBlockDevice }),
		func(d Defaults) string { return strconv.FormatBool(d.ThreadPoolPerBlockDevice) }},
	{"HTTPMaxAttempts", "KVIKIO_HTTP_MAX_ATTEMPTS", intParser(func(d *Defaults) *int { return &d.HTTPMaxAttempts }),
		func(d Defaults) string { return strconv.Itoa(d.HTTPMaxAttempts) }},
	{"HTTPTimeout", "KVIKIO_HTTP_TIMEOUT", parseHTTPTimeout,
		func(d Defaults) string { return strconv.FormatInt(int64(d.HTTPTimeout/time.Second), 10) }},
	{"HTTPStatusCodes", "KVIKIO_HTTP_STATUS_CODES",
		func(d *Defaults, v string) (err error) { d.HTTPStatusCodes, err = ParseHTTPStatusCodes(v); return },
		func(d Defaults) string { return d.HTTPStatusCodes.String() }},
	{"RemoteMaxRequests", "KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS", intParser(func(d *Defaults) *int { return &d.RemoteMaxRequests }),
		func(d Defaults) string { return strconv.Itoa(d.RemoteMaxRequests) }},
	{"RemoteVerbose", "KVIKIO_REMOTE_VERBOSE", boolParser(func(d *Defaults) *bool { return &d.RemoteVerbose }),
		func(d Defaults) string { return strconv.FormatBool(d.RemoteVerbose) }},
	{"WebHDFSUsername", "KVIKIO_WEBHDFS_USERNAME", func(d *Defaults, v string) error { d.WebHDFSUsername = v; return nil },
		func(d Defaults) string { return d.WebHDFSUsername }},
	{"LogLevel", "KVIKIO_LOG_LEVEL",
		func(d *Defaults, v string) (err error) { d.LogLevel, err = ParseLogLevel(v); return },
		func(d Defaults) string { return LogLevelName(d.LogLevel) }},
	{"LogFile", "KVIKIO_LOG_FILE", func(d *Defaults, v string) error { d.LogFile = v; return nil },
		func(d Defaults) string { return d.LogFile }},
	{"NUMAPlacement", numaPlacementEnv,
		func(d *Defaults, v string) (err error) { d.NUMAPlacement, err = ParseNUMAPlacement(v); return },
		func(d Defaults) string { return d.NUMAPlacement.String() }},
}

// inertVars are the variables of KvikIO's MULTI_POLL remote backend.
// kvik has one remote backend (goroutines on the worker pool, each
// request bounded by RemoteMaxRequests), so they change nothing; they are
// checked as KvikIO checks them, so that a job configured for KvikIO
// runs unchanged and a typo is still caught.
var inertVars = []struct {
	env   string
	check func(string) error
}{
	{"KVIKIO_REMOTE_IO_BACKEND", oneOf("easy_threadpool", "multi_poll")},
	{"KVIKIO_REMOTE_IO_NUM_REACTORS", func(v string) error {
		if n, err := strconv.ParseInt(v, 10, 0); err != nil || n <= 0 {
			return fmt.Errorf("not a positive integer")
		}
		return nil
	}},
	{"KVIKIO_REMOTE_IO_REACTOR_DISPATCH", oneOf("per_chunk", "per_pread")},
}

// oneOf accepts the names given, case-insensitive.
func oneOf(names ...string) func(string) error {
	return func(v string) error {
		for _, n := range names {
			if strings.EqualFold(v, n) {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(names, ", "))
	}
}

// parseHTTPTimeout reads KVIKIO_HTTP_TIMEOUT: whole seconds, as KvikIO.
func parseHTTPTimeout(d *Defaults, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/int64(time.Second) {
		return fmt.Errorf("not a positive number of seconds")
	}
	d.HTTPTimeout = time.Duration(n) * time.Second
	return nil
}

// ParseHTTPStatusCodes parses KVIKIO_HTTP_STATUS_CODES as KvikIO does:
// three-digit integers separated by commas, spaces allowed around each.
func ParseHTTPStatusCodes(s string) (HTTPStatusSet, error) {
	var set HTTPStatusSet
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		n, err := strconv.Atoi(p)
		if len(p) != 3 || err != nil || p[0] < '0' || p[0] > '9' || n < 100 {
			return set, fmt.Errorf("%w: HTTP status codes %q: want comma-separated three-digit integers", ErrInvalidArgument, s)
		}
		set = set.with(n)
	}
	return set, nil
}

func (s HTTPStatusSet) with(code int) HTTPStatusSet {
	s[code/64] |= 1 << (code % 64)
	return s
}

// numThreadsAlias is KvikIO's alternative name for KVIKIO_NTHREADS.
const numThreadsAlias = "KVIKIO_NUM_THREADS"

func intParser(field func(*Defaults) *int) func(*Defaults, string) error {
	return func(d *Defaults, v string) error {
		n, err := strconv.ParseInt(v, 10, 0)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*field(d) = int(n)
		return nil
	}
}

func boolParser(field func(*Defaults) *bool) func(*Defaults, string) error {
	return func(d *Defaults, v string) (err error) {
		*field(d), err = ParseBool(v)
		return err
	}
}

// ParseBool parses a boolean the way KvikIO does: an integer (non-zero is
// true) or true/on/yes and false/off/no, case-insensitive, trimmed.
func ParseBool(s string) (bool, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n != 0, nil
	}
	switch v {
	case "true", "on", "yes":
		return true, nil
	case "false", "off", "no":
		return false, nil
	}
	return false, fmt.Errorf("%w: %q is not a boolean (want true/false, on/off, yes/no or an integer)", ErrInvalidArgument, s)
}

// DefaultsFromEnv returns the built-in defaults overridden by the KVIKIO_*
// environment variables that are set, with where each value came from. A
// variable that is set but empty, unparsable or out of range is an error
// wrapping ErrBadEnv that names the variable and its value.
func DefaultsFromEnv() (Defaults, []Setting, error) {
	return defaultsFrom(os.LookupEnv)
}

func defaultsFrom(lookup func(string) (string, bool)) (Defaults, []Setting, error) {
	d := BuiltinDefaults()
	fromEnv := map[string]bool{}
	for _, ev := range envVars {
		name, v, ok, err := lookupVar(lookup, ev.env)
		if err != nil {
			return d, nil, err
		}
		if !ok {
			continue
		}
		if strings.TrimSpace(v) == "" {
			return d, nil, fmt.Errorf("%w: %s is set but empty", ErrBadEnv, name)
		}
		if err := ev.parse(&d, strings.TrimSpace(v)); err != nil {
			return d, nil, fmt.Errorf("%w: %s=%q: %v", ErrBadEnv, name, v, err)
		}
		if err := d.Validate(); err != nil {
			return d, nil, fmt.Errorf("%w: %s=%q: %v", ErrBadEnv, name, v, err)
		}
		fromEnv[ev.name] = true
	}
	if err := resolveReadPolicy(&d, lookup, fromEnv); err != nil {
		return d, nil, err
	}
	for _, iv := range inertVars {
		v, ok := lookup(iv.env)
		if !ok {
			continue
		}
		if strings.TrimSpace(v) == "" {
			return d, nil, fmt.Errorf("%w: %s is set but empty", ErrBadEnv, iv.env)
		}
		if err := iv.check(strings.TrimSpace(v)); err != nil {
			return d, nil, fmt.Errorf("%w: %s=%q: %v", ErrBadEnv, iv.env, v, err)
		}
	}
	return d, settingsOf(d, func(name string) string {
		if fromEnv[name] {
			return "env"
		}
		return "built-in"
	}), nil
}

// lookupVar reads an environment variable, resolving KVIKIO_NTHREADS and
// its alias KVIKIO_NUM_THREADS: both set to different values is an error.
func lookupVar(lookup func(string) (string, bool), env string) (name, v string, ok bool, err error) {
	v, ok = lookup(env)
	if env != "KVIKIO_NTHREADS" {
		return env, v, ok, nil
	}
	alias, aliasOK := lookup(numThreadsAlias)
	switch {
	case ok && aliasOK && strings.TrimSpace(v) != strings.TrimSpace(alias):
		return env, v, ok, fmt.Errorf("%w: KVIKIO_NTHREADS=%q and %s=%q conflict", ErrBadEnv, v, numThreadsAlias, alias)
	case !ok && aliasOK:
		return numThreadsAlias, alias, true, nil
	}
	return env, v, ok, nil
}

func settingsOf(d Defaults, source func(name string) string) []Setting {
	s := make([]Setting, len(envVars))
	for i, ev := range envVars {
		s[i] = Setting{Name: ev.name, Env: ev.env, Value: ev.format(d), Source: source(ev.name)}
		if ev.name == "AutoDirectIORead" && !d.AutoDirectIORead && s[i].Source == "built-in" {
			// Not set: the read policy decides, which "false" (never
			// O_DIRECT, as KVIKIO_AUTO_DIRECT_IO_READ=0 means) would not say.
			s[i].Value = "unset"
		}
	}
	return s
}

// state is the package's current defaults, loaded from the environment on
// first use.
var state struct {
	once     sync.Once
	mu       sync.RWMutex
	d        Defaults
	settings []Setting
	envErr   error
}

func loadState() {
	state.once.Do(func() {
		d, s, err := DefaultsFromEnv()
		if err == nil {
			if lerr := configureLogs(d); lerr != nil {
				err = fmt.Errorf("%w: KVIKIO_LOG_FILE=%q: %v", ErrBadEnv, d.LogFile, lerr)
			}
		}
		if err != nil {
			d, s = BuiltinDefaults(), settingsOf(BuiltinDefaults(), func(string) string { return "built-in" })
			configureLogs(d) // logging off: cannot fail
		}
		state.d, state.settings, state.envErr = d, s, err
		remote.Requests().SetLimit(d.RemoteMaxRequests)
		placer.SetEnabled(d.NUMAPlacement == NUMAAuto)
	})
}

// GetDefaults returns the current settings. If the environment held a bad
// KVIKIO_* value, it returns the built-in settings and that error, which
// every Open returns too until SetDefaults replaces the settings.
func GetDefaults() (Defaults, error) {
	loadState()
	state.mu.RLock()
	defer state.mu.RUnlock()
	return state.d, state.envErr
}

// Settings lists the current settings with their sources, for display.
func Settings() []Setting {
	loadState()
	state.mu.RLock()
	defer state.mu.RUnlock()
	return append([]Setting(nil), state.settings...)
}

// SetDefaults replaces the current settings and returns a function that
// restores the previous ones, like KvikIO's kvikio.defaults.set context
// manager:
//
//	restore, err := kvik.SetDefaults(d)
//	if err != nil { ... }
//	defer restore()
//
// Operations already submitted keep the settings they started with; worker
// pools are resized at once without dropping queued work.
func SetDefaults(d Defaults) (restore func(), err error) {
	if err := d.Validate(); err != nil {
		return func() {}, err
	}
	loadState()
	if err := configureLogs(d); err != nil {
		return func() {}, fmt.Errorf("%w: LogFile %q: %v", ErrInvalidArgument, d.LogFile, err)
	}
	state.mu.Lock()
	prevD, prevS, prevErr := state.d, state.settings, state.envErr
	old := settingMap(prevS)
	state.d, state.envErr = d, nil
	state.settings = settingsOf(d, func(name string) string {
		for _, ev := range envVars {
			if ev.name == name && ev.format(d) == ev.format(prevD) {
				return old[name]
			}
		}
		return "set"
	})
	state.mu.Unlock()
	applyRuntime(d)
	return func() {
		state.mu.Lock()
		state.d, state.settings, state.envErr = prevD, prevS, prevErr
		state.mu.Unlock()
		configureLogs(prevD) // cannot fail: prevD's file is open already
		applyRuntime(prevD)
	}, nil
}

// applyRuntime brings what runs (worker pools, the remote request cap,
// NUMA placement) in line with d.
func applyRuntime(d Defaults) {
	workers.Resize(d.NumThreads)
	remote.Requests().SetLimit(d.RemoteMaxRequests)
	placer.SetEnabled(d.NUMAPlacement == NUMAAuto)
}

func settingMap(s []Setting) map[string]string {
	m := make(map[string]string, len(s))
	for _, x := range s {
		m[x.Name] = x.Source
	}
	return m
}

// UpdateDefaults applies change to a copy of the current settings and sets
// the result; it returns the restore function of SetDefaults.
//
//	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.NumThreads = 8 })
//
// It fails with the environment's error if GetDefaults reports one.
func UpdateDefaults(change func(d *Defaults)) (restore func(), err error) {
	d, err := GetDefaults()
	if err != nil {
		return func() {}, err
	}
	change(&d)
	return SetDefaults(d)
}
