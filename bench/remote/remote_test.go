package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	tm "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvikgo/kvik"
)

const (
	key, secret, region, bucket = "testkey", "testsecret", "us-east-1", "bkt"
)

// server starts versitygw (KVIK_TEST_VERSITYGW or PATH) on a free
// loopback port with one bucket holding obj.bin of size random bytes.
func server(b *testing.B, size int) (url string, data []byte) {
	url, dir := startServer(b)
	data = randomData(size)
	if err := os.WriteFile(filepath.Join(dir, bucket, "obj.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	return url, data
}

// randomData returns size random bytes, the same ones each time.
func randomData(size int) []byte {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < size; i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, size); j++ {
			data[j] = byte(v)
			v >>= 8
		}
	}
	return data
}

// startServer starts versitygw (KVIK_TEST_VERSITYGW or PATH) on a free
// loopback port with an empty bucket, serving from dir (TMPDIR).
func startServer(b *testing.B) (url, dir string) {
	bin := os.Getenv("KVIK_TEST_VERSITYGW")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("versitygw"); err != nil {
			b.Skip("needs versitygw: set KVIK_TEST_VERSITYGW")
		}
	}
	dir = b.TempDir()
	os.Mkdir(filepath.Join(dir, bucket), 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--port", addr, "--keep-alive", "posix", dir) // as S3 servers do: versitygw closes each connection by default
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+key, "ROOT_SECRET_KEY="+secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("versitygw did not start")
		}
	}
	return "http://" + addr, dir
}

// writerAt collects the transfer manager's parts (disjoint ranges, so
// concurrent writes need no lock).
type writerAt struct {
	buf []byte
}

func (w *writerAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(w.buf)) {
		return 0, fmt.Errorf("write of %d bytes at %d outside the buffer", len(p), off)
	}
	return copy(w.buf[off:], p), nil
}

// BenchmarkS3Read compares, in one run on one server: kvik's parallel
// ranged GETs, one SDK GetObject stream, and the SDK transfer manager's
// concurrent ranged downloader with kvik's concurrency and part size.
// All read into one buffer. An untimed round first faults the buffer in,
// opens the connections and checks each path's bytes; then the paths take
// turns round after round (each round starting with the next path), each
// timing its read only. Per path it reports the median and best GB/s, and
// kvik's speed against each SDK path as the median over rounds of the
// ratio within a round:
//
//	KVIK_BENCH_REMOTE_SIZE=1073741824 go test -run '^$' -bench S3Read -benchtime 9x
func BenchmarkS3Read(b *testing.B) {
	size := objectSize()
	url, data := server(b, size)
	conc, part := workers(b)
	b.Logf("object %d bytes, concurrency %d, part/task size %d", size, conc, part)
	client := sdkClient(url, conc)
	mgr := downloader(client, conc, part)
	ctx := context.Background()
	h := openObject(b, url)
	buf := make([]byte, size)
	paths := []readPath{
		{"kvik", func() error {
			n, err := h.ReadAt(buf, 0)
			if err == nil && n != size {
				err = fmt.Errorf("read %d of %d bytes", n, size)
			}
			return err
		}},
		{"sdk-getobject", func() error {
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj.bin")})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			_, err = io.ReadFull(out.Body, buf)
			return err
		}},
		{"sdk-transfermanager", func() error {
			_, err := mgr.DownloadObject(ctx, &tm.DownloadObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj.bin"), WriterAt: &writerAt{buf: buf}})
			return err
		}},
	}
	for _, p := range paths {
		clear(buf)
		if err := p.read(); err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
		if !bytes.Equal(buf, data) {
			b.Fatalf("%s: downloaded bytes differ from the object", p.name)
		}
	}
	secs := takeTurns(b, paths, size)
	if !bytes.Equal(buf, data) {
		b.Fatal("downloaded bytes differ from the object")
	}
	reportTurns(b, paths, secs, size)
}

// readPath is one way of reading the benchmark's object.
type readPath struct {
	name string
	read func() error
}

// takeTurns times the paths' reads of size bytes round after round, each
// round starting with the next path, and returns each path's seconds.
func takeTurns(b *testing.B, paths []readPath, size int) [][]float64 {
	b.SetBytes(int64(size) * int64(len(paths)))
	secs := make([][]float64, len(paths))
	for round := 0; b.Loop(); round++ {
		for k := range paths {
			j := (k + round) % len(paths)
			start := time.Now()
			if err := paths[j].read(); err != nil {
				b.Fatalf("%s: %v", paths[j].name, err)
			}
			secs[j] = append(secs[j], time.Since(start).Seconds())
		}
	}
	return secs
}

// reportTurns reports each path's median and best GB/s, and the first
// path's speed against each other path's: the median over rounds of the
// ratio of their times within a round.
func reportTurns(b *testing.B, paths []readPath, secs [][]float64, size int) {
	gb := float64(size) / 1e9
	for i, p := range paths {
		b.ReportMetric(gb/median(secs[i]), p.name+"-GB/s")
		b.ReportMetric(gb/slices.Min(secs[i]), p.name+"-best-GB/s")
		if i > 0 {
			ratios := make([]float64, len(secs[0]))
			for r := range ratios {
				ratios[r] = secs[i][r] / secs[0][r]
			}
			b.ReportMetric(median(ratios), paths[0].name+"/"+p.name)
		}
	}
}

// workers returns kvik's worker count and task size, which the SDK's
// paths are given as their concurrency and part size.
func workers(b *testing.B) (conc, part int) {
	d, err := kvik.GetDefaults()
	if err != nil {
		b.Fatal(err)
	}
	return d.NumThreads, d.TaskSize
}

// openObject opens the benchmark's object on the server at url with kvik,
// until the benchmark ends.
func openObject(b *testing.B, url string) *kvik.RemoteHandle {
	h, err := kvik.OpenRemote(context.Background(), "s3://"+bucket+"/obj.bin", kvik.WithS3Endpoint(url),
		kvik.WithS3Region(region), kvik.WithS3Credentials(key, secret, ""))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

// downloader is the SDK transfer manager's concurrent ranged downloader
// with kvik's concurrency and part size, checksums off as kvik's reads.
func downloader(client *s3.Client, conc, part int) *tm.Client {
	return tm.New(client, func(o *tm.Options) {
		o.Concurrency = conc
		o.PartSizeBytes = int64(part)
		o.GetObjectType = tmtypes.GetObjectRanges
		o.DisableChecksumValidation = true
	})
}

// objectSize is KVIK_BENCH_REMOTE_SIZE, the benchmarks' object size in
// bytes, default 1 GiB.
func objectSize() int {
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_REMOTE_SIZE")); err == nil && n > 0 {
		return n
	}
	return 1 << 30
}

// median returns the middle value of v (the mean of the two middle ones
// for an even count).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
