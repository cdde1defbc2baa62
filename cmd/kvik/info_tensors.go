package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

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

// tensorFileInfo is kvik info's report for a .safetensors or .npy file.
type tensorFileInfo struct {
	Path     string            `json:"path"`
	Format   string            `json:"format"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Tensors  []tensorRow       `json:"tensors"`
	Bytes    int64             `json:"bytes"`
}

// isTensorFile reports whether kvik info lists path's tensors instead of
// probing the path.
func isTensorFile(path string) bool {
	return strings.HasSuffix(path, ".safetensors") || strings.HasSuffix(path, ".npy")
}

// tensorInfo implements kvik info FILE.safetensors|FILE.npy.
func tensorInfo(e *env, path string, asJSON bool) error {
	r := tensorFileInfo{Path: path}
	if strings.HasSuffix(path, ".npy") {
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

func (r *tensorFileInfo) print(w io.Writer) {
	fmt.Fprintf(w, "%s: %s, %d tensors, %d bytes\n", r.Path, r.Format, len(r.Tensors), r.Bytes)
	for k, v := range r.Metadata {
		fmt.Fprintf(w, "  metadata %s = %s\n", k, v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tDTYPE\tSHAPE\tBYTES")
	for _, t := range r.Tensors {
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%d\n", t.Name, t.Dtype, t.Shape, t.Bytes)
	}
	tw.Flush()
}
