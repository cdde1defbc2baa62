// Stand-in for the logger_macros.hpp that KvikIO's CMake build generates.
//
// Written for kvikgo's side-by-side benchmark (bench/kvikio/run.sh copies it
// to BUILD/include/kvikio/logger_macros.hpp). Each macro forwards to
// kvikio::default_logger(), declared by KvikIO's logger.hpp after this file
// is included, so the macros expand only at their call sites.
#pragma once

#define KVIKIO_LOG_TRACE(...) \
  ::kvikio::default_logger().log(::rapids_logger::level_enum::trace, __VA_ARGS__)
#define KVIKIO_LOG_DEBUG(...) \
  ::kvikio::default_logger().log(::rapids_logger::level_enum::debug, __VA_ARGS__)
#define KVIKIO_LOG_INFO(...) \
  ::kvikio::default_logger().log(::rapids_logger::level_enum::info, __VA_ARGS__)
#define KVIKIO_LOG_WARN(...) \
  ::kvikio::default_logger().log(::rapids_logger::level_enum::warn, __VA_ARGS__)
#define KVIKIO_LOG_ERROR(...) \
  ::kvikio::default_logger().log(::rapids_logger::level_enum::error, __VA_ARGS__)
#define KVIKIO_LOG_CRITICAL(...) \
  ::kvikio::default_logger().log(::rapids_logger::level_enum::critical, __VA_ARGS__)
