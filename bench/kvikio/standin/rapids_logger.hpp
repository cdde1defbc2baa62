// Stand-in for the rapids_logger header that KvikIO's logger.cpp includes.
//
// Written for kvikgo's side-by-side benchmark (bench/kvikio/run.sh copies it
// to BUILD/include/rapids_logger/logger.hpp). It offers only what KvikIO's
// C++ library uses: levels, three sinks and a logger that prints
// printf-style messages to the standard error or a file at or above its
// level. Formatting patterns are accepted and ignored.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rapids_logger {

enum class level_enum { trace, debug, info, warn, error, critical, off };

// sink writes whole lines; nullptr stream discards them.
class sink {
 public:
  explicit sink(std::FILE* f = nullptr, bool owned = false) : f_{f}, owned_{owned} {}
  virtual ~sink()
  {
    if (owned_ && f_ != nullptr) { std::fclose(f_); }
  }
  void write(std::string const& line)
  {
    if (f_ == nullptr) { return; }
    std::lock_guard<std::mutex> lock(mu_);
    std::fputs(line.c_str(), f_);
    std::fputc('\n', f_);
    std::fflush(f_);
  }

 private:
  std::FILE* f_;
  bool owned_;
  std::mutex mu_;
};

using sink_ptr = std::shared_ptr<sink>;

struct null_sink_mt : sink {};

struct stderr_sink_mt : sink {
  stderr_sink_mt() : sink{stderr} {}
};

struct basic_file_sink_mt : sink {
  basic_file_sink_mt(std::string const& path, bool truncate) : sink{open(path, truncate), true} {}

 private:
  static std::FILE* open(std::string const& path, bool truncate)
  {
    std::FILE* f = std::fopen(path.c_str(), truncate ? "w" : "a");
    if (f == nullptr) { throw std::runtime_error("cannot open " + path); }
    return f;
  }
};

class logger {
 public:
  logger(std::string name, std::initializer_list<sink_ptr> sinks) : name_{std::move(name)}, sinks_{sinks}
  {
  }
  void set_pattern(std::string const&) {}
  void set_level(level_enum l) { level_ = l; }
  [[nodiscard]] level_enum level() const { return level_; }

  // log formats a message printf-style; a lone std::string is printed as is.
  void log(level_enum l, std::string const& msg) { emit(l, msg); }
  template <typename... Args>
  void log(level_enum l, char const* fmt, Args... args)
  {
    if (l < level_ || level_ == level_enum::off) { return; }
    if constexpr (sizeof...(Args) == 0) {
      emit(l, fmt);
    } else {
      int n = std::snprintf(nullptr, 0, fmt, args...);
      if (n < 0) { return; }
      std::string s(static_cast<std::size_t>(n) + 1, '\0');
      std::snprintf(s.data(), s.size(), fmt, args...);
      s.resize(static_cast<std::size_t>(n));
      emit(l, s);
    }
  }

 private:
  void emit(level_enum l, std::string const& msg)
  {
    if (l < level_ || level_ == level_enum::off) { return; }
    for (auto const& s : sinks_) {
      s->write("[" + name_ + "] " + msg);
    }
  }
  std::string name_;
  std::vector<sink_ptr> sinks_;
  level_enum level_{level_enum::info};
};

}  // namespace rapids_logger
