package zarr

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
)

// FuzzParseMetadata feeds arbitrary documents to both metadata parsers and
// to array construction: errors are fine, panics are not.
func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"zarr_format":2,"shape":[10],"chunks":[3],"dtype":"<f4","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1},"fill_value":"NaN","order":"F","filters":[{"id":"delta","dtype":"<f4"}]}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[8,8],"data_type":"uint16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,8]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[4,4],"codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":5}}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],"index_location":"end"}}]}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"float16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"v2"},"fill_value":"0x7e00","codecs":[{"name":"transpose","configuration":{"order":[0]}},{"name":"bytes"},{"name":"zstd"}]}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[5,3],"chunks":[2,2],"dtype":">M8[10us]","compressor":null,"fill_value":-9223372036854775808,"order":"C","filters":null}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[6],"data_type":{"name":"numpy.timedelta64","configuration":{"unit":"ns","scale_factor":3}},"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default"},"fill_value":"NaT","codecs":[{"name":"bytes","configuration":{"endian":"big"}}]}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[5],"chunks":[2],"dtype":">U3","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1},"fill_value":"h\u00e9","order":"C","filters":null}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[6],"data_type":{"name":"null_terminated_bytes","configuration":{"length_bytes":5}},"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default"},"fill_value":"eno=","codecs":[{"name":"bytes"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &DirStore{root: "/nonexistent", storeConfig: storeConfig{dimSep: "."}}
		if m, err := ParseMetadataV2(b, "."); err == nil {
			newArray(s, "", m)
		}
		if m, err := ParseMetadataV3(b); err == nil {
			newArray(s, "", m)
		}
	})
}

// FuzzShardIndex parses arbitrary shard bytes as indexes and decodes them
// as shards of a small sharded chain.
func FuzzShardIndex(f *testing.F) {
	idx := make([]byte, 0, 36)
	idx = binary.LittleEndian.AppendUint64(idx, 0)
	idx = binary.LittleEndian.AppendUint64(idx, 8)
	idx = binary.LittleEndian.AppendUint64(idx, ^uint64(0))
	idx = binary.LittleEndian.AppendUint64(idx, ^uint64(0))
	seed, _ := crc32cCodec.encode(idx, nil)
	f.Add(append(make([]byte, 8), seed...), false)
	f.Add(append(seed, make([]byte, 8)...), true)
	f.Fuzz(func(t *testing.T, b []byte, start bool) {
		parseShardIndex(b, len(b)/16, len(b)%16 == 4, int64(len(b)))
		for _, crc := range []bool{false, true} {
			ic := []Codec{{Name: "bytes"}}
			if crc {
				ic = append(ic, Codec{Name: "crc32c"})
			}
			s, err := newSharding(map[string]any{"chunk_shape": []int{2}, "codecs": []Codec{{Name: "bytes"}}, "index_codecs": ic,
				"index_location": map[bool]string{true: "start", false: "end"}[start]}, DataType{Kind: Uint, Size: 4}, make([]byte, 4), []int{4})
			if err != nil {
				t.Fatal(err)
			}
			s.decode(b, []int{4})
		}
	})
}

// FuzzBloscDecode decodes arbitrary bytes as Blosc chunks and BloscLZ
// streams; a chunk that decodes must decode the same into rows apart and
// with its blocks left shuffled for the GPU (a block and type size the
// kernel takes, the same bytes once unshuffled), and one that does not
// must fail left shuffled too, never panic.
func FuzzBloscDecode(f *testing.F) {
	// Seeds that compress (a level above 0, data with runs), so that the
	// fuzzer starts from the codecs' streams, not from stored blocks.
	src := make([]byte, 3000)
	for i := range src {
		src[i] = byte(i / 24 * 7)
	}
	for _, c := range []bloscCodec{
		{cname: "lz4", clevel: 5, shuffle: 1, typesize: 4},
		{cname: "lz4", clevel: 9, shuffle: 1, typesize: 4, blocksize: 512},
		{cname: "zstd", clevel: 3, shuffle: 2, typesize: 2, blocksize: 256},
		{cname: "zlib", clevel: 5, shuffle: 1, typesize: 8, blocksize: 1024},
	} {
		enc, err := c.encode(src, nil)
		if err != nil || len(enc) >= len(src) {
			f.Fatalf("seed %+v: %d bytes, %v: stored, not compressed", c, len(enc), err)
		}
		f.Add(enc)
	}
	f.Add([]byte{0x1f, 'a', 'b', 0x40, 0x01, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		whole, err := bloscCodec{}.decode(b, nil, 1<<16)
		blosclzDecompress(b, make([]byte, 256))
		if err != nil || len(whole) == 0 {
			(bloscCodec{}).decodeShuffled(b, make([]byte, 64)) // fails or not, never panics
			return
		}
		// Decoded for the GPU, blocks left shuffled, then unshuffled as
		// the GPU would (on the CPU here): the same bytes, with a block
		// and type size the kernel takes.
		left := make([]byte, len(whole))
		sh, err := bloscCodec{}.decodeShuffled(b, left)
		if err != nil {
			t.Fatalf("decodes whole, not left shuffled: %v", err)
		}
		if sh.typesize > 0 {
			if sh.typesize < 2 || sh.typesize > 255 || sh.blocksize <= 0 || sh.blocksize > len(whole) {
				t.Fatalf("left shuffled in blocks of %d bytes of %d-byte elements, chunk of %d", sh.blocksize, sh.typesize, len(whole))
			}
			sh.undo(left)
		}
		if !bytes.Equal(left, whole) {
			t.Fatalf("left shuffled (%+v) and undone: differs from the chunk decoded whole", sh)
		}
		// The same chunk decoded into rows apart (elements of 4, 2 or 1
		// bytes, so that some layouts unshuffle in place and some copy):
		// the same bytes, the gaps between the rows untouched.
		es := 4
		for len(whole)%es != 0 {
			es /= 2
		}
		cols := max(1, len(whole)/es/3)
		for len(whole)/es%cols != 0 {
			cols--
		}
		rows, stride := len(whole)/es/cols, cols+3
		region := bytes.Repeat([]byte{0xa5}, rows*stride*es)
		v := view{buf: region, shape: []int{rows, stride}, es: es}
		if err := (bloscCodec{}).decodeRuns(b, runsOf(v.sub([]int{0, 1}), []int{rows, cols})); err != nil {
			t.Fatalf("decodes whole, not into rows: %v", err)
		}
		for r := range rows {
			row := region[r*stride*es : (r+1)*stride*es]
			if !bytes.Equal(row[es:es+cols*es], whole[r*cols*es:(r+1)*cols*es]) || row[0] != 0xa5 || row[len(row)-1] != 0xa5 {
				t.Fatalf("row %d of %d (%d-byte elements) differs from the chunk decoded whole", r, rows, es)
			}
		}
	})
}

// FuzzChunkDecode decodes arbitrary bytes as gzip, zlib and zstd chunks
// and as Blosc chunks, each limited to 64 KiB of output: errors are fine;
// panics, and heap past what a 64 KiB chunk may cost (its output, a
// decoder's 8 MiB window, their buffers), are not. Run longer with
//
//	go test -run '^$' -fuzz FuzzChunkDecode -fuzztime 10m ./zarr
func FuzzChunkDecode(f *testing.F) {
	data := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	for _, c := range []interface {
		encode(src, dst []byte) ([]byte, error)
	}{
		gzipCodec{level: 5}, zlibCodec{level: 5}, zstdCodec{level: 3},
		bloscCodec{cname: "zstd", shuffle: 1, typesize: 4, clevel: 5},
	} {
		enc, err := c.encode(data, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	bh := uint32(1 | 4<<3)
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3, byte(bh), byte(bh >> 8), byte(bh >> 16), 'a', 'b', 'c', 'd'})
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 64 << 10
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, c := range []interface {
			decode(src, dst []byte, limit int) ([]byte, error)
		}{gzipCodec{}, zlibCodec{}, zstdCodec{}, bloscCodec{}} {
			if out, err := c.decode(b, nil, limit); err == nil && len(out) > limit {
				t.Fatalf("%T: %d bytes out, limit %d", c, len(out), limit)
			}
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
			t.Fatalf("a %d-byte chunk cost %d bytes of heap: %x", len(b), got, b)
		}
	})
}

// FuzzFilterDecode decodes arbitrary bytes through each numcodecs filter
// and checksum, limited to 4 KiB of output: errors are fine; panics and
// output past the limit are not.
func FuzzFilterDecode(f *testing.F) {
	f.Add([]byte{0, 0xff, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{3, 0xa0})
	dt := DataType{Kind: Float, Size: 8}
	var codecs []bytesCodec
	for _, c := range []Codec{
		{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": 10.0, "offset": 5.0, "dtype": "<f8", "astype": "<u2"}},
		{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": 3.0, "dtype": "|i1", "astype": ">i4"}},
		{Name: "quantize", Configuration: map[string]any{"digits": 2.0, "dtype": "<f8", "astype": "<f2"}},
		{Name: "bitround", Configuration: map[string]any{"keepbits": 7.0}},
		{Name: "astype", Configuration: map[string]any{"encode_dtype": "<i2", "decode_dtype": "<u8"}},
		{Name: "astype", Configuration: map[string]any{"encode_dtype": ">f2", "decode_dtype": "<i4"}},
		{Name: "shuffle", Configuration: map[string]any{"elementsize": 3.0}},
		{Name: "crc32"}, {Name: "adler32", Configuration: map[string]any{"location": "end"}}, {Name: "fletcher32"},
	} {
		bc, err := newBytesCodec(c, dt, false)
		if err != nil {
			f.Fatal(err)
		}
		codecs = append(codecs, bc)
	}
	codecs = append(codecs, packBitsCodec{})
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 4 << 10
		if len(b) > limit { // checksums return their input less 4 bytes
			return
		}
		for _, c := range codecs {
			if out, err := c.decode(b, nil, limit); err == nil && len(out) > limit {
				t.Fatalf("%T: %d bytes out, limit %d", c, len(out), limit)
			}
		}
	})
}
