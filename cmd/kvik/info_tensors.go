package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/torch"
)

// Tensor file formats that kvik info lists and kvik cp copies by format.
const (
	formatSafetensors = "safetensors"
	formatIndex       = "safetensors index"
	formatNpy         = "npy"
	formatGGUF        = "gguf"
)

// pathOf is the path of a path or URL, without a URL's query.
func pathOf(name string) string {
	if isURL(name) {
		if u, err := url.Parse(name); err == nil {
			return u.Path
		}
	}
	return name
}

// tensorFormat names the format of the file at a path or URL by its name
// (a URL's query aside), or returns "" for any other file.
func tensorFormat(name string) string {
	name = pathOf(name)
	switch {
	case strings.HasSuffix(name, ".safetensors.index.json"):
		return formatIndex
	case strings.HasSuffix(name, ".safetensors"):
		return formatSafetensors
	case strings.HasSuffix(name, ".npy"):
		return formatNpy
	case strings.HasSuffix(name, ".gguf"):
		return formatGGUF
	}
	return ""
}

// tensorRow is one tensor that kvik info FILE lists.
type tensorRow struct {
	Name  string  `json:"name"`
	Dtype string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Bytes int64   `json:"bytes"`
	// File is the shard holding the tensor, for an index.
	File string `json:"file,omitempty"`
}

// typeRow is one tensor type of a GGUF file: how many tensors, how many
// bytes.
type typeRow struct {
	Type    string `json:"type"`
	Tensors int    `json:"tensors"`
	Bytes   int64  `json:"bytes"`
}

// tensorFileInfo is kvik info's report for a .safetensors, sharded
// .safetensors.index.json, .npy or .gguf file.
type tensorFileInfo struct {
	Path     string            `json:"path"`
	Format   string            `json:"format"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// GGUF only: the architecture, alignment, where the data starts, and
	// the tensors by type (most bytes first).
	Architecture string      `json:"architecture,omitempty"`
	Alignment    int64       `json:"alignment,omitempty"`
	DataOffset   int64       `json:"data_offset,omitempty"`
	Types        []typeRow   `json:"types,omitempty"`
	Tensors      []tensorRow `json:"tensors"`
	Bytes        int64       `json:"bytes"`
}

// tensorInfo implements kvik info FILE for tensor files, local or at a
// URL: only headers are read (one ranged GET each for a URL).
func tensorInfo(e *env, name string, asJSON bool) error {
	r := tensorFileInfo{Path: redact(name)}
	var err error
	switch tensorFormat(name) {
	case "":
		switch {
		case isTorchIndex(name):
			err = r.torchIndex(name)
		case isTorch(name):
			err = r.torch(name)
		default:
			err = r.npz(name) // isNpz
		}
	case formatNpy:
		err = r.npy(name)
	case formatIndex:
		err = r.index(name)
	case formatGGUF:
		err = r.gguf(name)
	default:
		r.Format = formatSafetensors
		var h *safetensors.Header
		if h, err = safetensorsHeader(name); err == nil {
			r.Metadata = h.Metadata
			r.Tensors = rows(h, nil, "")
		}
	}
	if err != nil {
		return err
	}
	for _, t := range r.Tensors {
		r.Bytes += t.Bytes
	}
	if asJSON {
		return writeJSON(e.stdout, r)
	}
	r.print(e.stdout)
	return nil
}

func (r *tensorFileInfo) npy(name string) error {
	h, err := npy.ReadHeader(context.Background(), name, nil)
	if err != nil {
		return err
	}
	r.Format = fmt.Sprintf("npy %d.%d", h.Major, h.Minor)
	dt := h.Dtype.String()
	if h.FortranOrder {
		dt += " (fortran order)"
	}
	r.Tensors = []tensorRow{{Name: "(array)", Dtype: dt, Shape: h.Shape, Bytes: h.Size()}}
	return nil
}

// isNpz reports whether the file at a path or URL is named a NumPy .npz
// archive. Only kvik info reads one as such: kvik cp copies it as any
// file.
func isNpz(name string) bool { return strings.HasSuffix(pathOf(name), ".npz") }

// isTorch reports whether the file at a path or URL is named as
// torch.save's checkpoints are (.pt, .pth, pytorch_model*.bin). Only kvik
// info reads one as such: kvik cp copies it as any file.
func isTorch(name string) bool {
	name = pathOf(name)
	base := name[strings.LastIndex(name, "/")+1:]
	return strings.HasSuffix(name, ".pt") || strings.HasSuffix(name, ".pth") ||
		(strings.HasPrefix(base, "pytorch_model") && strings.HasSuffix(base, ".bin"))
}

// isTorchIndex reports whether name is a sharded PyTorch checkpoint's
// index (pytorch_model.bin.index.json), which kvik info lists and kvik
// cp converts to a sharded safetensors checkpoint.
func isTorchIndex(name string) bool { return strings.HasSuffix(pathOf(name), ".bin.index.json") }

// torch fills r from a torch.save checkpoint's data.pkl: a tensor a row,
// "(strided)" after the dtype of one that is not contiguous, its bytes
// its elements'; the archive's record and the tensors not read in its
// metadata.
func (r *tensorFileInfo) torch(name string) error {
	h, err := torch.ReadHeader(context.Background(), name, nil)
	if err != nil {
		return err
	}
	r.Format = "torch.save"
	r.Metadata = map[string]string{"record": h.Record}
	if h.Legacy {
		r.Metadata = map[string]string{"format": "legacy (before PyTorch 1.6)"}
	}
	if len(h.Skipped) > 0 {
		r.Metadata["not read"] = strings.Join(h.Skipped, ", ")
	}
	r.Tensors = torchRows(h, nil, "")
	return nil
}

// torchIndex fills r from a sharded PyTorch checkpoint's index
// (pytorch_model.bin.index.json) and its shards' data.pkl.
func (r *tensorFileInfo) torchIndex(name string) error {
	return r.shards(name, "torch.save index", func(shard, file string, ix *safetensors.Index) ([]tensorRow, error) {
		h, err := torch.ReadHeader(context.Background(), shard, nil)
		if err != nil {
			return nil, err
		}
		return torchRows(h, ix, file), nil
	})
}

// torchRows lists h's tensors, "(strided)" after the dtype of one that
// is not contiguous, its bytes its elements'; with an index, those it
// places in file.
func torchRows(h *torch.Header, ix *safetensors.Index, file string) []tensorRow {
	var out []tensorRow
	for _, t := range h.Tensors {
		if ix != nil && ix.WeightMap[t.Name] != file {
			continue
		}
		dt := string(t.Dtype)
		if !t.Contiguous() {
			dt += " (strided)"
		}
		out = append(out, tensorRow{Name: t.Name, Dtype: dt, Shape: t.Shape, Bytes: t.NumElements() * int64(t.Dtype.Size()), File: file})
	}
	return out
}

// npz fills r from a .npz archive's directory and its members' .npy
// headers: an array a row, "(deflated)" after the dtype of a compressed
// member; the members that are not .npy files in its metadata.
func (r *tensorFileInfo) npz(name string) error {
	h, err := npy.ReadNpzHeader(context.Background(), name, nil)
	if err != nil {
		return err
	}
	r.Format = "npz"
	for _, k := range h.Names {
		a := h.Headers[k]
		dt := a.Dtype.String()
		if a.FortranOrder {
			dt += " (fortran order)"
		}
		if h.Compressed[k] {
			dt += " (deflated)"
		}
		r.Tensors = append(r.Tensors, tensorRow{Name: k, Dtype: dt, Shape: a.Shape, Bytes: a.Size()})
	}
	if len(h.Other) > 0 {
		r.Metadata = map[string]string{"members not .npy": strings.Join(h.Other, ", ")}
	}
	return nil
}

// gguf fills r from a GGUF file's header (a tensor of unknown type
// is listed, its size spanning to the next tensor's data).
func (r *tensorFileInfo) gguf(name string) error {
	h, err := gguf.ReadHeader(context.Background(), name, &gguf.Options{AllowUnknownTypes: true})
	if err != nil {
		return err
	}
	r.Format = fmt.Sprintf("GGUF v%d", h.Version)
	r.Architecture, _ = h.Metadata.Architecture()
	r.Alignment, r.DataOffset = h.Alignment, h.DataOffset
	r.Metadata = make(map[string]string, len(h.Metadata))
	for _, kv := range h.Metadata {
		v, ok := kv.Value.Any().(string)
		if !ok {
			v = kv.Value.String() // arrays: their type, length and first elements
		}
		r.Metadata[kv.Key] = v
	}
	byType := map[gguf.Type]int{}
	for _, t := range h.Tensors {
		r.Tensors = append(r.Tensors, tensorRow{Name: t.Name, Dtype: t.Type.String(), Shape: t.Shape, Bytes: t.Size()})
		i, ok := byType[t.Type]
		if !ok {
			i = len(r.Types)
			byType[t.Type] = i
			r.Types = append(r.Types, typeRow{Type: t.Type.String()})
		}
		r.Types[i].Tensors++
		r.Types[i].Bytes += t.Size()
	}
	slices.SortStableFunc(r.Types, func(a, b typeRow) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return nil
}

// index lists the tensors of every shard of an index, reading the
// shards' headers at once.
func (r *tensorFileInfo) index(name string) error {
	return r.shards(name, formatIndex, func(shard, file string, ix *safetensors.Index) ([]tensorRow, error) {
		h, err := safetensorsHeader(shard)
		if err != nil {
			return nil, err
		}
		return rows(h, ix, file), nil
	})
}

// shards fills r from the index at name (a safetensors or a PyTorch
// one: format) and its shards' headers, read at once, each shard's rows
// by shardRows.
func (r *tensorFileInfo) shards(name, format string, shardRows func(shard, file string, ix *safetensors.Index) ([]tensorRow, error)) error {
	ix, err := safetensors.ReadIndex(context.Background(), name)
	if err != nil {
		return err
	}
	files := ix.Files()
	r.Format = fmt.Sprintf("%s, %s", format, count(len(files), "shard"))
	r.Metadata = ix.StringMetadata()
	shards := make([][]tensorRow, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			shard, _ := safetensors.ShardName(name, f) // checked by ReadIndex
			shards[i], errs[i] = shardRows(shard, f, ix)
		})
	}
	wg.Wait()
	for i := range files {
		if errs[i] != nil {
			return errs[i]
		}
		r.Tensors = append(r.Tensors, shards[i]...)
	}
	return nil
}

// rows lists h's tensors; with an index, those it places in file.
func rows(h *safetensors.Header, ix *safetensors.Index, file string) []tensorRow {
	var out []tensorRow
	for _, t := range h.Tensors {
		if ix == nil || ix.WeightMap[t.Name] == file {
			out = append(out, tensorRow{Name: t.Name, Dtype: string(t.Dtype), Shape: t.Shape, Bytes: t.Size(), File: file})
		}
	}
	return out
}

// safetensorsHeader reads the header of the safetensors file at a path
// or URL.
func safetensorsHeader(name string) (*safetensors.Header, error) {
	return safetensors.ReadHeader(context.Background(), name, nil)
}

// openSized opens the file or object at name and returns its size.
func openSized(name string) (kvik.Reader, int64, error) {
	r, err := kvik.OpenReader(context.Background(), name)
	if err != nil {
		return nil, 0, err
	}
	size, err := r.Size()
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	return r, size, nil
}

// redact returns name as kvik prints URLs (kvik.RedactURL): no
// password, the query (which may hold a signature) cut to "?…".
func redact(name string) string { return kvik.RedactURL(name) }

func (r *tensorFileInfo) print(w io.Writer) {
	fmt.Fprintf(w, "%s: %s, %s, %s (%s)\n", display(r.Path), r.Format, count(len(r.Tensors), "tensor"), formatSize(r.Bytes), count(r.Bytes, "byte"))
	if r.Architecture != "" || r.Types != nil {
		fmt.Fprintf(w, "  architecture %s, alignment %d, data at byte %d\n", display(r.Architecture), r.Alignment, r.DataOffset)
		for _, t := range r.Types {
			fmt.Fprintf(w, "  %-8s %5d tensors  %s\n", t.Type, t.Tensors, formatSize(t.Bytes))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Metadata)) {
		fmt.Fprintf(w, "  metadata %s = %s\n", display(k), displayValue(r.Metadata[k]))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	index := len(r.Tensors) > 0 && r.Tensors[0].File != ""
	fmt.Fprint(tw, "  NAME\tDTYPE\tSHAPE\tBYTES")
	if index {
		fmt.Fprint(tw, "\tFILE")
	}
	for _, t := range r.Tensors {
		fmt.Fprintf(tw, "\n  %s\t%s\t%v\t%d", display(t.Name), t.Dtype, t.Shape, t.Bytes)
		if index {
			fmt.Fprintf(tw, "\t%s", display(t.File))
		}
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

// displayValue is display for a metadata value, kept to one line: a
// long one (a chat template) is cut after 100 bytes, at a character's
// start, and quoted.
func displayValue(v string) string {
	if len(v) <= 100 {
		return display(v)
	}
	cut := 100
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return strconv.Quote(v[:cut]) + "..."
}
