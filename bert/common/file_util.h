#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace bert {

/// Reads a whole file; throws bert::Error naming the path if it cannot be opened or read.
std::string read_file(const std::filesystem::path& path);

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written,
/// flushed to disk and renamed over `path`. A crash leaves either the old or the new file,
/// never a partial one. Creates missing parent directories. The file's mode is a new file's
/// (0666 less the umask). Throws bert::Error on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// Removes `path` and, for a directory, everything under it (links themselves, not what they
/// point to); a path that does not exist is no error. Throws bert::Error naming the entry that
/// could not be removed. Through POSIX nftw(), not std::filesystem::remove_all: a pip LibTorch
/// (a GPU machine's) exports its own copy of libstdc++'s std::filesystem
/// (pytorch/pytorch#133437), and bertft built against PyTorch 2.11 died in remove_all (a call
/// through a null pointer) when it removed an old checkpoint.
void remove_tree(const std::filesystem::path& path);

/// The same, errors returned in `error` rather than thrown (cleanup that must not throw).
void remove_tree(const std::filesystem::path& path, std::error_code& error) noexcept;

/// `path` as the directory it names: absolute and lexically normal, a trailing "/" or "/."
/// dropped ("dir", "dir/" and "dir/." are one directory, and a staging directory beside it
/// takes its name).
std::filesystem::path directory_path(const std::filesystem::path& path);

/// Fills the staging directory ".tmp-<name>" beside directory `dir` (as directory_path gives
/// it) with `write` and returns it; it is cleared first (left by a run that died) and removed
/// when `write` throws. The caller moves it into place.
std::filesystem::path write_staged(
    const std::filesystem::path& dir,
    const std::function<void(const std::filesystem::path& staging)>& write);

/// The entries of directory `dir` whose name `foreign` accepts, sorted, for a message: "a, b,
/// c and 2 more" (at most three named); "" when there are none.
std::string foreign_entries(const std::filesystem::path& dir,
                            const std::function<bool(const std::string& name)>& foreign);

/// Throws ConfigError "<option> <out>: is the input <input option> (<path>); ..." where
/// writing `out` would replace one of `inputs` (option name, path): the same file through any
/// path or link. Called before the work, so no input is lost to its own output.
void check_out_is_not_input(
    const std::filesystem::path& out,
    const std::string& option,
    const std::vector<std::pair<std::string, std::filesystem::path>>& inputs);

}  // namespace bert
