#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

/// The one logger of bertft: fmt formatting, levels, `[tag]`-prefixed messages by convention,
/// written to stderr. Only rank 0 of a distributed job prints (set_rank()). Thread-safe.
namespace bert::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

/// Messages below `level` are dropped. Default kInfo; BERTFT_LOG_LEVEL=debug|info|warn|error|off
/// in the environment sets the initial value.
void set_level(Level level);
Level level();
/// Ranks other than 0 print only errors.
void set_rank(int rank);
bool enabled(Level level);
/// A duration for a progress line: "4m05s", "2h07m".
std::string format_duration(double seconds);
/// Writes one already formatted line (a newline is appended).
void write(Level level, std::string_view message);

template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kDebug))
    write(Level::kDebug, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kInfo)) write(Level::kInfo, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kWarn)) write(Level::kWarn, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kError))
    write(Level::kError, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace bert::log
