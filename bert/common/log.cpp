#include "bert/common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace bert::log {
namespace {

Level initial_level() {
  const char* env = std::getenv("BERTFT_LOG_LEVEL");
  if (env == nullptr) return Level::kInfo;
  const std::string value(env);
  if (value == "debug") return Level::kDebug;
  if (value == "warn") return Level::kWarn;
  if (value == "error") return Level::kError;
  if (value == "off") return Level::kOff;
  return Level::kInfo;
}

std::atomic<int> g_level{static_cast<int>(initial_level())};
std::atomic<int> g_rank{0};
std::mutex g_mutex;

const char* prefix(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug: ";
    case Level::kInfo:
      return "";
    case Level::kWarn:
      return "warning: ";
    case Level::kError:
      return "error: ";
    case Level::kOff:
      break;
  }
  return "";
}

}  // namespace

void set_level(Level level) {
  g_level = static_cast<int>(level);
}
Level level() {
  return static_cast<Level>(g_level.load());
}
void set_rank(int rank) {
  g_rank = rank;
}

bool enabled(Level level) {
  if (static_cast<int>(level) < g_level.load()) return false;
  return g_rank.load() == 0 || level >= Level::kError;
}

void write(Level level, std::string_view message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const int rank = g_rank.load();
  if (rank != 0) std::fprintf(stderr, "[rank %d] ", rank);
  std::fprintf(stderr, "%s%.*s\n", prefix(level), static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(seconds > 0 ? seconds : 0);
  return s >= 3600 ? fmt::format("{}h{:02d}m", s / 3600, (s / 60) % 60)
                   : fmt::format("{}m{:02d}s", s / 60, s % 60);
}

}  // namespace bert::log
