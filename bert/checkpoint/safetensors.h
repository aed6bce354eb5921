#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bert/checkpoint/tensor_map.h"

namespace bert {

/// One entry of a safetensors header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  ///< as in the file: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;  ///< byte offsets into the data section
  uint64_t end = 0;
};

/// Reads a `.safetensors` file (written by hand: no C++ library for the format is packaged).
/// The file is memory-mapped (private, copy-on-write); every header field is checked against
/// the file before any byte is read: header length, JSON, dtypes, shapes, offsets within the
/// data section, byte size = numel * dtype size, no overlaps. Any violation throws
/// CheckpointError naming the file and the tensor. Thread-safe for concurrent reads.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::filesystem::path& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const nlohmann::json& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;

  /// The tensor `name`. With `dtype` unset the file's dtype is kept and the tensor shares the
  /// mapped memory (no copy; the mapping lives as long as any such tensor). With a different
  /// floating `dtype` the values are converted. Throws CheckpointError for unknown names.
  torch::Tensor get(const std::string& name,
                    std::optional<torch::ScalarType> dtype = std::nullopt) const;

  /// All tensors, optionally converted to `dtype` (floating tensors only; integer tensors keep
  /// their type).
  TensorMap read_all(std::optional<torch::ScalarType> dtype = std::nullopt) const;

 private:
  struct Mapping;
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  std::vector<SafetensorsEntry> entries_;
  nlohmann::json metadata_ = nlohmann::json::object();
  uint64_t data_start_ = 0;
};

/// Serialises `tensors` as safetensors bytes: header with `__metadata__` first, data ordered
/// by dtype size (largest first) then name, like the reference writer. Tensors are copied to
/// contiguous CPU memory; aliases of one storage are written as separate copies.
std::string safetensors_bytes(const TensorMap& tensors,
                              const nlohmann::json& metadata = {{"format", "pt"}});

/// Writes `tensors` to `path` atomically (temporary file + rename).
void save_safetensors(const std::filesystem::path& path,
                      const TensorMap& tensors,
                      const nlohmann::json& metadata = {{"format", "pt"}});

/// safetensors dtype name <-> torch dtype; throws CheckpointError for names bertft cannot hold.
torch::ScalarType safetensors_dtype(const std::string& name);
std::string safetensors_dtype_name(torch::ScalarType dtype);

}  // namespace bert
