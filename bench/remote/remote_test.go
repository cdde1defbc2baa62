package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
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
	cmd := exec.Command(bin, "--port", addr, "posix", dir)
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

// writerAt collects the transfer manager's parts.
type writerAt struct {
	mu  sync.Mutex
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
	size := 1 << 30
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_REMOTE_SIZE")); err == nil && n > 0 {
		size = n
	}
	url, data := server(b, size)
	d, err := kvik.GetDefaults()
	if err != nil {
		b.Fatal(err)
	}
	conc, part := d.NumThreads, d.TaskSize
	b.Logf("object %d bytes, concurrency %d, part/task size %d", size, conc, part)
	// The SDK gets a transport like kvik's: keep-alive, one idle
	// connection per worker, no compression; checksums only if required.
	client := s3.New(s3.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, nil
		}),
		HTTPClient:                 &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, DisableCompression: true}},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	mgr := tm.New(client, func(o *tm.Options) {
		o.Concurrency = conc
		o.PartSizeBytes = int64(part)
		o.GetObjectType = tmtypes.GetObjectRanges
		o.DisableChecksumValidation = true
	})
	ctx := context.Background()
	h, err := kvik.OpenRemote(ctx, "s3://"+bucket+"/obj.bin", kvik.WithS3Endpoint(url),
		kvik.WithS3Region(region), kvik.WithS3Credentials(key, secret, ""))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, size)
	paths := []struct {
		name string
		read func() error
	}{
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
	if !bytes.Equal(buf, data) {
		b.Fatal("downloaded bytes differ from the object")
	}
	gb := float64(size) / 1e9
	for i, p := range paths {
		b.ReportMetric(gb/median(secs[i]), p.name+"-GB/s")
		b.ReportMetric(gb/slices.Min(secs[i]), p.name+"-best-GB/s")
		if i > 0 {
			ratios := make([]float64, len(secs[0]))
			for r := range ratios {
				ratios[r] = secs[i][r] / secs[0][r]
			}
			b.ReportMetric(median(ratios), "kvik/"+p.name)
		}
	}
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
