package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/blockdev"
	"github.com/kvikgo/kvik/internal/numa"
	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/zarr"
)

const infoDesc = `
Show, on one screen, what this machine offers for file I/O to GPU memory,
like NVIDIA's gdscheck plus kvik's settings: the CUDA driver and devices,
libcufile and the cuFile driver (GDS or cuFile's own compatibility mode),
/run/udev, WSL, nvidia-fs and IOMMU, kvik's effective defaults and where
each came from (KVIKIO_* environment variable or built-in), and for PATH
(default: the current directory) its file system, block device, O_DIRECT
support, the compat mode kvik resolves for it and why, and for a file its
page cache residency. A Zarr store or array (a path or s3:// or http(s)://
URL with a .zarr component, or a directory with Zarr metadata) is
described instead: its endpoint, consolidated metadata and arrays.`

// infoFlags is the flag set of kvik info.
func infoFlags(e *env) *flag.FlagSet {
	fs := newFlagSet(e, "info", "[--json] [PATH]", infoDesc)
	fs.Bool("json", false, "print JSON instead of text")
	fs.Var(new(sizeFlag), "max-document", maxDocUsage)
	return fs
}

// runInfo implements kvik info.
func runInfo(e *env, args []string) error {
	fs := infoFlags(e)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("too many arguments: want at most one PATH")
	}
	path := "."
	if len(pos) == 1 {
		path = pos[0]
	}
	if isZarr(path) {
		return zarrInfo(e, path, fs.Lookup("json").Value.(flag.Getter).Get().(bool), zarrOptions(fs.Lookup("max-document").Value.(*sizeFlag)))
	}
	if tensorFormat(path) != "" || isNpz(path) || isTorch(path) || isTorchIndex(path) {
		return tensorInfo(e, path, fs.Lookup("json").Value.(flag.Getter).Get().(bool))
	}
	if isURL(path) {
		return remoteInfo(e, path, fs.Lookup("json").Value.(flag.Getter).Get().(bool))
	}
	if _, err := os.Stat(path); err != nil {
		return err
	}
	r := infoReport{System: systemInfoNow(), CUDA: probeCUDA(), CuFile: probeCuFileInfo(), Defaults: defaultsNow(), Zstd: zstdNow(), LZ4: lz4Now(), Deflate: deflateNow()}
	// With a bad KVIKIO_* variable kvik opens no file: the report says so
	// once, in its Defaults section, rather than once per open of the path.
	r.Path = probePath(path, r.Defaults.Error == "")
	if fs.Lookup("json").Value.(flag.Getter).Get().(bool) {
		if err := writeJSON(e.stdout, r); err != nil {
			return err
		}
	} else {
		r.print(e.stdout)
	}
	if r.Defaults.Error != "" || r.Zstd.Error != "" || r.LZ4.Error != "" || r.Deflate.Error != "" || len(r.Path.Errors) > 0 {
		return reportedError{errors.New("kvik info reported errors")}
	}
	return nil
}

// infoReport is everything kvik info shows; its JSON form is the output of
// kvik info --json.
type infoReport struct {
	System   systemInfo   `json:"system"`
	CUDA     cudaInfo     `json:"cuda"`
	CuFile   cufileInfo   `json:"cufile"`
	Defaults defaultsInfo `json:"defaults"`
	Zstd     codecInfo    `json:"zarr_zstd"`
	LZ4      codecInfo    `json:"zarr_lz4"`
	Deflate  codecInfo    `json:"zarr_deflate"`
	Path     pathInfo     `json:"path"`
}

// codecInfo says which implementation codes a Zarr codec (zarr's
// ZstdImplementation, LZ4Implementation, DeflateImplementation), or why
// none can be used.
type codecInfo struct {
	Implementation string `json:"implementation,omitempty"`
	Error          string `json:"error,omitempty"`
}

func newCodecInfo(impl string, err error) codecInfo {
	if err != nil {
		return codecInfo{Error: err.Error()}
	}
	return codecInfo{Implementation: impl}
}

func zstdNow() codecInfo    { return newCodecInfo(zarr.ZstdImplementation()) }
func lz4Now() codecInfo     { return newCodecInfo(zarr.LZ4Implementation()) }
func deflateNow() codecInfo { return newCodecInfo(zarr.DeflateImplementation()) }

// String is the implementation, or the error.
func (c codecInfo) String() string {
	if c.Error != "" {
		return "error: " + c.Error
	}
	return c.Implementation
}

type systemInfo struct {
	KvikVersion  string `json:"kvik_version"`
	GoVersion    string `json:"go_version"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	Kernel       string `json:"kernel"`
	CPUs         int    `json:"cpus"`
	MemTotal     int64  `json:"mem_total_bytes"`
	MemAvailable int64  `json:"mem_available_bytes"`
}

type cudaInfo struct {
	Found         bool      `json:"found"`
	Library       string    `json:"library,omitempty"`
	DriverVersion string    `json:"driver_version,omitempty"`
	Devices       []gpuInfo `json:"devices"`
	Error         string    `json:"error,omitempty"`
}

type gpuInfo struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	TotalMem int64  `json:"total_mem_bytes"`
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// NUMANode is the GPU's node from sysfs, -1 where it is unknown:
	// where kvik places the GPU's staging (docs/multi-gpu.md).
	NUMANode int `json:"numa_node"`
}

type cufileInfo struct {
	Found          bool        `json:"found"`
	Library        string      `json:"library,omitempty"`
	Version        string      `json:"version,omitempty"`
	MissingSymbols []string    `json:"missing_symbols,omitempty"`
	Error          string      `json:"error,omitempty"`
	RunUdev        bool        `json:"run_udev"`
	WSL            bool        `json:"wsl"`
	NvidiaFS       string      `json:"nvidia_fs"` // version, "loaded" or "" when absent
	IOMMU          bool        `json:"iommu"`
	Config         string      `json:"config"`
	ConfigFound    bool        `json:"config_found"`
	Usable         bool        `json:"usable"`
	GDS            bool        `json:"gds"`
	Verdict        string      `json:"verdict"`
	Driver         *driverInfo `json:"driver,omitempty"`
}

type driverInfo struct {
	NVFSVersion       string `json:"nvfs_version"`
	PollMode          bool   `json:"poll_mode"`
	PollThresholdKiB  int64  `json:"poll_threshold_kib"`
	AllowCompatMode   bool   `json:"allow_compat_mode"`
	MaxDirectIOKiB    int64  `json:"max_direct_io_kib"`
	MaxDeviceCacheKiB uint32 `json:"max_device_cache_kib"`
	PerBufferCacheKiB uint32 `json:"per_buffer_cache_kib"`
	MaxPinnedMemKiB   uint32 `json:"max_device_pinned_mem_kib"`
	MaxBatchIOSize    uint32 `json:"max_batch_io_size"`
	Supports          string `json:"supports"`
	Features          string `json:"features"`
}

type defaultsInfo struct {
	Settings []settingInfo `json:"settings"`
	Error    string        `json:"error,omitempty"`
}

type settingInfo struct {
	Name   string `json:"name"`
	Env    string `json:"env"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

type pathInfo struct {
	Path         string         `json:"path"`
	Kind         string         `json:"kind"`
	Probe        string         `json:"probe,omitempty"`
	FSType       string         `json:"fs_type,omitempty"`
	BlockDevice  *blockInfo     `json:"block_device,omitempty"`
	DirectIO     bool           `json:"direct_io"`
	CompatMode   string         `json:"compat_mode,omitempty"`
	CompatReason string         `json:"compat_reason,omitempty"`
	Size         int64          `json:"size_bytes"`
	PageCache    *pageCacheInfo `json:"page_cache,omitempty"`
	ReadPolicy   *readPlanInfo  `json:"read_policy,omitempty"`
	Errors       []string       `json:"errors,omitempty"`
}

type blockInfo struct {
	Name       string `json:"name,omitempty"`
	Parent     string `json:"parent"`
	Device     string `json:"device"`
	Rotational bool   `json:"rotational"`
}

type pageCacheInfo struct {
	ResidentPages int `json:"resident_pages"`
	TotalPages    int `json:"total_pages"`
	PageSize      int `json:"page_size"`
}

// systemInfoNow describes the machine and this build.
func systemInfoNow() systemInfo {
	total, avail := memInfo()
	return systemInfo{
		KvikVersion: kvikVersion(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Kernel: kernelRelease(), CPUs: runtime.NumCPU(), MemTotal: total, MemAvailable: avail,
	}
}

// probeCUDA reports the CUDA driver and its devices.
func probeCUDA() cudaInfo {
	c := cudaInfo{Devices: []gpuInfo{}}
	if err := cuda.Init(); err != nil {
		c.Error = fmt.Sprintf("%+v", err) // with the paths tried
		c.Library = cuda.LibraryPath()
		c.Found = c.Library != ""
		return c
	}
	c.Found, c.Library = true, cuda.LibraryPath()
	if v, err := cuda.DriverGetVersion(); err == nil {
		c.DriverVersion = cudaVersion(v)
	}
	n, err := cuda.DeviceGetCount()
	if err != nil {
		c.Error = err.Error()
	}
	for i := range n {
		d, err := cuda.DeviceGet(i)
		if err != nil {
			c.Error = err.Error()
			continue
		}
		g := gpuInfo{Index: i}
		g.Name, _ = d.Name()
		g.TotalMem, _ = d.TotalMem()
		g.PCIBusID, _ = d.PCIBusID()
		g.NUMANode, _ = numa.Sysfs("/sys").DeviceNode(g.PCIBusID)
		c.Devices = append(c.Devices, g)
	}
	return c
}

// probeCuFileInfo reports libcufile, the cuFile driver and the system
// conditions kvik and KvikIO check before using cuFile.
func probeCuFileInfo() cufileInfo {
	c := cufileInfo{WSL: blockdev.IsWSL(), NvidiaFS: nvidiaFS(), IOMMU: iommuEnabled()}
	c.RunUdev = isDir("/run/udev")
	c.Config = os.Getenv("CUFILE_ENV_PATH_JSON")
	if c.Config == "" {
		c.Config = "/etc/cufile.json"
	}
	_, err := os.Stat(c.Config)
	c.ConfigFound = err == nil
	if err := cufile.Load(); err != nil {
		c.Error = fmt.Sprintf("%+v", err) // with the paths tried
	} else {
		c.Found, c.Library, c.MissingSymbols = true, cufile.LibraryPath(), cufile.MissingSymbols()
		if v, err := cufile.GetVersion(); err == nil {
			c.Version = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
		}
	}
	st := kvik.ProbeCuFile()
	c.Usable, c.GDS, c.Verdict = st.Usable, st.GDS, st.Reason
	if st.Props != nil {
		c.Driver = driverInfoOf(*st.Props)
	}
	return c
}

func driverInfoOf(p cufile.DriverProperties) *driverInfo {
	return &driverInfo{
		NVFSVersion: fmt.Sprintf("%d.%d", p.NVFSMajor, p.NVFSMinor), PollMode: p.PollMode(),
		PollThresholdKiB: p.PollThreshSizeKB, AllowCompatMode: p.AllowCompatMode(),
		MaxDirectIOKiB: p.MaxDirectIOSizeKB, MaxDeviceCacheKiB: p.MaxDeviceCacheSizeKB,
		PerBufferCacheKiB: p.PerBufferCacheSizeKB, MaxPinnedMemKiB: p.MaxDevicePinnedMemSizeKB,
		MaxBatchIOSize: p.MaxBatchIOSize, Supports: p.StatusFlags.String(), Features: p.FeatureFlags.String(),
	}
}

// nvidiaFS returns the nvidia-fs kernel module's version, "loaded" when it
// is loaded without a readable version, or "" when it is absent.
func nvidiaFS() string {
	for _, p := range []string{"/sys/module/nvidia_fs/version", "/proc/driver/nvidia-fs/version"} {
		if v := readFirstLine(p); v != "" {
			return v
		}
	}
	if isDir("/sys/module/nvidia_fs") || isDir("/proc/driver/nvidia-fs") {
		return "loaded"
	}
	return ""
}

// iommuEnabled reports whether the kernel lists an IOMMU; GDS needs it off
// or in pass-through.
func iommuEnabled() bool {
	entries, err := os.ReadDir("/sys/class/iommu")
	return err == nil && len(entries) > 0
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// defaultsNow lists kvik's effective settings and their sources.
func defaultsNow() defaultsInfo {
	var d defaultsInfo
	if _, err := kvik.GetDefaults(); err != nil {
		d.Error = err.Error()
	}
	for _, s := range kvik.Settings() {
		d.Settings = append(d.Settings, settingInfo{Name: s.Name, Env: s.Env, Value: s.Value, Source: s.Source})
	}
	return d
}

// probePath describes the file system, device and kvik's view of path. A
// directory is probed through a temporary file created in it. With
// withKvik false it leaves out what opening the path with kvik shows.
func probePath(path string, withKvik bool) pathInfo {
	p := pathInfo{Path: path, Kind: "file"}
	fi, err := os.Stat(path)
	if err != nil {
		p.addError(err)
		return p
	}
	if abs, err := filepath.Abs(path); err == nil {
		p.Path = abs
	}
	if p.FSType, err = blockdev.FSType(path); err != nil {
		p.addError(err)
	}
	if dev, err := blockdev.ForPath(path); err == nil {
		p.BlockDevice = &blockInfo{Name: dev.Name, Parent: dev.Parent, Device: fmt.Sprintf("%d:%d", dev.Major, dev.Minor), Rotational: dev.Rotational}
	}
	target := path
	if fi.IsDir() {
		p.Kind = "directory"
		if probe, remove, err := probeFile(path); err == nil {
			defer remove()
			target, p.Probe = probe, "a temporary file in the directory"
		}
	} else if fi.Mode().IsRegular() {
		p.Size = fi.Size()
		p.PageCache = pageCacheOf(path, &p)
		if withKvik {
			p.ReadPolicy = readPolicyOf(path, &p)
		}
	} else {
		// "FIFO", "socket", "block device", ...: kvik's open says
		// below whether it takes one.
		k := posix.FileKind(fi.Mode())
		p.Kind = k[strings.IndexByte(k, ' ')+1:]
	}
	if withKvik {
		p.openWithKvik(target)
	}
	return p
}

// addError records err unless the same message is recorded already.
func (p *pathInfo) addError(err error) {
	if !slices.Contains(p.Errors, err.Error()) {
		p.Errors = append(p.Errors, err.Error())
	}
}

// openWithKvik opens target with kvik and records O_DIRECT support and the
// resolved compat mode.
func (p *pathInfo) openWithKvik(target string) {
	f, err := kvik.Open(target, "r", 0)
	if err != nil {
		p.addError(err)
		return
	}
	defer f.Close()
	p.DirectIO = f.IsDirectIOSupported()
	p.CompatMode, p.CompatReason = f.CompatMode().String(), f.CompatReason()
}

// probeFile creates an empty temporary file in dir.
func probeFile(dir string) (string, func(), error) {
	f, err := os.CreateTemp(dir, ".kvik-info-*")
	if err != nil {
		return "", nil, err
	}
	f.Close()
	return f.Name(), func() { os.Remove(f.Name()) }, nil
}

// pageCacheOf returns the page cache residency of the file at path.
func pageCacheOf(path string, p *pathInfo) *pageCacheInfo {
	res, total, err := kvik.PageCacheInfo(path, 0, 0)
	if err != nil {
		p.addError(err)
		return nil
	}
	return &pageCacheInfo{ResidentPages: res, TotalPages: total, PageSize: os.Getpagesize()}
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// print writes the report as text.
func (r infoReport) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s := r.System
	fmt.Fprintf(tw, "kvik %s (%s %s/%s), kernel %s, %d CPUs, %s memory (%s available)\n",
		s.KvikVersion, s.GoVersion, s.OS, s.Arch, s.Kernel, s.CPUs, formatSize(s.MemTotal), formatSize(s.MemAvailable))
	r.CUDA.print(tw)
	r.CuFile.print(tw)
	r.Defaults.print(tw)
	fmt.Fprintf(tw, "\nZarr\n  zstd\t%s\n  lz4\t%s\n  deflate\t%s\n", r.Zstd, r.LZ4, r.Deflate)
	r.Path.print(tw)
	tw.Flush()
}

func (c cudaInfo) print(w io.Writer) {
	fmt.Fprintln(w, "\nCUDA driver")
	switch {
	case !c.Found:
		fmt.Fprintf(w, "  library\tnot found (%s)\n", shortLibError(cuda.LibraryEnv))
		return
	case c.Error != "" && len(c.Devices) == 0:
		fmt.Fprintf(w, "  library\t%s\n  error\t%s\n", c.Library, c.Error)
		return
	}
	fmt.Fprintf(w, "  library\t%s (CUDA %s)\n", c.Library, c.DriverVersion)
	fmt.Fprintf(w, "  devices\t%d\n", len(c.Devices))
	for _, d := range c.Devices {
		node := "unknown"
		if d.NUMANode >= 0 {
			node = strconv.Itoa(d.NUMANode)
		}
		fmt.Fprintf(w, "  GPU %d\t%s, %s, PCI %s, NUMA node %s\n", d.Index, d.Name, formatSize(d.TotalMem), d.PCIBusID, node)
	}
}

func (c cufileInfo) print(w io.Writer) {
	fmt.Fprintln(w, "\ncuFile")
	if c.Found {
		fmt.Fprintf(w, "  library\t%s (cuFile %s)\n", c.Library, orUnknown(c.Version))
		if len(c.MissingSymbols) > 0 {
			fmt.Fprintf(w, "  missing\t%v\n", c.MissingSymbols)
		}
	} else {
		fmt.Fprintf(w, "  library\tnot found (%s)\n", shortLibError(cufile.LibraryEnv))
	}
	fmt.Fprintf(w, "  /run/udev\t%s\n", yesNo(c.RunUdev, "present", "missing (cuFile cannot register files)"))
	fmt.Fprintf(w, "  WSL\t%s\n", yesNo(c.WSL, "yes (cuFile unsupported)", "no"))
	fmt.Fprintf(w, "  nvidia-fs\t%s\n", yesNo(c.NvidiaFS != "", c.NvidiaFS, "not loaded (no GPUDirect Storage)"))
	fmt.Fprintf(w, "  IOMMU\t%s\n", yesNo(c.IOMMU, "enabled (GDS needs it off or in pass-through)", "disabled"))
	fmt.Fprintf(w, "  config\t%s%s\n", c.Config, yesNo(c.ConfigFound, "", " (not found)"))
	if d := c.Driver; d != nil {
		fmt.Fprintf(w, "  driver\tnvfs %s, poll mode %v (<= %d KiB), compat allowed %v, max direct I/O %d KiB\n",
			d.NVFSVersion, d.PollMode, d.PollThresholdKiB, d.AllowCompatMode, d.MaxDirectIOKiB)
		fmt.Fprintf(w, "  \tdevice cache %d KiB (%d KiB per buffer), pinned %d KiB, batch %d\n",
			d.MaxDeviceCacheKiB, d.PerBufferCacheKiB, d.MaxPinnedMemKiB, d.MaxBatchIOSize)
		fmt.Fprintf(w, "  supports\t%s\n", yesNo(d.Supports == "0", "no storage kinds listed (nvidia-fs absent)", d.Supports))
	}
	fmt.Fprintf(w, "  verdict\t%s\n", shortenTried(c.Verdict))
}

func (d defaultsInfo) print(w io.Writer) {
	fmt.Fprintln(w, "\nDefaults")
	if d.Error != "" {
		fmt.Fprintf(w, "  error\t%s (kvik opens no file until this is fixed; built-in values below)\n", d.Error)
	}
	for _, s := range d.Settings {
		v := s.Value
		if v == "" {
			v = "unset"
		}
		fmt.Fprintf(w, "  %s\t%s\t(%s)\n", s.Env, v, s.Source)
	}
}

func (p pathInfo) print(w io.Writer) {
	fmt.Fprintf(w, "\nPath %s (%s)\n", p.Path, p.Kind)
	if p.FSType != "" {
		fmt.Fprintf(w, "  file system\t%s\n", p.FSType)
	}
	if b := p.BlockDevice; b != nil {
		fmt.Fprintf(w, "  block device\t%s\n", b.describe())
	}
	probe := ""
	if p.Probe != "" {
		probe = " (probed with " + p.Probe + ")"
	}
	if p.CompatMode != "" {
		fmt.Fprintf(w, "  O_DIRECT\t%s%s\n", yesNo(p.DirectIO, "supported", "not supported"), probe)
		fmt.Fprintf(w, "  compat mode\t%s: %s\n", p.CompatMode, shortenTried(p.CompatReason))
	}
	if p.Kind == "file" {
		fmt.Fprintf(w, "  size\t%s (%s)\n", formatSize(p.Size), count(p.Size, "byte"))
	}
	if c := p.PageCache; c != nil && c.TotalPages > 0 {
		fmt.Fprintf(w, "  page cache\t%d of %s resident (%.1f%%)\n", c.ResidentPages, count(c.TotalPages, "page"), 100*float64(c.ResidentPages)/float64(c.TotalPages))
	}
	p.ReadPolicy.print(w)
	for _, e := range p.Errors {
		fmt.Fprintf(w, "  error\t%s\n", shortenTried(e))
	}
}

// describe renders a block device: "vda1 on vda (253:1, rotational)".
func (b blockInfo) describe() string {
	rot := "not rotational"
	if b.Rotational {
		rot = "rotational"
	}
	if b.Name == "" {
		return fmt.Sprintf("none (device %s: no block device, e.g. tmpfs or overlay)", b.Device)
	}
	if b.Parent != "" && b.Parent != b.Name {
		return fmt.Sprintf("%s on %s (%s, %s)", b.Name, b.Parent, b.Device, rot)
	}
	return fmt.Sprintf("%s (%s, %s)", b.Name, b.Device, rot)
}

// shortLibError stands in for a library load error in the text report,
// which lists every path tried; --json has it in full.
func shortLibError(envVar string) string {
	return "set " + envVar + " to its path; kvik info --json lists the paths tried"
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}
