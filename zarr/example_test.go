package zarr_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"time"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/zarr"
)

// ExampleDelete replaces an array: Create refuses a path that holds one
// (its chunks would read as the new array's), Delete frees it.
func ExampleDelete() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	m := zarr.Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 1}}
	a, err := zarr.Create(ctx, s, "counts", m)
	if err != nil {
		log.Fatal(err)
	}
	if err := a.WriteRegion(ctx, []int{0}, []int{4}, []byte{1, 2, 3, 4}); err != nil {
		log.Fatal(err)
	}
	m.FillValue = 9
	_, err = zarr.Create(ctx, s, "counts", m)
	fmt.Println("over the old array:", errors.Is(err, zarr.ErrExists))
	if err := zarr.Delete(ctx, s, "counts"); err != nil {
		log.Fatal(err)
	}
	if a, err = zarr.Create(ctx, s, "counts", m); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 4)
	if err := a.ReadRegion(ctx, []int{0}, []int{4}, got); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Delete:", got)
	// Output:
	// over the old array: true
	// after Delete: [9 9 9 9]
}

// ExampleCreate creates a zstd-compressed v3 array, writes it from host
// memory and reads a region back.
func ExampleCreate() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	f32 := zarr.DataType{Kind: zarr.Float, Size: 4}
	a, err := zarr.Create(ctx, s, "temperature", zarr.Metadata{
		Shape: []int{4, 6}, ChunkShape: []int{2, 4}, DataType: f32, FillValue: "NaN",
		Codecs: []zarr.Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	data := make([]byte, 0, 4*6*4)
	for i := 0; i < 24; i++ {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)/2))
	}
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{4, 6}, data); err != nil {
		log.Fatal(err)
	}
	region := make([]byte, 2*3*4)
	if err := a.ReadRegion(ctx, []int{1, 2}, []int{3, 5}, region); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(region[4*i:])), " ")
	}
	fmt.Println()
	// Output: 4 4.5 5 7 7.5 8
}

// ExampleOpenURL reads a region of an array over HTTP: here a store
// served from a local directory on loopback; an s3:// URL works the same
// way (with credentials from AWS_* or zarr.WithRemoteOptions).
func ExampleOpenURL() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	local, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	i16 := zarr.DataType{Kind: zarr.Int, Size: 2}
	a, err := zarr.Create(ctx, local, "counts", zarr.Metadata{
		Shape: []int{3, 4}, ChunkShape: []int{2, 2}, DataType: i16, FillValue: -1,
		Codecs: []zarr.Codec{{Name: "bytes"}, {Name: "gzip"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Write the first row only: the chunks of the last row stay missing.
	row := []byte{1, 0, 2, 0, 3, 0, 4, 0}
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{1, 4}, row); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	s, err := zarr.OpenURL(ctx, srv.URL) // a read-only HTTP store
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	remote, err := zarr.Open(ctx, s, "counts")
	if err != nil {
		log.Fatal(err)
	}
	region := make([]byte, 3*2*2)
	if err := remote.ReadRegion(ctx, []int{0, 1}, []int{3, 3}, region); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < len(region); i += 2 {
		fmt.Print(int16(binary.LittleEndian.Uint16(region[i:])), " ")
	}
	fmt.Println()
	// Output: 2 3 -1 -1 -1 -1
}

// ExampleConsolidate writes a v3 hierarchy's consolidated metadata into
// its root zarr.json, after which a remote store opens every array from
// that one document.
func ExampleConsolidate() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	// Create also writes the group documents zarr-python needs: the
	// root's and wind's.
	f32 := zarr.DataType{Kind: zarr.Float, Size: 4}
	for _, p := range []string{"temperature", "wind/u", "wind/v"} {
		m := zarr.Metadata{Shape: []int{8, 8}, ChunkShape: []int{4, 4}, DataType: f32}
		if _, err := zarr.Create(ctx, s, p, m); err != nil {
			log.Fatal(err)
		}
	}
	if err := zarr.Consolidate(ctx, s); err != nil {
		log.Fatal(err)
	}
	b, err := s.Get(ctx, "zarr.json", nil)
	if err != nil {
		log.Fatal(err)
	}
	var doc struct {
		Consolidated struct {
			Kind     string                     `json:"kind"`
			Metadata map[string]json.RawMessage `json:"metadata"`
		} `json:"consolidated_metadata"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		log.Fatal(err)
	}
	fmt.Println(doc.Consolidated.Kind, slices.Sorted(maps.Keys(doc.Consolidated.Metadata)))

	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	remote, err := zarr.OpenURL(ctx, srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer remote.Close()
	paths, err := zarr.ArrayPaths(ctx, remote) // no listing over HTTP: from zarr.json
	fmt.Println(remote.Consolidated(), paths, err)
	// Output:
	// inline [temperature wind wind/u wind/v]
	// true [temperature wind/u wind/v] <nil>
}

// ExampleWithWholeShards reads a sharded array over HTTP through a store
// that asks for each shard it wants all of with one GET of the whole
// object (for servers that send whole objects faster than parts).
func ExampleWithWholeShards() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	local, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	u8 := zarr.DataType{Kind: zarr.Uint, Size: 1}
	a, err := zarr.Create(ctx, local, "img", zarr.Metadata{
		Shape: []int{4, 8}, ChunkShape: []int{4, 4}, DataType: u8,
		Codecs: []zarr.Codec{{Name: "sharding_indexed", Configuration: map[string]any{
			"chunk_shape": []int{2, 2}, "codecs": []zarr.Codec{{Name: "bytes"}},
		}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	pixels := make([]byte, 4*8)
	for i := range pixels {
		pixels[i] = byte(i)
	}
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{4, 8}, pixels); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	s, err := zarr.OpenURL(ctx, srv.URL, zarr.WithWholeShards())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	remote, err := zarr.Open(ctx, s, "img")
	if err != nil {
		log.Fatal(err)
	}
	right := make([]byte, 4*4) // the second shard, whole
	if err := remote.ReadRegion(ctx, []int{0, 4}, []int{4, 8}, right); err != nil {
		log.Fatal(err)
	}
	fmt.Println(right)
	// Output: [4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31]
}

// ExampleWithProcessLocks writes the two halves of one chunk at once
// through two stores opened on one directory with WithProcessLocks, as
// two processes would: each write of the chunk holds its lock file, so
// neither half is lost.
func ExampleWithProcessLocks() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	m := zarr.Metadata{Shape: []int{8}, ChunkShape: []int{8}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 1}}
	open := func() *zarr.Array {
		s, err := zarr.NewDirStore(dir, zarr.WithProcessLocks())
		if err != nil {
			log.Fatal(err)
		}
		a, err := zarr.Open(ctx, s, "counts")
		if err != nil {
			log.Fatal(err)
		}
		return a
	}
	s, err := zarr.NewDirStore(dir, zarr.WithProcessLocks())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := zarr.Create(ctx, s, "counts", m); err != nil {
		log.Fatal(err)
	}
	done := make(chan error)
	for half := range 2 {
		go func() {
			a := open()
			v := []byte{1, 1, 1, 1}
			if half == 1 {
				v = []byte{2, 2, 2, 2}
			}
			done <- a.WriteRegion(ctx, []int{4 * half}, []int{4*half + 4}, v)
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
	got := make([]byte, 8)
	if err := open().ReadRegion(ctx, []int{0}, []int{8}, got); err != nil {
		log.Fatal(err)
	}
	fmt.Println(got)
	// Output: [1 1 1 1 2 2 2 2]
}

// Example_datetime64 stores times as NumPy's datetime64[s] (int64
// seconds since the Unix epoch, NaT the smallest int64), as zarr-python
// and NumPy read them, and turns them back into Go times.
func Example_datetime64() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	m := zarr.Metadata{Shape: []int{3}, ChunkShape: []int{2}, FillValue: "NaT",
		DataType: zarr.DataType{Kind: zarr.DateTime, Size: 8, Unit: "s"}}
	a, err := zarr.Create(ctx, s, "times", m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.DataType(), a.DataType().NumPy())
	when := []time.Time{time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), time.Unix(0, 0).UTC()}
	src := make([]byte, 8*len(when))
	for i, t := range when {
		binary.LittleEndian.PutUint64(src[8*i:], uint64(t.Unix()))
	}
	if err := a.WriteRegion(ctx, []int{0}, []int{2}, src); err != nil { // the third stays NaT
		log.Fatal(err)
	}
	got := make([]byte, 8*3)
	if err := a.ReadRegion(ctx, []int{0}, []int{3}, got); err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		v := int64(binary.LittleEndian.Uint64(got[8*i:]))
		if v == math.MinInt64 {
			fmt.Println("NaT")
			continue
		}
		fmt.Println(time.Unix(v, 0).UTC().Format(time.RFC3339))
	}
	// Output:
	// numpy.datetime64[s] <M8[s]
	// 2026-11-29T12:00:00Z
	// 1970-01-01T00:00:00Z
	// NaT
}

// Example_strings writes and reads an array of fixed-length Unicode
// strings (NumPy's <U6): DataType.AppendStrings makes a region's bytes,
// DataType.Strings reads them back; what was not written is the fill.
func Example_strings() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	m := zarr.Metadata{ZarrFormat: 2, Shape: []int{4}, ChunkShape: []int{2}, FillValue: "?",
		DataType: zarr.DataType{Kind: zarr.Unicode, Size: 6 * 4}}
	a, err := zarr.Create(ctx, s, "names", m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.DataType(), a.DataType().NumPy())
	_, err = a.DataType().AppendStrings(nil, "Neuchâtel")
	fmt.Println(err) // 9 code points
	src, err := a.DataType().AppendStrings(nil, "Zürich", "Genève", "Bern")
	if err != nil {
		log.Fatal(err)
	}
	if err := a.WriteRegion(ctx, []int{0}, []int{3}, src); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 4*a.DataType().Size)
	if err := a.ReadRegion(ctx, []int{0}, []int{4}, got); err != nil {
		log.Fatal(err)
	}
	names, err := a.DataType().Strings(got)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", names)
	// Output:
	// fixed_length_utf32[24] <U6
	// zarr: invalid region: string 0 (10 bytes) does not fit a fixed_length_utf32[24] element
	// ["Zürich" "Genève" "Bern" "?"]
}

// ExampleArray_ReadStrings keeps variable-length strings, as xarray
// stores its string variables: written as Go strings, chunk by chunk in
// numcodecs' framing under zstd, and read back in any region.
func ExampleArray_ReadStrings() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	a, err := zarr.Create(ctx, s, "stations", zarr.Metadata{
		Shape: []int{2, 3}, ChunkShape: []int{1, 2}, FillValue: "?",
		DataType: zarr.DataType{Kind: zarr.VarString},
		Codecs:   []zarr.Codec{{Name: "vlen-utf8"}, {Name: "zstd"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.DataType(), a.DataType().NumPy(), a.DataType().Variable())
	if err := a.WriteStrings(ctx, []int{0, 0}, []int{1, 3}, []string{"Neuchâtel", "Zürich", "Genève"}); err != nil {
		log.Fatal(err)
	}
	names, err := a.ReadStrings(ctx, []int{0, 1}, []int{2, 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", names)
	err = a.ReadRegion(ctx, []int{0, 0}, []int{1, 1}, nil)
	fmt.Println(errors.Is(err, zarr.ErrUnsupportedDataType))
	// Output:
	// string |O true
	// ["Zürich" "Genève" "?" "?"]
	// true
}

// ExampleWithoutSync writes scratch data to a disk at the pace of the page
// cache: each chunk still replaced atomically, none synced.
func ExampleWithoutSync() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir, zarr.WithoutSync())
	if err != nil {
		log.Fatal(err)
	}
	m := zarr.Metadata{Shape: []int{6, 4}, ChunkShape: []int{2, 4}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 2},
		Codecs: []zarr.Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}}
	a, err := zarr.Create(ctx, s, "scratch", m)
	if err != nil {
		log.Fatal(err)
	}
	src := make([]byte, 6*4*2)
	for i := range 6 * 4 {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(i*i))
	}
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{6, 4}, src); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 4*2)
	if err := a.ReadRegion(ctx, []int{5, 0}, []int{6, 4}, got); err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		fmt.Print(binary.LittleEndian.Uint16(got[2*i:]), " ")
	}
	fmt.Println()
	// Output: 400 441 484 529
}

// ExampleArray_AppendEncodedChunk encodes chunks for a transport of the
// caller's own, one buffer reused for every chunk, and decodes one back.
func ExampleArray_AppendEncodedChunk() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	blosc := zarr.Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}
	a, err := zarr.Create(ctx, s, "a", zarr.Metadata{
		Shape: []int{4096}, ChunkShape: []int{1024}, DataType: zarr.DataType{Kind: zarr.Float, Size: 4},
		Codecs: []zarr.Codec{{Name: "bytes"}, blosc},
	})
	if err != nil {
		log.Fatal(err)
	}
	chunk := make([]byte, 1024*4)
	var buf []byte // grows once, then is reused
	for c := 0; c < 4; c++ {
		for i := 0; i < 1024; i++ {
			binary.LittleEndian.PutUint32(chunk[4*i:], math.Float32bits(float32(c*1024+i)))
		}
		if buf, err = a.AppendEncodedChunk(buf[:0], chunk); err != nil {
			log.Fatal(err)
		}
		// buf would go on its way here; instead it is decoded back.
		back := make([]byte, len(chunk))
		if err := a.DecodeChunk(buf, back); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("chunk %d: %v, %t\n", c, len(buf) < len(chunk), bytes.Equal(back, chunk))
	}
	// Output:
	// chunk 0: true, true
	// chunk 1: true, true
	// chunk 2: true, true
	// chunk 3: true, true
}

// ExampleArray_SetWriteEmptyChunks writes a sparse array: chunks all of
// the fill value take no room, and one that becomes so is deleted.
func ExampleArray_SetWriteEmptyChunks() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	a, err := zarr.Create(ctx, s, "mask", zarr.Metadata{
		Shape: []int{4, 4}, ChunkShape: []int{2, 2},
		DataType: zarr.DataType{Kind: zarr.Uint, Size: 1},
		Codecs:   []zarr.Codec{{Name: "bytes"}, {Name: "zstd"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	chunks := func() []string {
		keys, err := s.List(ctx, "mask/c/")
		if err != nil {
			log.Fatal(err)
		}
		return keys
	}
	mask := make([]byte, 16)
	mask[5] = 1 // element (1, 1): chunk (0, 0)
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{4, 4}, mask); err != nil {
		log.Fatal(err)
	}
	fmt.Println(chunks())
	if err := a.WriteRegion(ctx, []int{1, 1}, []int{2, 2}, []byte{0}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(chunks())
	a.SetWriteEmptyChunks(true) // as zarr-python 2: every chunk written
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{4, 4}, make([]byte, 16)); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(chunks()))
	// Output:
	// [mask/c/0/0]
	// []
	// 4
}

// ExampleArray_Append grows a time series as its rows arrive, and
// shrinks it back: the cut rows read as the fill value when it grows
// again.
func ExampleArray_Append() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "zarr-example")
	defer os.RemoveAll(dir)
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	a, err := zarr.Create(ctx, s, "series", zarr.Metadata{
		Shape: []int{0, 2}, ChunkShape: []int{4, 2}, FillValue: 255,
		DataType: zarr.DataType{Kind: zarr.Uint, Size: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, rows := range [][]byte{{1, 2}, {3, 4, 5, 6, 7, 8}} {
		if err := a.Append(ctx, 0, rows); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(a.Shape())
	if err := a.Resize(ctx, []int{1, 2}); err != nil {
		log.Fatal(err)
	}
	if err := a.Resize(ctx, []int{3, 2}); err != nil {
		log.Fatal(err)
	}
	all := make([]byte, 6)
	if err := a.ReadRegion(ctx, []int{0, 0}, []int{3, 2}, all); err != nil {
		log.Fatal(err)
	}
	fmt.Println(all)
	// Output:
	// [4 2]
	// [1 2 255 255 255 255]
}

// ExampleArray_SetGPUEncode saves a float32 field from GPU memory as a
// Blosc LZ4 array: WriteRegionDevice has the GPU encode the whole chunks
// it covers (32 MiB of them or more), which the cores then store;
// SetGPUEncode(false) would encode them on the CPU after a copy to host
// memory. It needs a GPU, so it is compiled but not run by go test.
func ExampleArray_SetGPUEncode() {
	if err := cuda.Init(); err != nil {
		log.Fatal(err) // errors.Is(err, cuda.ErrLibraryNotFound) without a driver
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		log.Fatal(err)
	}
	gpu, err := dev.PrimaryCtxRetain()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.PrimaryCtxRelease()

	const rows, cols = 8192, 8192 // 256 MiB of float32
	var field *cuda.DeviceBuffer
	if err := cuda.WithContext(gpu, func() (err error) {
		field, err = cuda.MemAlloc(4 * rows * cols) // filled by the caller's kernels
		return err
	}); err != nil {
		log.Fatal(err)
	}
	defer field.Close()

	ctx := context.Background()
	s, err := zarr.NewDirStore("/dev/shm/fields")
	if err != nil {
		log.Fatal(err)
	}
	a, err := zarr.Create(ctx, s, "t", zarr.Metadata{
		Shape: []int{rows, cols}, ChunkShape: []int{512, 512}, // 1 MiB chunks
		DataType: zarr.DataType{Kind: zarr.Float, Size: 4},
		Codecs: []zarr.Codec{
			{Name: "bytes", Configuration: map[string]any{"endian": "little"}},
			{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := a.WriteRegionDevice(ctx, []int{0, 0}, []int{rows, cols}, field.Ptr()); err != nil {
		log.Fatal(err)
	}
}

// ExampleArray_SetEncodeDevice saves a field that lies in host memory
// as Blosc LZ4 chunks, GPU 0 encoding them while the cores gather and
// store; on a machine without a CUDA driver the same code encodes on the
// cores.
func ExampleArray_SetEncodeDevice() {
	const rows, cols = 8192, 8192      // 256 MiB of float32
	field := make([]byte, 4*rows*cols) // filled by the caller

	ctx := context.Background()
	s, err := zarr.NewDirStore("/dev/shm/fields")
	if err != nil {
		log.Fatal(err)
	}
	a, err := zarr.Create(ctx, s, "h", zarr.Metadata{
		Shape: []int{rows, cols}, ChunkShape: []int{512, 512}, // 1 MiB chunks
		DataType: zarr.DataType{Kind: zarr.Float, Size: 4},
		Codecs: []zarr.Codec{
			{Name: "bytes", Configuration: map[string]any{"endian": "little"}},
			{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	a.SetEncodeDevice(0)
	if err := a.WriteRegion(ctx, []int{0, 0}, []int{rows, cols}, field); err != nil {
		log.Fatal(err) // errors.Is(err, cuda.ErrorInvalidDevice) for a GPU the driver does not know
	}
}
