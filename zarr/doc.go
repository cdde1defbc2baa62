// Package zarr reads and writes Zarr arrays, format 2 and 3, into and
// out of host or NVIDIA GPU memory, in a Store: a local directory
// (DirStore, KvikIO's GDSStore) or an S3 or HTTP(S) prefix (RemoteStore,
// whose region reads fetch chunks concurrently, straight into pinned
// memory and on to the GPU). See docs/zarr.md.
package zarr
