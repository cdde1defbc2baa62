// kvikio_bench: times KvikIO's FileHandle::pread and pwrite of a whole file
// and prints one JSON line per configuration, with the fields of
// `kvik bench --json` results, so that bench/kvikio/run.sh can set KvikIO
// beside kvik on the same file.
//
// Written for kvikgo; it uses only KvikIO's public C++ API (FileHandle,
// defaults) and the CUDA driver API, which it loads with dlopen as KvikIO
// does.
//
//   kvikio_bench --file F [--size N] --op read|write --memory host,device
//                --threads 1,4,16,32 [--repeats 5] [--warmup 0] [--task-size N]
//                [--bounce-size N] [--compat on|off|auto]
//   kvikio_bench --create F --size N     (write N pseudo-random bytes)
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <kvikio/compat_mode.hpp>
#include <kvikio/defaults.hpp>
#include <kvikio/file_handle.hpp>

#ifndef KVIKIO_BENCH_VERSION
#define KVIKIO_BENCH_VERSION "unknown"
#endif

namespace {

[[noreturn]] void fail(std::string const& msg)
{
  std::fprintf(stderr, "kvikio_bench: %s\n", msg.c_str());
  std::exit(1);
}

// Driver is the part of the CUDA driver API the benchmark needs.
struct Driver {
  decltype(&cuInit) init{};
  decltype(&cuDeviceGet) deviceGet{};
  decltype(&cuDevicePrimaryCtxRetain) primaryCtxRetain{};
  decltype(&cuCtxSetCurrent) ctxSetCurrent{};
  decltype(&cuMemAlloc) memAlloc{};
  decltype(&cuMemFree) memFree{};
  decltype(&cuMemcpyHtoD) htod{};
  decltype(&cuMemcpyDtoH) dtoh{};
  decltype(&cuMemsetD8) memsetD8{};
  decltype(&cuDeviceGetName) deviceGetName{};

  void check(CUresult r, char const* what) const
  {
    if (r != CUDA_SUCCESS) { fail(std::string{what} + " failed: CUresult " + std::to_string(r)); }
  }

  template <typename F>
  void sym(void* lib, F& f, char const* name)
  {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (f == nullptr) { fail(std::string{"libcuda.so.1 lacks "} + name); }
  }

  // open loads libcuda, makes device 0's primary context current and
  // returns the device's name.
  std::string open()
  {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) { fail(std::string{"dlopen libcuda.so.1: "} + dlerror()); }
    sym(lib, init, "cuInit");
    sym(lib, deviceGet, "cuDeviceGet");
    sym(lib, primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(lib, ctxSetCurrent, "cuCtxSetCurrent");
    sym(lib, memAlloc, "cuMemAlloc_v2");
    sym(lib, memFree, "cuMemFree_v2");
    sym(lib, htod, "cuMemcpyHtoD_v2");
    sym(lib, dtoh, "cuMemcpyDtoH_v2");
    sym(lib, memsetD8, "cuMemsetD8_v2");
    sym(lib, deviceGetName, "cuDeviceGetName");
    check(init(0), "cuInit");
    CUdevice dev{};
    check(deviceGet(&dev, 0), "cuDeviceGet");
    CUcontext ctx{};
    check(primaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(ctxSetCurrent(ctx), "cuCtxSetCurrent");
    char name[256] = {};
    check(deviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    return name;
  }
};

struct Options {
  std::string file, create, op{"read"};
  std::vector<std::string> memories{"host"};
  std::vector<unsigned> threads{1};
  std::size_t size{0}, task_size{4 << 20}, bounce_size{16 << 20};
  int repeats{5};
  int warmup{0};
  std::string compat{"on"};
};

std::size_t parse_size(std::string const& s)
{
  std::size_t pos{};
  double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  double mult = 1;
  if (unit == "k" || unit == "K" || unit == "KiB") {
    mult = 1 << 10;
  } else if (unit == "M" || unit == "MiB") {
    mult = 1 << 20;
  } else if (unit == "G" || unit == "GiB") {
    mult = 1 << 30;
  } else if (!unit.empty()) {
    throw std::invalid_argument("unknown unit " + unit);
  }
  if (v <= 0) { throw std::invalid_argument("size must be positive"); }
  return static_cast<std::size_t>(v * mult);
}

std::vector<std::string> split(std::string const& s)
{
  std::vector<std::string> out;
  std::stringstream ss{s};
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) { out.push_back(item); }
  }
  return out;
}

Options parse(int argc, char** argv)
{
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) { fail("flag " + a + " needs a value"); }
    std::string v = argv[++i];
    try {
      if (a == "--file") {
        o.file = v;
      } else if (a == "--create") {
        o.create = v;
      } else if (a == "--op") {
        o.op = v;
      } else if (a == "--memory") {
        o.memories = split(v);
      } else if (a == "--threads") {
        o.threads.clear();
        for (auto const& t : split(v)) {
          int n = std::stoi(t);
          if (n < 1) { fail("--threads: want positive counts"); }
          o.threads.push_back(static_cast<unsigned>(n));
        }
      } else if (a == "--size") {
        o.size = parse_size(v);
      } else if (a == "--task-size") {
        o.task_size = parse_size(v);
      } else if (a == "--bounce-size") {
        o.bounce_size = parse_size(v);
      } else if (a == "--repeats") {
        o.repeats = std::stoi(v);
      } else if (a == "--warmup") {
        o.warmup = std::stoi(v);
      } else if (a == "--compat") {
        o.compat = v;
      } else {
        fail("unknown flag " + a);
      }
    } catch (std::exception const& e) {
      fail("bad value for " + a + ": " + e.what());
    }
  }
  if (o.op != "read" && o.op != "write") { fail("--op: want read or write"); }
  if (o.repeats < 1) { fail("--repeats: want at least 1"); }
  if (o.warmup < 0) { fail("--warmup: want 0 or more"); }
  for (auto const& m : o.memories) {
    if (m != "host" && m != "device") { fail("--memory: want host, device or both"); }
  }
  return o;
}

// HostBuffer is page-aligned host memory.
struct HostBuffer {
  void* p{};
  std::size_t n{};
  explicit HostBuffer(std::size_t size) : n{size}
  {
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { fail("mmap of " + std::to_string(n) + " bytes failed"); }
  }
  ~HostBuffer() { munmap(p, n); }
  HostBuffer(HostBuffer const&)            = delete;
  HostBuffer& operator=(HostBuffer const&) = delete;
  [[nodiscard]] char* bytes() const { return static_cast<char*>(p); }
};

// fill_random fills p with xorshift bytes, in parallel.
void fill_random(char* p, std::size_t n)
{
  unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  std::size_t chunk = (n / nt + 7) & ~std::size_t{7};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < nt; ++t) {
    ts.emplace_back([=] {
      std::size_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
      std::uint64_t x = 0x9e3779b97f4a7c15ULL * (t + 1) ^ static_cast<std::uint64_t>(
                                                              std::chrono::steady_clock::now().time_since_epoch().count());
      for (std::size_t i = lo; i < hi; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(p + i, &x, std::min<std::size_t>(8, hi - i));
      }
    });
  }
  for (auto& t : ts) {
    t.join();
  }
}

void pread_full(int fd, char* p, std::size_t n)
{
  for (std::size_t off = 0; off < n;) {
    ssize_t r = ::pread(fd, p + off, n - off, static_cast<off_t>(off));
    if (r <= 0) { fail("short read of the reference"); }
    off += static_cast<std::size_t>(r);
  }
}

void pwrite_full(int fd, char const* p, std::size_t n)
{
  for (std::size_t off = 0; off < n;) {
    ssize_t r = ::pwrite(fd, p + off, n - off, static_cast<off_t>(off));
    if (r <= 0) { fail("short write"); }
    off += static_cast<std::size_t>(r);
  }
}

int create_file(Options const& o)
{
  if (o.size == 0) { fail("--create needs --size"); }
  HostBuffer buf{o.size};
  fill_random(buf.bytes(), o.size);
  int fd = ::open(o.create.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) { fail("cannot create " + o.create); }
  pwrite_full(fd, buf.bytes(), o.size);
  ::fsync(fd);
  ::close(fd);
  return 0;
}

kvikio::CompatMode compat_mode(std::string const& s)
{
  if (s == "on") { return kvikio::CompatMode::ON; }
  if (s == "off") { return kvikio::CompatMode::OFF; }
  if (s == "auto") { return kvikio::CompatMode::AUTO; }
  fail("--compat: want on, off or auto");
}

std::string json_seconds(std::vector<double> const& v)
{
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.9f", i ? "," : "", v[i]);
    s += b;
  }
  return s + "]";
}

// Bench holds the buffers of one run.
struct Bench {
  Options const& o;
  Driver cu;
  std::string device{"none"};
  std::size_t size{};
  HostBuffer* ref{};  // the file's bytes (reads) or the bytes to write
  HostBuffer* dst{};  // read destination in host memory; scratch for checks
  CUdeviceptr dev{};

  void verify(std::string const& memory)
  {
    if (o.op == "write") {
      int fd = ::open(o.file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) { fail("cannot reopen " + o.file); }
      off_t end = ::lseek(fd, 0, SEEK_END);
      if (end != static_cast<off_t>(size)) { fail("file size after write is " + std::to_string(end)); }
      std::memset(dst->p, 0, size);
      pread_full(fd, dst->bytes(), size);
      ::close(fd);
    } else if (memory == "device") {
      std::memset(dst->p, 0, size);
      cu.check(cu.dtoh(dst->p, dev, size), "cuMemcpyDtoH");
    }
    if (std::memcmp(dst->p, ref->p, size) != 0) { fail(o.op + " " + memory + ": data mismatch"); }
  }

  // clear zeroes the read destinations so that a short read cannot verify.
  void clear(std::string const& memory)
  {
    if (memory == "device") {
      cu.check(cu.memsetD8(dev, 0, size), "cuMemsetD8");
    } else {
      std::memset(dst->p, 0, size);
    }
  }

  void run(std::string const& memory, unsigned threads)
  {
    kvikio::defaults::set_thread_pool_nthreads(threads);
    kvikio::defaults::set_task_size(o.task_size);
    kvikio::defaults::set_bounce_buffer_size(o.bounce_size);
    kvikio::defaults::set_compat_mode(compat_mode(o.compat));
    bool write = o.op == "write";
    kvikio::FileHandle f{o.file, write ? "w" : "r", kvikio::FileHandle::m644, compat_mode(o.compat)};
    void* buf = memory == "device" ? reinterpret_cast<void*>(dev) : (write ? ref->p : dst->p);
    std::string path = "kvikio host";
    if (memory == "device") { path = f.get_compat_mode_manager().is_compat_mode_preferred() ? "kvikio posix+bounce" : "kvikio cufile"; }
    // Untimed repetitions first, the same as kvik bench --warmup.
    for (int i = 0; i < o.warmup; ++i) {
      if (write && ::truncate(o.file.c_str(), 0) != 0) { fail("truncate " + o.file); }
      std::size_t n = write ? f.pwrite(buf, size).get() : f.pread(buf, size).get();
      if (n != size) { fail(o.op + ": warm-up moved " + std::to_string(n) + " bytes"); }
    }
    std::vector<double> secs;
    for (int i = 0; i < o.repeats; ++i) {
      if (write) {
        if (::truncate(o.file.c_str(), 0) != 0) { fail("truncate " + o.file); }
      } else if (i == 0) {
        clear(memory);
      }
      auto t0 = std::chrono::steady_clock::now();
      std::size_t n = write ? f.pwrite(buf, size).get() : f.pread(buf, size).get();
      if (write && ::fsync(f.fd()) != 0) { fail("fsync " + o.file); }
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (n != size) { fail(o.op + ": moved " + std::to_string(n) + " of " + std::to_string(size) + " bytes"); }
      if (i == 0) { verify(memory); }
    }
    std::vector<double> sorted = secs;
    std::sort(sorted.begin(), sorted.end());
    std::size_t m  = sorted.size();
    double med     = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
    auto gbps      = [&](double s) { return static_cast<double>(size) / s / 1e9; };
    std::printf(
      "{\"tool\":\"kvikio\",\"kvikio_version\":\"%s\",\"device\":\"%s\",\"file\":\"%s\",\"size_bytes\":%zu,"
      "\"op\":\"%s\",\"path\":\"%s\",\"memory\":\"%s\",\"threads\":%u,\"task_size\":%zu,"
      "\"bounce_buffer_size\":%zu,\"compat_mode\":\"%s\",\"seconds\":%s,\"median_gbps\":%.4f,"
      "\"min_gbps\":%.4f,\"max_gbps\":%.4f,\"verified\":true}\n",
      KVIKIO_BENCH_VERSION, device.c_str(), o.file.c_str(), size, o.op.c_str(), path.c_str(), memory.c_str(),
      threads, o.task_size, o.bounce_size, o.compat.c_str(), json_seconds(secs).c_str(), gbps(med),
      gbps(sorted.back()), gbps(sorted.front()));
    std::fflush(stdout);
  }

  int main()
  {
    bool write = o.op == "write";
    size       = o.size;
    if (!write) {
      int fd = ::open(o.file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) { fail("cannot open " + o.file); }
      auto end = static_cast<std::size_t>(::lseek(fd, 0, SEEK_END));
      if (size == 0) { size = end; }
      if (size == 0 || size > end) { fail("--size must be positive and within the file"); }
      ref = new HostBuffer{size};
      pread_full(fd, ref->bytes(), size);
      ::close(fd);
    } else {
      if (size == 0) { fail("--op write needs --size"); }
      ref = new HostBuffer{size};
      fill_random(ref->bytes(), size);
    }
    dst = new HostBuffer{size};
    if (std::find(o.memories.begin(), o.memories.end(), "device") != o.memories.end()) {
      device = cu.open();
      cu.check(cu.memAlloc(&dev, size), "cuMemAlloc");
      if (write) { cu.check(cu.htod(dev, ref->p, size), "cuMemcpyHtoD"); }
    }
    for (auto const& m : o.memories) {
      for (unsigned t : o.threads) {
        run(m, t);
      }
    }
    if (dev != 0) { cu.memFree(dev); }
    delete dst;
    delete ref;
    return 0;
  }
};

}  // namespace

int main(int argc, char** argv)
{
  Options o = parse(argc, argv);
  if (!o.create.empty()) { return create_file(o); }
  if (o.file.empty()) { fail("--file or --create is required"); }
  try {
    Bench b{o};
    return b.main();
  } catch (std::exception const& e) {
    fail(e.what());
  }
}
