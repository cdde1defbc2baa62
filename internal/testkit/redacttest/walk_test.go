package redacttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/zarr"
)

// TestRedactionWalk calls every public entry point that takes a URL with
// URLs that carry a password, a presigned signature, credential and
// token, a sig= or S3 credentials from the environment, against a server
// that refuses them (403, 500) with bodies echoing every secret (one
// straddling the 512-byte cut), serves junk, or is not there at all; and
// checks that no error (as %v and %+v) and no log record, at TRACE with
// every request recorded, holds any secret or its first bytes.
func TestRedactionWalk(t *testing.T) {
	all := NewSecrets()
	srv := NewServer(t, all)
	for _, kv := range all.Env(srv) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
		d.HTTPMaxAttempts = 1
		d.HTTPTimeout = 10 * time.Second
		d.RemoteVerbose = true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	var logs bytes.Buffer
	h := slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: kvik.LevelTrace})
	defer kvik.SetLogger(slog.New(h))()

	ctx := context.Background()
	var sec Secrets // those of the URL in use
	logged := 0
	check := func(label string, err error) {
		t.Helper()
		sec.Check(t, label+" (log)", logs.String()[logged:])
		logged = logs.Len()
		if err == nil {
			return
		}
		sec.Check(t, label, err.Error())
		sec.Check(t, label+" (%+v)", fmt.Sprintf("%+v", err))
		var pe interface{ Unwrap() error }
		if errors.As(err, &pe) { // the wrapped errors' own text, as callers unwrap it
			if in := pe.Unwrap(); in != nil && !errors.Is(err, context.Canceled) {
				sec.Check(t, label+" (unwrapped)", in.Error())
			}
		}
	}
	data := []byte("0123456789abcdef")
	f32 := make([]byte, 16)
	ran := 0
	for _, suffix := range []string{"dir/model.safetensors.index.json", "dir/s.zarr"} {
		for _, u := range srv.URLs(suffix) {
			ran++
			sec = all.For(u)
			call := func(name string, err error) { t.Helper(); check(name+" "+kvik.RedactURL(u), err) }
			h, err := kvik.OpenRemote(ctx, u)
			if err == nil {
				_, err = h.ReadAt(make([]byte, 64), 0)
				h.Close()
			}
			call("OpenRemote", err)
			if _, err := kvik.OpenHTTP(ctx, u); err != nil {
				call("OpenHTTP", err)
			}
			if r, err := kvik.OpenReader(ctx, u); err == nil {
				_, err = r.ReadAt(make([]byte, 64), 0)
				r.Close()
				call("OpenReader.ReadAt", err)
			} else {
				call("OpenReader", err)
			}
			call("SaveFile", kvik.SaveFile(ctx, u, []kvik.Piece{{Data: data}}))
			call("SaveFile bad piece", kvik.SaveFile(ctx, u, []kvik.Piece{{Ptr: 1, Size: -1}}))
			call("UploadS3", kvik.UploadS3(ctx, u, data))
			if p, err := kvik.NewRemotePrefix(u); err != nil {
				call("NewRemotePrefix", err)
			} else {
				_, err = p.Get(ctx, "k", nil)
				call("RemotePrefix.Get", err)
				call("RemotePrefix.Save", p.Save(ctx, "k", []kvik.Piece{{Data: data}}))
				call("RemotePrefix.Delete", p.Delete(ctx, "k"))
				_, err = p.List(ctx, "")
				call("RemotePrefix.List", err)
				p.Close()
			}
			_, err = safetensors.Load(ctx, u, nil)
			call("safetensors.Load", err)
			_, err = safetensors.LoadHost(ctx, u, nil)
			call("safetensors.LoadHost", err)
			_, err = safetensors.ReadIndex(ctx, u)
			call("safetensors.ReadIndex", err)
			_, err = safetensors.LoadIndex(ctx, u, nil)
			call("safetensors.LoadIndex", err)
			_, err = safetensors.LoadIndexHost(ctx, u, nil)
			call("safetensors.LoadIndexHost", err)
			call("safetensors.Save", safetensors.Save(ctx, u, []safetensors.SaveTensor{{Name: "w", Dtype: safetensors.F32, Shape: []int64{4}, Data: f32}}, nil))
			call("safetensors.Save bad", safetensors.Save(ctx, u, []safetensors.SaveTensor{{Name: "w", Dtype: safetensors.F32, Shape: []int64{5}, Data: f32}}, nil))
			_, err = npy.LoadHost(ctx, u, nil)
			call("npy.LoadHost", err)
			_, err = npy.Load(ctx, u, nil)
			call("npy.Load", err)
			_, err = npy.ReadHeader(ctx, u, nil)
			call("npy.ReadHeader", err)
			call("npy.Save", npy.Save(ctx, u, npy.SaveArray{Dtype: npy.Float32, Shape: []int64{4}, Data: f32}))
			call("npy.Save bad", npy.Save(ctx, u, npy.SaveArray{Dtype: npy.Float32, Shape: []int64{5}, Data: f32}))
			call("npy.Save device bad", npy.Save(ctx, u, npy.SaveArray{Dtype: npy.Float32, Shape: []int64{-1}}))
			call("npy.Save device", npy.Save(ctx, u, npy.SaveArray{Dtype: npy.Float32, Shape: []int64{4}, Ptr: 1}))
			_, err = gguf.Load(ctx, u, nil)
			call("gguf.Load", err)
			_, err = gguf.LoadHost(ctx, u, nil)
			call("gguf.LoadHost", err)
			_, err = gguf.ReadHeader(ctx, u, nil)
			call("gguf.ReadHeader", err)
			call("gguf.Save", gguf.Save(ctx, u, []gguf.SaveTensor{{Name: "w", Type: gguf.F32, Shape: []int64{4}, Data: f32}}, nil))
			call("gguf.Save bad", gguf.Save(ctx, u, []gguf.SaveTensor{{Name: "w", Type: gguf.F32, Shape: []int64{5}, Data: f32}}, nil))
			if s, err := zarr.OpenURL(ctx, u); err != nil {
				call("zarr.OpenURL", err)
			} else {
				_, err = zarr.Open(ctx, s, "a")
				call("zarr.Open", err)
				_, err = zarr.Create(ctx, s, "a", zarr.Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: zarr.DataType{Kind: zarr.Float, Size: 4}})
				call("zarr.Create", err)
				call("zarr.RemoteStore.Set", s.Set(ctx, "a/c/0", data))
				_, err = s.Get(ctx, "a/zarr.json", nil)
				call("zarr.RemoteStore.Get", err)
				s.Close()
			}
			_, err = zarr.OpenStore(ctx, u)
			call("zarr.OpenStore", err)
			_, err = zarr.OpenArray(ctx, u)
			call("zarr.OpenArray", err)
		}
	}
	if ran == 0 || logs.Len() == 0 {
		t.Fatalf("walk ran %d URLs and logged %d bytes", ran, logs.Len())
	}
}
