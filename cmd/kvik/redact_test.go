package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/redacttest"
)

// TestCLIRedaction runs kvik info (plain and --json), kvik cp (from and
// to the URL) and kvik bench --url, logging every request, with URLs that
// carry a password, a presigned signature, credential and token, a sig=
// or S3 credentials from the environment, against a server that refuses
// them (403, 500) echoing every secret, serves junk, or is not there:
// neither stdout nor stderr may hold a secret or its first bytes.
func TestCLIRedaction(t *testing.T) {
	all := redacttest.NewSecrets()
	srv := redacttest.NewServer(t, all)
	env := append(all.Env(srv), "KVIKIO_HTTP_MAX_ATTEMPTS=1")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(src, []byte("0123456789abcdef0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, suffix := range []string{"dir/model.safetensors", "dir/blob.bin", "dir/s.zarr"} {
		for _, u := range srv.URLs(suffix) {
			sec := all.For(u)
			for _, args := range [][]string{
				{"info", u},
				{"info", "--json", u},
				{"cp", u, filepath.Join(dir, "dst.bin")},
				{"cp", "--memory", "host", src, u},
				{"bench", "--url", u, "--memory", "host"},
			} {
				args = append(args, "--log-level", "TRACE")
				r := runKvik(t, env, args...)
				runs++
				sec.Check(t, "stdout of kvik "+args[0]+" "+kvik.RedactURL(u), r.stdout)
				sec.Check(t, "stderr of kvik "+args[0]+" "+kvik.RedactURL(u), r.stderr)
			}
		}
	}
	t.Logf("%d runs", runs)
}
