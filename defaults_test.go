package kvik

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsFromEnv(t *testing.T) {
	d, s, err := defaultsFrom(lookupIn(nil))
	if err != nil || d != BuiltinDefaults() {
		t.Fatalf("no env: %+v, %v", d, err)
	}
	for _, x := range s {
		if x.Source != "built-in" {
			t.Fatalf("no env: %+v", x)
		}
	}
	env := map[string]string{
		"KVIKIO_COMPAT_MODE":                       " ON ",
		"KVIKIO_NTHREADS":                          "7",
		"KVIKIO_TASK_SIZE":                         "1234",
		"KVIKIO_GDS_THRESHOLD":                     "0",
		"KVIKIO_BOUNCE_BUFFER_SIZE":                "99",
		"KVIKIO_AUTO_DIRECT_IO_READ":               "yes",
		"KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD":      "1",
		"KVIKIO_AUTO_DIRECT_IO_WRITE":              "Off",
		"KVIKIO_THREAD_POOL_PER_BLOCK_DEVICE":      "true",
		"KVIKIO_HTTP_MAX_ATTEMPTS":                 "5",
		"KVIKIO_HTTP_TIMEOUT":                      " 7 ",
		"KVIKIO_HTTP_STATUS_CODES":                 " 503 ,429",
		"KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS": "0",
		"KVIKIO_REMOTE_VERBOSE":                    "on",
		"KVIKIO_WEBHDFS_USERNAME":                  " hdfs-user ",
		"KVIKIO_LOG_LEVEL":                         "debug",
		"KVIKIO_LOG_FILE":                          "/tmp/kvik.log",
		"KVIK_NUMA_PLACEMENT":                      " OFF ",
		// KvikIO's MULTI_POLL settings: accepted, checked, no field.
		"KVIKIO_REMOTE_IO_BACKEND":          "MULTI_POLL",
		"KVIKIO_REMOTE_IO_NUM_REACTORS":     "4",
		"KVIKIO_REMOTE_IO_REACTOR_DISPATCH": "per_pread",
	}
	d, s, err = defaultsFrom(lookupIn(env))
	want := Defaults{CompatMode: CompatOn, NumThreads: 7, TaskSize: 1234, GDSThreshold: 0, BounceBufferSize: 99,
		AutoDirectIORead: true, DirectIOReadPolicy: ReadPolicyDirect, AutoDirectIOReadOverread: true,
		AutoDirectIOWrite: false, ThreadPoolPerBlockDevice: true,
		HTTPMaxAttempts: 5, HTTPTimeout: 7 * time.Second, HTTPStatusCodes: NewHTTPStatusSet(429, 503),
		RemoteMaxRequests: 0, RemoteVerbose: true, WebHDFSUsername: "hdfs-user", LogLevel: LevelDebug, LogFile: "/tmp/kvik.log",
		NUMAPlacement: NUMAOff}
	if err != nil || d != want {
		t.Fatalf("env: %+v, %v; want %+v", d, err, want)
	}
	for _, x := range s {
		// The read policy follows KVIKIO_AUTO_DIRECT_IO_READ.
		if x.Source != "env" || env[x.Env] == "" && x.Env != readPolicyEnv {
			t.Fatalf("env: %+v", x)
		}
	}
	// The alias alone, and both names agreeing, are accepted.
	if d, _, err := defaultsFrom(lookupIn(map[string]string{"KVIKIO_NUM_THREADS": "3"})); err != nil || d.NumThreads != 3 {
		t.Fatalf("alias: %+v, %v", d, err)
	}
	if d, _, err := defaultsFrom(lookupIn(map[string]string{"KVIKIO_NUM_THREADS": "3", "KVIKIO_NTHREADS": "3"})); err != nil || d.NumThreads != 3 {
		t.Fatalf("both: %+v, %v", d, err)
	}
}

func TestDefaultsFromEnvErrors(t *testing.T) {
	bad := []map[string]string{
		{"KVIKIO_COMPAT_MODE": "maybe"},
		{"KVIKIO_COMPAT_MODE": ""},
		{"KVIKIO_NTHREADS": "0"},
		{"KVIKIO_NTHREADS": "-2"},
		{"KVIKIO_NTHREADS": "four"},
		{"KVIKIO_NTHREADS": "4", "KVIKIO_NUM_THREADS": "5"},
		{"KVIKIO_NUM_THREADS": "x"},
		{"KVIKIO_TASK_SIZE": "0"},
		{"KVIKIO_HTTP_MAX_ATTEMPTS": "0"},
		{"KVIKIO_HTTP_TIMEOUT": "0"},
		{"KVIKIO_HTTP_TIMEOUT": "1.5"},
		{"KVIKIO_HTTP_STATUS_CODES": "5030"},
		{"KVIKIO_HTTP_STATUS_CODES": "503,,429"},
		{"KVIKIO_HTTP_STATUS_CODES": "+50"},
		{"KVIKIO_HTTP_STATUS_CODES": "abc"},
		{"KVIKIO_TASK_SIZE": "1.5"},
		{"KVIKIO_GDS_THRESHOLD": "-1"},
		{"KVIKIO_BOUNCE_BUFFER_SIZE": "0"},
		{"KVIKIO_BOUNCE_BUFFER_SIZE": " "},
		{"KVIKIO_AUTO_DIRECT_IO_READ": "maybe"},
		{"KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD": "2x"},
		{"KVIKIO_AUTO_DIRECT_IO_WRITE": ""},
		{"KVIKIO_THREAD_POOL_PER_BLOCK_DEVICE": "nope"},
		{"KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS": "-1"},
		{"KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS": "many"},
		{"KVIKIO_REMOTE_VERBOSE": "loud"},
		{"KVIKIO_WEBHDFS_USERNAME": ""},
		{"KVIKIO_LOG_LEVEL": "verbose"},
		{"KVIKIO_LOG_LEVEL": "WARNING"},
		{"KVIKIO_LOG_LEVEL": " "},
		{"KVIKIO_LOG_FILE": ""},
		{"KVIKIO_REMOTE_IO_BACKEND": "curl"},
		{"KVIKIO_REMOTE_IO_BACKEND": ""},
		{"KVIKIO_REMOTE_IO_NUM_REACTORS": "0"},
		{"KVIKIO_REMOTE_IO_NUM_REACTORS": "two"},
		{"KVIKIO_REMOTE_IO_REACTOR_DISPATCH": "round_robin"},
		{"KVIK_NUMA_PLACEMENT": "on"},
		{"KVIK_NUMA_PLACEMENT": ""},
	}
	for _, env := range bad {
		_, _, err := defaultsFrom(lookupIn(env))
		if !errors.Is(err, ErrBadEnv) {
			t.Fatalf("%v: err = %v, want ErrBadEnv", env, err)
		}
		for k := range env {
			if !strings.Contains(err.Error(), k) {
				t.Fatalf("%v: error %q does not name the variable", env, err)
			}
		}
	}
}

func TestParseBoolAndCompat(t *testing.T) {
	for s, want := range map[string]bool{"1": true, "0": false, "-3": true, "TRUE": true, " on": true, "Yes": true, "false": false, "OFF ": false, "no": false} {
		if got, err := ParseBool(s); err != nil || got != want {
			t.Fatalf("ParseBool(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "y", "truee", "1.0"} {
		if _, err := ParseBool(s); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("ParseBool(%q): %v", s, err)
		}
	}
	for s, want := range map[string]CompatMode{"on": CompatOn, "TRUE": CompatOn, "yes": CompatOn, "1": CompatOn, " off": CompatOff, "False": CompatOff, "NO": CompatOff, "0": CompatOff, "Auto ": CompatAuto} {
		if got, err := ParseCompatMode(s); err != nil || got != want {
			t.Fatalf("ParseCompatMode(%q) = %v, %v", s, got, err)
		}
		if m, _ := ParseCompatMode(want.String()); m != want {
			t.Fatalf("String round trip of %v", want)
		}
	}
	if _, err := ParseCompatMode("2"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ParseCompatMode(2): %v", err)
	}
}

func TestSetDefaultsRestoresAndResizes(t *testing.T) {
	before, err := GetDefaults()
	if err != nil {
		t.Skipf("environment holds bad KVIKIO_* values: %v", err)
	}
	p := poolFor(before, "")
	restore, err := UpdateDefaults(func(d *Defaults) { d.NumThreads = 13; d.TaskSize = 1 << 10 })
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := GetDefaults(); d.NumThreads != 13 || d.TaskSize != 1<<10 || p.Limit() != 13 {
		t.Fatalf("after set: %+v, pool limit %d", d, p.Limit())
	}
	for _, s := range Settings() {
		if (s.Name == "NumThreads" || s.Name == "TaskSize") != (s.Source == "set") {
			t.Fatalf("setting %+v has the wrong source", s)
		}
	}
	restore()
	if d, _ := GetDefaults(); d != before || p.Limit() != before.NumThreads {
		t.Fatalf("after restore: %+v, pool limit %d", d, p.Limit())
	}
	if _, err := SetDefaults(Defaults{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("zero Defaults accepted: %v", err)
	}
}

func TestParseOpenFlags(t *testing.T) {
	for _, f := range []string{"r", "rb", "r+", "r+b", "rb+", "w", "wb", "w+", "w+b"} {
		if _, err := ParseOpenFlags(f); err != nil {
			t.Fatalf("%q: %v", f, err)
		}
	}
}

func FuzzParseOpenFlags(f *testing.F) {
	for _, s := range []string{"r", "r+", "w", "w+", "rb", "a", "", "bb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flag, err := ParseOpenFlags(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%q: untyped error %v", s, err)
			}
			return
		}
		clean := s[:1] + strings.ReplaceAll(s[1:], "b", "")
		if clean != "r" && clean != "r+" && clean != "w" && clean != "w+" {
			t.Fatalf("%q accepted as %#x", s, flag)
		}
	})
}

func FuzzDefaultsFromEnv(f *testing.F) {
	f.Add("KVIKIO_NTHREADS", "4")
	f.Add("KVIKIO_COMPAT_MODE", "auto")
	f.Add("KVIKIO_AUTO_DIRECT_IO_READ", "yes")
	f.Fuzz(func(t *testing.T, k, v string) {
		d, _, err := defaultsFrom(lookupIn(map[string]string{k: v}))
		if err != nil {
			if !errors.Is(err, ErrBadEnv) {
				t.Fatalf("%s=%q: untyped error %v", k, v, err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("%s=%q gave invalid defaults %+v: %v", k, v, d, err)
		}
	})
}

// KVIKIO_AUTO_DIRECT_IO_READ shows as "unset" when it is, as the docs
// give its default: "false" is what KVIKIO_AUTO_DIRECT_IO_READ=0 means
// (never O_DIRECT), not what an unset variable does.
func TestDefaultsAutoDirectIOReadUnset(t *testing.T) {
	value := func(env map[string]string) string {
		t.Helper()
		_, s, err := defaultsFrom(lookupIn(env))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range s {
			if x.Env == "KVIKIO_AUTO_DIRECT_IO_READ" {
				return x.Value + " (" + x.Source + ")"
			}
		}
		t.Fatal("no KVIKIO_AUTO_DIRECT_IO_READ setting")
		return ""
	}
	for env, want := range map[string]string{"": "unset (built-in)", "0": "false (env)", "1": "true (env)"} {
		m := map[string]string{}
		if env != "" {
			m["KVIKIO_AUTO_DIRECT_IO_READ"] = env
		}
		if got := value(m); got != want {
			t.Errorf("KVIKIO_AUTO_DIRECT_IO_READ=%q shows %q, want %q", env, got, want)
		}
	}
}
