#include "bert/common/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bert/common/error.h"

namespace bert {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read error", path.string()));
  return std::move(buffer).str();
}

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
  if (::fchmod(fd, 0644) != 0) fail("chmod failed");
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

}  // namespace bert
