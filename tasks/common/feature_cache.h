#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tasks/task_adapter.h"

namespace bert::tasks {

/// Binary helpers for feature cache files (host byte order: a cache is a local artifact, keyed
/// by everything that produced it, never shipped). Readers throw DataError on a short stream.
void write_i64(std::ostream& out, int64_t value);
int64_t read_i64(std::istream& in);
void write_i32s(std::ostream& out, const std::vector<int64_t>& values);  ///< values must fit int32
std::vector<int64_t> read_i32s(std::istream& in);
void write_pairs(std::ostream& out, const std::vector<std::pair<int64_t, int64_t>>& values);
std::vector<std::pair<int64_t, int64_t>> read_pairs(std::istream& in);

/// Writes `features` (not their examples) to `path` atomically.
void save_features(const std::filesystem::path& path, const FeatureSet& features);

/// Reads a file of save_features() into adapter.new_feature_set() and attaches `examples`.
/// Throws DataError naming `path` on a truncated file, another format version, or features
/// that point past `examples`.
std::shared_ptr<FeatureSet> load_features(const std::filesystem::path& path,
                                          const TaskAdapter& adapter,
                                          std::shared_ptr<const ExampleSet> examples);

/// adapter.featurize() through a cache directory: the file is named by a hash of `key` (which
/// must name everything the features depend on: data bytes, tokenizer, task options, labels,
/// split role). A hit loads; a miss featurizes and saves. An unreadable cache file is
/// featurized again and replaced (logged). Several processes may share `cache_dir`.
std::shared_ptr<FeatureSet> cached_featurize(const TaskAdapter& adapter,
                                             std::shared_ptr<const ExampleSet> examples,
                                             const tok::Tokenizer& tokenizer,
                                             bool training,
                                             const std::filesystem::path& cache_dir,
                                             const std::string& key);

}  // namespace bert::tasks
