#include "bert/common/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bert/common/error.h"

namespace bert {

std::string read_file(const std::filesystem::path& path) {
  // (An ifstream opens a directory and reads it as empty.)
  if (std::filesystem::is_directory(path))
    throw Error(fmt::format("{}: is a directory, not a file", path.string()));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read error", path.string()));
  return std::move(buffer).str();
}

namespace {

/// The mode a plain new file gets here: 0666 less the process's umask (read from
/// /proc/self/status, which umask(2) cannot do without changing it; 022 where absent).
mode_t new_file_mode() {
  mode_t mask = 022;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0) {
      mask = static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
      break;
    }
  return 0666 & ~mask;
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  const auto parent = path.parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::string tmp = path.string() + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    throw Error(
        fmt::format("{}: cannot create temporary file: {}", path.string(), std::strerror(errno)));
  }
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: {}: {}", path.string(), what, reason));
  };
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  // mkstemp's file is private (0600); the result is a file like any other (umask honoured).
  if (::fchmod(fd, new_file_mode()) != 0) fail("chmod failed");
  if (::fsync(fd) != 0) fail("fsync failed");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: close failed: {}", path.string(), std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: rename failed: {}", path.string(), reason));
  }
}

namespace {

// nftw's callback takes no context: the entry it could not remove, and why.
thread_local std::string t_failed_entry;
thread_local int t_failed_errno = 0;

int remove_entry(const char* entry, const struct stat*, int, struct FTW*) {
  if (::remove(entry) == 0 || errno == ENOENT) return 0;
  t_failed_errno = errno;
  t_failed_entry = entry;
  return -1;  // stops the walk
}

}  // namespace

void remove_tree(const std::filesystem::path& path, std::error_code& error) noexcept {
  error.clear();
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno != ENOENT) error.assign(errno, std::generic_category());
    return;
  }
  t_failed_entry.clear();
  t_failed_errno = 0;
  // Children before their directory (FTW_DEPTH), links not followed (FTW_PHYS).
  if (::nftw(path.c_str(), remove_entry, 32, FTW_DEPTH | FTW_PHYS) != 0) {
    const int why = t_failed_errno != 0 ? t_failed_errno : errno;
    if (why != ENOENT) error.assign(why, std::generic_category());
  }
}

void remove_tree(const std::filesystem::path& path) {
  std::error_code error;
  remove_tree(path, error);
  if (error)
    throw Error(fmt::format("{}: cannot remove: {}",
                            t_failed_entry.empty() ? path.string() : t_failed_entry,
                            error.message()));
}

std::filesystem::path directory_path(const std::filesystem::path& path) {
  auto dir = std::filesystem::absolute(path).lexically_normal();
  return dir.has_filename() ? dir : dir.parent_path();
}

std::filesystem::path write_staged(
    const std::filesystem::path& dir,
    const std::function<void(const std::filesystem::path& staging)>& write) {
  const auto staging = dir.parent_path() / (".tmp-" + dir.filename().string());
  remove_tree(staging);
  std::filesystem::create_directories(staging);
  try {
    write(staging);
  } catch (...) {
    std::error_code ignored;
    remove_tree(staging, ignored);
    throw;
  }
  return staging;
}

std::string foreign_entries(const std::filesystem::path& dir,
                            const std::function<bool(const std::string& name)>& foreign) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (auto name = entry.path().filename().string(); foreign(name)) names.push_back(name);
  std::sort(names.begin(), names.end());
  std::string listed;
  for (size_t i = 0; i < names.size() && i < 3; ++i) listed += (i ? ", " : "") + names[i];
  if (names.size() > 3) listed += fmt::format(" and {} more", names.size() - 3);
  return listed;
}

void check_out_is_not_input(
    const std::filesystem::path& out,
    const std::string& option,
    const std::vector<std::pair<std::string, std::filesystem::path>>& inputs) {
  std::error_code error;  // a path that does not exist is no input
  for (const auto& [input_option, input] : inputs)
    if (!input.empty() && std::filesystem::equivalent(out, input, error))
      throw ConfigError(fmt::format(
          "{} {}: is the input {} ({}); writing there would replace it, so give another file",
          option, out.string(), input_option, input.string()));
}

}  // namespace bert
