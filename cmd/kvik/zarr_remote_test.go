package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/zarr"
)

// zarrsHierarchy returns a copy of the zarrs fixtures with a group
// document of both formats in each directory above an array, so that
// every array is in the hierarchy (zarr.ArrayPaths, like zarr-python,
// lists none under a plain directory).
func zarrsHierarchy(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "zarr", "testdata", "zarrs")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "v2", "v3", "v3_zarr_python", "sharded_array_write_read.zarr"} {
		for k, doc := range map[string]string{".zgroup": `{"zarr_format": 2}`, "zarr.json": `{"zarr_format": 3, "node_type": "group", "attributes": {}}`} {
			if err := os.WriteFile(filepath.Join(dst, d, k), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

// TestZarrCpInfoBenchS3 copies a local Zarr store of the zarrs fixtures
// to S3 (versitygw), describes it with kvik info, copies an array from
// S3 into a .npy file and back into a local store, and benchmarks an
// array; each result is checked against the local reads.
func TestZarrCpInfoBenchS3(t *testing.T) {
	srv := s3test.Start(t)
	env := []string{"AWS_ACCESS_KEY_ID=" + s3test.Key, "AWS_SECRET_ACCESS_KEY=" + s3test.Secret,
		"AWS_DEFAULT_REGION=" + s3test.Region, "AWS_ENDPOINT_URL=" + srv.URL}
	local := zarrsHierarchy(t)
	url := srv.URLOf("copy.zarr")
	r := runKvik(t, env, "cp", local, url).expect(t, 0)
	if !strings.Contains(r.stdout, "verified") {
		t.Errorf("cp output: %s", r.stdout)
	}
	r = runKvik(t, env, "info", "--json", url).expect(t, 0)
	var info zarrStoreInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.Endpoint != "S3" || len(info.Arrays) < 15 {
		t.Fatalf("info --json: %v %+v\n%s", err, info, r.stdout)
	}
	runKvik(t, env, "info", url).expect(t, 0)
	arr := "v3/array_zstd.zarr"
	ls, _ := zarr.NewDirStore(local)
	a, err := zarr.Open(context.Background(), ls, arr)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 10*10*4)
	if err := a.ReadRegion(context.Background(), []int{0, 0}, []int{10, 10}, want); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "a.npy")
	if r := runKvik(t, env, "cp", url+"/"+arr, out).expect(t, 0); !strings.Contains(r.stdout, ", verified, CRC-32C") {
		t.Errorf("the copy's line:\n%s", r.stdout)
	}
	// Unverified, the line says so (it said "verified" before).
	unchecked := filepath.Join(t.TempDir(), "u.npy")
	if r := runKvik(t, env, "cp", "--verify=false", url+"/"+arr, unchecked).expect(t, 0); !strings.Contains(r.stdout, ", not verified, CRC-32C") {
		t.Errorf("an unverified copy's line:\n%s", r.stdout)
	}
	got, err := npy.LoadHost(context.Background(), out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if !bytes.Equal(got.Data, want) || got.Header.Dtype != npy.Float32 {
		t.Fatalf("npy %v differs from the array", got.Header)
	}
	back := filepath.Join(t.TempDir(), "back.zarr")
	runKvik(t, env, "cp", url, back).expect(t, 0)
	for _, k := range []string{"v3/array_zstd.zarr/zarr.json", "sharded_array_write_read.zarr/group/array/c/1/0"} {
		a, _ := os.ReadFile(filepath.Join(local, k))
		b, _ := os.ReadFile(filepath.Join(back, k))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("%s differs after the round trip", k)
		}
	}
	r = runKvik(t, env, "bench", "--url", url+"/"+arr, "--repeats", "1").expect(t, 0)
	if !strings.Contains(r.stdout, "kvik region -> host") || !strings.Contains(r.stdout, "one chunk at a time") {
		t.Errorf("bench output: %s", r.stdout)
	}
	runKvik(t, env, "cp", url+"/missing.zarr", out).expect(t, exitFailure).oneLineError(t, "404")

	// The sharded array through a store of 3 requests reading whole
	// shards (zarr.WithMaxRequests, zarr.WithWholeShards).
	sharded := "sharded_array_write_read.zarr/group/array"
	sa, err := zarr.Open(context.Background(), ls, sharded)
	if err != nil {
		t.Fatal(err)
	}
	want = make([]byte, sa.DataType().Size*numElems(sa.Shape()))
	if err := sa.ReadRegion(context.Background(), make([]int, len(sa.Shape())), sa.Shape(), want); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "sharded.npy")
	runKvik(t, env, "cp", "--whole-shards", "--requests", "3", url+"/"+sharded, out2).expect(t, 0)
	got2, err := npy.LoadHost(context.Background(), out2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer got2.Close()
	if !bytes.Equal(got2.Data, want) {
		t.Fatal("the sharded array read whole-shard differs from the local read")
	}
	r = runKvik(t, env, "bench", "--url", url+"/"+sharded, "--whole-shards", "--requests", "5", "--repeats", "1").expect(t, 0)
	if !strings.Contains(r.stdout, "5 requests in flight, whole shards") {
		t.Errorf("bench --whole-shards output: %s", r.stdout)
	}
}

// TestZarrFlagsUsage checks that the Zarr store flags of kvik cp and
// kvik bench are refused where they would do nothing, and with a
// negative count, as usage errors.
func TestZarrFlagsUsage(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin")
	if err := os.WriteFile(a, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"cp", "--whole-shards", a, b},
		{"cp", "--requests", "4", a, b},
		{"cp", "--requests", "-1", a, filepath.Join(dir, "x.zarr")},
		{"bench", "--whole-shards", "--file", a},
		{"bench", "--requests", "8", "--url", "s3://bkt/model.safetensors"},
		{"bench", "--requests", "-2", "--url", "s3://bkt/x.zarr/a"},
	} {
		runKvik(t, nil, args...).expect(t, exitUsage)
	}
	if _, err := os.Stat(b); err == nil {
		t.Error("a refused cp wrote its destination")
	}
}
