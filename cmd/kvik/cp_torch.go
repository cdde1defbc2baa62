package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/torch"
)

// isTorchToSafetensors reports whether kvik cp SRC DST converts a
// PyTorch checkpoint into a safetensors file, or a sharded one's index
// into a sharded safetensors checkpoint's.
func isTorchToSafetensors(src, dst string) bool {
	return (isTorch(src) && strings.HasSuffix(pathOf(dst), ".safetensors")) ||
		(isTorchIndex(src) && strings.HasSuffix(pathOf(dst), ".safetensors.index.json"))
}

// torchToSafetensors implements kvik cp CHECKPOINT MODEL.safetensors, as
// Hugging Face's conversion does, without Python: every tensor of the
// checkpoint under its name, a strided one made dense, with the metadata
// {"format": "pt"}, and unless --verify=false each tensor's CRC-32C
// compared with the file read back before it replaces DST. Through host
// memory the tensors are streamed (streamConvert), into the file or,
// for S3, a temporary one uploaded (streamFile); through GPU memory with
// --memory device (less host memory, but a file-to-file conversion gains
// no speed on the GPU, 0.6-0.7x the host route on the H200) the model is
// loaded whole, then saved (saveVerified). Tensors that share a storage (tied weights) are saved
// each under its name. A dtype safetensors lacks (complex128) fails the
// copy, naming the tensor. A sharded checkpoint
// (pytorch_model.bin.index.json to model.safetensors.index.json) goes
// shard by shard (convertIndex).
func torchToSafetensors(e *env, o *cpOptions, src, dst string) error {
	mode := o.memory
	if mode == "auto" {
		mode = "host"
	}
	mem, err := chooseMemory(mode)
	if err != nil {
		return err
	}
	if mem.gpu != nil {
		defer mem.gpu.close()
	}
	if isTorchIndex(src) {
		return convertIndex(e, o, mem, src, dst)
	}
	_, err = convertFile(e, o, mem, src, dst, nil)
	return err
}

// convertFile converts the checkpoint at src (the tensors names lists
// only, when not nil) into the safetensors file dst and prints a line;
// it returns the tensors' bytes.
func convertFile(e *env, o *cpOptions, mem memoryChoice, src, dst string, names []string) (int64, error) {
	if !mem.device {
		return streamFile(e, o, src, dst, names)
	}
	ctx := e.ctx
	start := time.Now()
	load := torch.LoadHost
	if mem.device {
		load = torch.Load
	}
	c, err := load(ctx, src, &torch.Options{Names: names})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	tensors, sums, err := torchTensors(c, mem.gpu)
	if err != nil {
		return 0, err
	}
	pieces, err := safetensors.Encode(tensors, map[string]string{"format": "pt"})
	if err != nil {
		return 0, err
	}
	if err := saveVerified(ctx, o, dst, pieces, sums); err != nil {
		return 0, err
	}
	var size int64
	for _, t := range c.Tensors {
		size += t.NumElements() * int64(t.Dtype.Size())
	}
	via := "loaded through host memory"
	if mem.device {
		via = "loaded through " + mem.gpu.name + " memory"
	}
	if o.verify {
		via += ", verified"
	}
	elapsed := time.Since(start).Seconds()
	fmt.Fprintf(e.stdout, "converted %s (%s, %s) %s -> %s in %.2f s, %.2f GB/s, %s\n", count(len(tensors), "tensor"),
		formatSize(size), count(size, "byte"), display(redact(src)), display(redact(dst)), elapsed, gbps(size, elapsed), via)
	if len(c.Skipped) > 0 {
		fmt.Fprintf(e.stdout, "not converted (no safetensors form): %s\n", strings.Join(c.Skipped, ", "))
	}
	return size, nil
}

// streamFile is convertFile through host memory, streamed
// (streamConvert): into a local file, or for an object a temporary file
// in TMPDIR, uploaded (kvik.UploadFileS3: its parts read from the file)
// and read back for the check, then removed.
func streamFile(e *env, o *cpOptions, src, dst string, names []string) (int64, error) {
	start := time.Now()
	r, err := kvik.OpenReader(e.ctx, src)
	if err != nil {
		return 0, kvik.RedactError(err)
	}
	defer r.Close()
	local := dst
	if isURL(dst) {
		dir, err := os.MkdirTemp("", "kvik-convert-")
		if err != nil {
			return 0, err
		}
		atExit(func() { os.RemoveAll(dir) })
		defer os.RemoveAll(dir)
		local = filepath.Join(dir, "model.safetensors")
	}
	lo := *o
	lo.verify = o.verify && local == dst // an object is checked once up
	lo.sync = o.sync && local == dst     // nor is a temporary file synced
	res, err := streamConvert(e.ctx, &lo, r, local, names)
	if err == nil && local != dst {
		err = uploadChecked(e.ctx, o, local, dst, res.sums)
	}
	if err != nil {
		return 0, kvik.RedactError(err)
	}
	n, size, skipped := res.n, res.size, res.skipped
	via := fmt.Sprintf("streamed through host memory (%s at a time)", formatSize(convertJobs*convertSegment))
	if local != dst {
		via += " and a temporary file"
	}
	if o.verify {
		via += ", verified"
	}
	elapsed := time.Since(start).Seconds()
	fmt.Fprintf(e.stdout, "converted %s (%s, %s) %s -> %s in %.2f s, %.2f GB/s, %s\n", count(n, "tensor"),
		formatSize(size), count(size, "byte"), display(redact(src)), display(redact(dst)), elapsed, gbps(size, elapsed), via)
	if len(skipped) > 0 {
		fmt.Fprintf(e.stdout, "not converted (no safetensors form): %s\n", strings.Join(skipped, ", "))
	}
	return size, nil
}

// uploadChecked uploads the file at path as the object dst, then checks
// it (verifyObject).
func uploadChecked(ctx context.Context, o *cpOptions, path, dst string, sums map[string]uint32) error {
	if err := kvik.UploadFileS3(ctx, dst, path, o.saveOptions()...); err != nil {
		return err
	}
	return verifyObject(ctx, o, dst, sums)
}

// verifyObject reads the object dst back, unless --verify=false, to
// compare each tensor with sums.
func verifyObject(ctx context.Context, o *cpOptions, dst string, sums map[string]uint32) error {
	if !o.verify {
		return nil
	}
	r, err := kvik.OpenReader(ctx, dst)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer r.Close()
	return verifyConverted(ctx, r, sums)
}

// convertIndex converts a sharded checkpoint: each shard the index names
// (pytorch_model-00001-of-00002.bin) into a safetensors shard beside
// DST's index, named as save_pretrained names them
// (model-00001-of-00002.safetensors), with the tensors the index maps
// to it; then DST, the index of the new shards with the old one's
// metadata, written last so that it never names a missing shard.
func convertIndex(e *env, o *cpOptions, mem memoryChoice, src, dst string) error {
	ix, err := safetensors.ReadIndex(e.ctx, src)
	if err != nil {
		return err
	}
	start := time.Now()
	out := safetensors.Index{Metadata: ix.Metadata, WeightMap: map[string]string{}}
	// Two shards of one new name would lose one's tensors: refused
	// before any shard is written.
	from := map[string]string{}
	for _, file := range ix.Files() {
		to := safetensorsShard(file)
		if prev, ok := from[to]; ok {
			return fmt.Errorf("shards %q and %q would both become %q", prev, file, to)
		}
		from[to] = file
	}
	var total int64
	for _, file := range ix.Files() {
		to := safetensorsShard(file)
		var names []string
		for n, f := range ix.WeightMap {
			if f == file {
				names = append(names, n)
				out.WeightMap[n] = to
			}
		}
		srcShard, _ := safetensors.ShardName(src, file) // checked by ReadIndex
		dstShard, err := safetensors.ShardName(dst, to)
		if err != nil {
			return err
		}
		n, err := convertFile(e, o, mem, srcShard, dstShard, names)
		if err != nil {
			return err
		}
		total += n
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := kvik.SaveFile(e.ctx, dst, []kvik.Piece{{Data: append(b, '\n')}}, o.saveOptions()...); err != nil {
		return err
	}
	elapsed := time.Since(start).Seconds()
	fmt.Fprintf(e.stdout, "converted %s, %s (%s), and the index %s in %.2f s, %.2f GB/s\n", count(len(ix.Files()), "shard"),
		formatSize(total), count(total, "byte"), display(redact(dst)), elapsed, gbps(total, elapsed))
	return nil
}

// safetensorsShard names a .bin shard's safetensors form as
// save_pretrained does: pytorch_model-00001-of-00002.bin is
// model-00001-of-00002.safetensors; other names keep their stem.
func safetensorsShard(file string) string {
	dir, base := path.Split(file)
	base = strings.TrimSuffix(base, path.Ext(base))
	if rest, ok := strings.CutPrefix(base, "pytorch_model"); ok {
		base = "model" + rest
	}
	return dir + base + ".safetensors"
}

// torchTensors returns the checkpoint's tensors as safetensors saves them
// (from device memory where they are contiguous there, else dense in
// host memory) and each one's CRC-32C by name.
func torchTensors(c *torch.Checkpoint, g *gpuDevice) ([]safetensors.SaveTensor, map[string]uint32, error) {
	out := make([]safetensors.SaveTensor, 0, len(c.Tensors))
	sums := make(map[string]uint32, len(c.Tensors))
	for i := range c.Tensors {
		t := &c.Tensors[i]
		s, err := saveTensor(&t.TensorInfo)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case t.Ptr != 0 && t.Contiguous():
			s.Ptr = t.Ptr
			sums[t.Name], err = piecesCRC([]kvik.Piece{{Ptr: t.Ptr, Size: t.Size}}, g)
		case t.Ptr != 0: // strided, on the device: its span to the host
			h := *t
			h.Data = make([]byte, t.Size)
			if err = g.dtoh(h.Data, t.Ptr); err == nil {
				s.Data, err = h.Dense()
			}
		default:
			s.Data, err = t.Dense()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if s.Ptr == 0 {
			if s.Data == nil {
				s.Data = []byte{}
			}
			sums[t.Name] = crc32.Checksum(s.Data, castagnoli)
		}
		out = append(out, s)
	}
	return out, sums, nil
}

// saveTensor describes t as safetensors saves it (no bytes yet); a dtype
// that format lacks is an error naming the tensor.
func saveTensor(t *torch.TensorInfo) (safetensors.SaveTensor, error) {
	d := t.Dtype.Safetensors()
	if d == "" {
		return safetensors.SaveTensor{}, fmt.Errorf("tensor %q: %s has no safetensors dtype", t.Name, t.Dtype)
	}
	return safetensors.SaveTensor{Name: t.Name, Dtype: d, Shape: t.Shape}, nil
}

// saveVerified writes the safetensors file of pieces at dst and, unless
// --verify=false, reads it back to compare each tensor with sums: a local
// file in a temporary file beside dst, renamed over it only once checked
// (a failed check leaves dst as it was); an object uploaded, then read
// back.
func saveVerified(ctx context.Context, o *cpOptions, dst string, pieces []kvik.Piece, sums map[string]uint32) error {
	if isURL(dst) {
		if err := kvik.SaveFile(ctx, dst, pieces, o.saveOptions()...); err != nil {
			return err
		}
		return verifyObject(ctx, o, dst, sums)
	}
	if err := kvik.MkdirAll(filepath.Dir(dst), 0o755, o.saveOptions()...); err != nil {
		return err
	}
	p, err := createPending(dst, 0) // 0: a replaced file keeps its mode and owner
	if err != nil {
		return err
	}
	defer p.Abort()
	if err := p.WritePieces(ctx, pieces); err != nil {
		return err
	}
	if o.verify {
		if err := verifyConverted(ctx, p, sums); err != nil {
			return err
		}
	}
	return commit(p, o.sync)
}

// verifyConverted is verifySaved, which a test replaces to fail the
// check.
var verifyConverted = verifySaved
