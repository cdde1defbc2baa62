package remote

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	tm "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/safetensors"
)

// uploadPath is one way of uploading the benchmark's bytes.
type uploadPath struct {
	name string
	key  string
	run  func() (time.Duration, error) // the upload's own time
	want func(obj []byte) bool         // checks the stored object
}

// BenchmarkS3Upload compares, in one run on one server, uploads of the
// same bytes (KVIK_BENCH_REMOTE_SIZE, default 1 GiB, random) from host
// memory: kvik.UploadS3, kvik.SaveFile of 64 pieces, safetensors.Save of
// 64 tensors, kvik.UploadFileS3 of the bytes written to a file in TMPDIR
// (page cache warm), the CLI (kvik cp FILE s3://..., --verify=false, its own
// upload figure; KVIK_BENCH_CLI names the kvik binary, else the path is
// left out), and the AWS SDK for Go v2 transfer manager with kvik's part
// size and concurrency (KVIKIO_TASK_SIZE, raised to S3's 5 MiB minimum,
// and KVIKIO_NTHREADS). Where a GPU is usable the same bytes also go up
// from device memory: UploadS3Device, SaveFile of device pieces and
// safetensors.Save of device tensors (left out, with the reason logged,
// otherwise). An untimed round first checks every path's object; then
// the paths take turns round after round (each round starting with the
// next path). Per path it reports the median and best GB/s, and per
// path the median over rounds of the SDK's time over the path's time
// within a round (path/sdk, > 1 is faster than the SDK); the CLI also
// against kvik.UploadS3 (cli/kvik: the library's time over the CLI's
// reported upload time). KVIK_BENCH_UPLOAD_PATHS (a comma-separated
// list of names) keeps those paths only, besides kvik and sdk, which
// the ratios need:
//
//	KVIK_BENCH_REMOTE_SIZE=1073741824 KVIK_BENCH_CLI=/path/to/kvik go test -run '^$' -bench S3Upload -benchtime 5x
func BenchmarkS3Upload(b *testing.B) {
	size := objectSize()
	url, dir := startServer(b)
	data := randomData(size)
	d, err := kvik.GetDefaults()
	if err != nil {
		b.Fatal(err)
	}
	conc := d.NumThreads
	part := max(d.TaskSize, 5<<20)
	if need := (size + 9999) / 10000; need > part {
		part = need
	}
	b.Logf("object %d bytes, concurrency %d, part size %d", size, conc, part)
	ctx := context.Background()
	opts := []kvik.RemoteOption{kvik.WithS3Endpoint(url), kvik.WithS3Region(region), kvik.WithS3Credentials(key, secret, "")}
	mgr := tm.New(sdkClient(url, conc), func(o *tm.Options) {
		o.Concurrency = conc
		o.PartSizeBytes = int64(part)
		o.MultipartUploadThreshold = int64(part)
	})
	same := func(obj []byte) bool { return bytes.Equal(obj, data) }
	// The data area of a safetensors file of U8 tensors named in order
	// is the bytes themselves.
	tail := func(obj []byte) bool { return len(obj) > size && bytes.Equal(obj[len(obj)-size:], data) }
	timed := func(f func() error) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			start := time.Now()
			err := f()
			return time.Since(start), err
		}
	}
	const npieces = 64
	var pieces []kvik.Piece
	var tensors []safetensors.SaveTensor
	for i, off := 0, 0; i < npieces; i++ {
		n := size / npieces
		if i == npieces-1 {
			n = size - off
		}
		pieces = append(pieces, kvik.Piece{Data: data[off : off+n]})
		tensors = append(tensors, safetensors.SaveTensor{Name: fmt.Sprintf("t%03d", i), Dtype: "U8", Shape: []int64{int64(n)}, Data: data[off : off+n]})
		off += n
	}
	paths := []uploadPath{
		{"kvik", "kvik.bin", timed(func() error { return kvik.UploadS3(ctx, "s3://"+bucket+"/kvik.bin", data, opts...) }), same},
		{"sdk", "sdk.bin", timed(func() error {
			_, err := mgr.UploadObject(ctx, &tm.UploadObjectInput{Bucket: aws.String(bucket), Key: aws.String("sdk.bin"), Body: bytes.NewReader(data)})
			return err
		}), same},
		{"savefile", "savefile.bin", timed(func() error { return kvik.SaveFile(ctx, "s3://"+bucket+"/savefile.bin", pieces, opts...) }), same},
		{"safetensors", "st.safetensors", timed(func() error {
			return safetensors.Save(ctx, "s3://"+bucket+"/st.safetensors", tensors, nil, opts...)
		}), tail},
	}
	src := filepath.Join(b.TempDir(), "src.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	paths = append(paths, uploadPath{"kvik-file", "kvikfile.bin", timed(func() error { return kvik.UploadFileS3(ctx, "s3://"+bucket+"/kvikfile.bin", src, opts...) }), same})
	if cli := os.Getenv("KVIK_BENCH_CLI"); cli != "" {
		paths = append(paths, uploadPath{"cli", "cli.bin", func() (time.Duration, error) { return runCLI(cli, url, conc, part, src, "s3://"+bucket+"/cli.bin") }, same})
	} else {
		b.Log("cli: left out (set KVIK_BENCH_CLI to the kvik binary)")
	}
	if dev, release, why := deviceCopy(data); why != "" {
		b.Logf("device paths: left out: %s", why)
	} else {
		defer release()
		var dpieces []kvik.Piece
		var dtensors []safetensors.SaveTensor
		for i, p := range pieces {
			dp := kvik.Piece{Ptr: dev + cuda.DevicePtr(int64(i)*int64(size/npieces)), Size: int64(len(p.Data))}
			dpieces = append(dpieces, dp)
			t := tensors[i]
			t.Data, t.Ptr = nil, dp.Ptr
			dtensors = append(dtensors, t)
		}
		paths = append(paths,
			uploadPath{"kvik-device", "kvikdev.bin", timed(func() error { return kvik.UploadS3Device(ctx, "s3://"+bucket+"/kvikdev.bin", dev, size, 0, opts...) }), same},
			uploadPath{"savefile-device", "savefiledev.bin", timed(func() error { return kvik.SaveFile(ctx, "s3://"+bucket+"/savefiledev.bin", dpieces, opts...) }), same},
			uploadPath{"safetensors-device", "stdev.safetensors", timed(func() error {
				return safetensors.Save(ctx, "s3://"+bucket+"/stdev.safetensors", dtensors, nil, opts...)
			}), tail},
		)
	}
	if only := os.Getenv("KVIK_BENCH_UPLOAD_PATHS"); only != "" {
		names := strings.Split(only, ",")
		paths = slices.DeleteFunc(paths, func(p uploadPath) bool {
			return p.name != "kvik" && p.name != "sdk" && !slices.Contains(names, p.name)
		})
	}
	for _, p := range paths {
		if _, err := p.run(); err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
		obj, err := os.ReadFile(filepath.Join(dir, bucket, p.key))
		if err != nil || !p.want(obj) {
			b.Fatalf("%s: the stored object (%d bytes, %v) differs from the bytes uploaded", p.name, len(obj), err)
		}
	}
	b.SetBytes(int64(size) * int64(len(paths)))
	secs := make([][]float64, len(paths))
	for round := 0; b.Loop(); round++ {
		for k := range paths {
			j := (k + round) % len(paths)
			t, err := paths[j].run()
			if err != nil {
				b.Fatalf("%s: %v", paths[j].name, err)
			}
			secs[j] = append(secs[j], t.Seconds())
		}
	}
	gb := float64(size) / 1e9
	ratio := func(num, den int) float64 {
		r := make([]float64, len(secs[num]))
		for i := range r {
			r[i] = secs[num][i] / secs[den][i]
		}
		return median(r)
	}
	for i, p := range paths {
		b.ReportMetric(gb/median(secs[i]), p.name+"-GB/s")
		b.ReportMetric(gb/slices.Min(secs[i]), p.name+"-best-GB/s")
		if p.name != "sdk" {
			b.ReportMetric(ratio(1, i), p.name+"/sdk")
		}
		if p.name == "cli" {
			b.ReportMetric(ratio(0, i), "cli/kvik")
		}
	}
}

// sdkClient returns an S3 client of the SDK with a transport like kvik's:
// keep-alive, conc idle connections, no compression; checksums only
// where required.
func sdkClient(url string, conc int) *s3.Client {
	return s3.New(s3.Options{
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
}

var uploadedIn = regexp.MustCompile(`uploaded in ([0-9.]+) s`)

// runCLI runs kvik cp --verify=false src dst against the server at url
// with kvik's concurrency and part size, and returns the upload time it
// reports.
func runCLI(bin, url string, conc, part int, src, dst string) (time.Duration, error) {
	cmd := exec.Command(bin, "cp", "--verify=false", src, dst)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret,
		"AWS_DEFAULT_REGION="+region, "AWS_ENDPOINT_URL="+url,
		"KVIKIO_NTHREADS="+strconv.Itoa(conc), "KVIKIO_TASK_SIZE="+strconv.Itoa(part))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("kvik cp: %v: %s", err, out)
	}
	m := uploadedIn.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("kvik cp printed no upload time: %s", out)
	}
	s, err := strconv.ParseFloat(string(m[1]), 64)
	return time.Duration(s * float64(time.Second)), err
}

// deviceCopy copies data to new memory on GPU 0; why says why not.
func deviceCopy(data []byte) (ptr cuda.DevicePtr, release func(), why string) {
	if err := cuda.Init(); err != nil {
		return 0, nil, fmt.Sprintf("no CUDA driver: %v", err)
	}
	if n, err := cuda.DeviceGetCount(); err != nil || n == 0 {
		return 0, nil, fmt.Sprintf("no CUDA device (count %d, %v)", n, err)
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		return 0, nil, err.Error()
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		return 0, nil, err.Error()
	}
	var buf *cuda.DeviceBuffer
	err = cuda.WithContext(ctx, func() (err error) {
		if buf, err = cuda.MemAlloc(len(data)); err != nil {
			return err
		}
		return cuda.MemcpyHtoD(buf.Ptr(), data)
	})
	if err != nil {
		if buf != nil {
			cuda.WithContext(ctx, buf.Close)
		}
		dev.PrimaryCtxRelease()
		return 0, nil, err.Error()
	}
	return buf.Ptr(), func() { cuda.WithContext(ctx, buf.Close); dev.PrimaryCtxRelease() }, ""
}
