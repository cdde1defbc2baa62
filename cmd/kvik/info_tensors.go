package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
)

// tensorRow is one tensor that kvik info FILE lists.
type tensorRow struct {
	Name  string  `json:"name"`
	Dtype string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Bytes int64   `json:"bytes"`
}

// typeRow is one tensor type of a GGUF file: how many tensors, how many
// bytes.
type typeRow struct {
	Type    string `json:"type"`
	Tensors int    `json:"tensors"`
	Bytes   int64  `json:"bytes"`
}

// tensorFileInfo is kvik info's report for a .safetensors, .npy or .gguf
// file.
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

// isTensorFile reports whether kvik info lists path's tensors instead of
// probing the path (a .gguf may be a URL too).
func isTensorFile(path string) bool {
	return strings.HasSuffix(path, ".gguf") || !isURL(path) && (strings.HasSuffix(path, ".safetensors") || strings.HasSuffix(path, ".npy"))
}

// tensorInfo implements kvik info FILE.safetensors|FILE.npy|FILE.gguf.
func tensorInfo(e *env, path string, asJSON bool) error {
	r := tensorFileInfo{Path: path}
	if strings.HasSuffix(path, ".gguf") {
		if err := r.readGGUF(path); err != nil {
			return err
		}
	} else if strings.HasSuffix(path, ".npy") {
		h, err := npy.ReadFileHeader(path)
		if err != nil {
			return err
		}
		r.Format = fmt.Sprintf("npy %d.%d", h.Major, h.Minor)
		dt := h.Dtype.String()
		if h.FortranOrder {
			dt += " (fortran order)"
		}
		r.Tensors = []tensorRow{{Name: "(array)", Dtype: dt, Shape: h.Shape, Bytes: h.Size()}}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		h, err := safetensors.ReadHeader(f, st.Size())
		if err != nil {
			return &os.PathError{Op: "read", Path: path, Err: err}
		}
		r.Format, r.Metadata = "safetensors", h.Metadata
		for _, t := range h.Tensors {
			r.Tensors = append(r.Tensors, tensorRow{Name: t.Name, Dtype: string(t.Dtype), Shape: t.Shape, Bytes: t.Size()})
		}
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

// readGGUF fills r from a GGUF file's header (a tensor of unknown type
// is listed, its size spanning to the next tensor's data).
func (r *tensorFileInfo) readGGUF(path string) error {
	h, err := gguf.ReadFileHeader(path, &gguf.Options{AllowUnknownTypes: true})
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
		r.Tensors = append(r.Tensors, tensorRow{Name: t.Name, Dtype: t.Type.String(), Shape: t.Shape, Bytes: t.Size})
		i, ok := byType[t.Type]
		if !ok {
			i = len(r.Types)
			byType[t.Type] = i
			r.Types = append(r.Types, typeRow{Type: t.Type.String()})
		}
		r.Types[i].Tensors++
		r.Types[i].Bytes += t.Size
	}
	slices.SortStableFunc(r.Types, func(a, b typeRow) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return nil
}

func (r *tensorFileInfo) print(w io.Writer) {
	fmt.Fprintf(w, "%s: %s, %d tensors, %s (%d bytes)\n", r.Path, r.Format, len(r.Tensors), formatSize(r.Bytes), r.Bytes)
	if r.Architecture != "" || r.Types != nil {
		fmt.Fprintf(w, "  architecture %s, alignment %d, data at byte %d\n", r.Architecture, r.Alignment, r.DataOffset)
		for _, t := range r.Types {
			fmt.Fprintf(w, "  %-8s %5d tensors  %s\n", t.Type, t.Tensors, formatSize(t.Bytes))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Metadata)) {
		fmt.Fprintf(w, "  metadata %s = %s\n", k, displayValue(r.Metadata[k]))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tDTYPE\tSHAPE\tBYTES")
	for _, t := range r.Tensors {
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%d\n", t.Name, t.Dtype, t.Shape, t.Bytes)
	}
	tw.Flush()
}

// displayValue keeps a metadata value to one line: a long one (a chat
// template) cut, one with control characters quoted.
func displayValue(v string) string {
	if len(v) > 100 {
		return strconv.Quote(v[:100]) + "..."
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' }) {
		return strconv.Quote(v)
	}
	return v
}
