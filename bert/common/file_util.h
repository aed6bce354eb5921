#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace bert {

/// Reads a whole file; throws bert::Error naming the path if it cannot be opened or read.
std::string read_file(const std::filesystem::path& path);

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written,
/// flushed to disk and renamed over `path`. A crash leaves either the old or the new file,
/// never a partial one. Creates missing parent directories. Throws bert::Error on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace bert
