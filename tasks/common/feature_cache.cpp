#include "tasks/common/feature_cache.h"

#include <fmt/format.h>

#include <chrono>
#include <istream>
#include <limits>
#include <ostream>
#include <sstream>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"

namespace bert::tasks {
namespace {

constexpr char kMagic[8] = {'B', 'F', 'T', 'F', 'E', 'A', 'T', '2'};

template <class T>
void write_raw(std::ostream& out, const T& value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <class T>
T read_raw(std::istream& in) {
  T value{};
  if (!in.read(reinterpret_cast<char*>(&value), sizeof(T)))
    throw DataError("feature cache: file ends early");
  return value;
}

size_t read_count(std::istream& in) {
  const int64_t n = read_i64(in);
  if (n < 0 || n > (int64_t{1} << 40)) throw DataError("feature cache: corrupt length");
  return static_cast<size_t>(n);
}

}  // namespace

void write_i64(std::ostream& out, int64_t value) {
  write_raw(out, value);
}
int64_t read_i64(std::istream& in) {
  return read_raw<int64_t>(in);
}

void write_i32s(std::ostream& out, const std::vector<int64_t>& values) {
  write_i64(out, static_cast<int64_t>(values.size()));
  for (const auto v : values) {
    TORCH_CHECK(
        v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
        "feature cache: value ", v, " does not fit int32");
    write_raw(out, static_cast<int32_t>(v));
  }
}

std::vector<int64_t> read_i32s(std::istream& in) {
  std::vector<int64_t> values(read_count(in));
  for (auto& v : values) v = read_raw<int32_t>(in);
  return values;
}

void write_pairs(std::ostream& out, const std::vector<std::pair<int64_t, int64_t>>& values) {
  write_i64(out, static_cast<int64_t>(values.size()));
  for (const auto& [a, b] : values) {
    write_raw(out, a);
    write_raw(out, b);
  }
}

std::vector<std::pair<int64_t, int64_t>> read_pairs(std::istream& in) {
  std::vector<std::pair<int64_t, int64_t>> values(read_count(in));
  for (auto& [a, b] : values) {
    a = read_i64(in);
    b = read_i64(in);
  }
  return values;
}

void save_features(const std::filesystem::path& path, const FeatureSet& features) {
  std::ostringstream out;
  out.write(kMagic, sizeof(kMagic));
  write_i64(out, static_cast<int64_t>(features.features.size()));
  write_i64(out, features.pad_id);
  write_i64(out, features.labelled ? 1 : 0);
  for (const auto& f : features.features) {
    write_i64(out, f.example);
    write_i64(out, static_cast<int64_t>(f.input_ids.size()));
    for (size_t r = 0; r < f.input_ids.size(); ++r) {
      write_i32s(out, f.input_ids[r]);
      write_i32s(out, f.token_type_ids[r]);
    }
    write_i32s(out, f.token_labels);
    write_i64(out, f.label);
    write_i32s(out, f.label_set);
    write_raw(out, f.target);
    write_i64(out, f.start_position);
    write_i64(out, f.end_position);
  }
  features.write_extra(out);
  write_file_atomic(path, out.str());
}

std::shared_ptr<FeatureSet> load_features(const std::filesystem::path& path,
                                          const TaskAdapter& adapter,
                                          std::shared_ptr<const ExampleSet> examples) {
  std::istringstream in(read_file(path));
  try {
    char magic[sizeof(kMagic)];
    if (!in.read(magic, sizeof(magic)) || !std::equal(magic, magic + sizeof(magic), kMagic))
      throw DataError("not a bertft feature cache file of this version");
    auto set = adapter.new_feature_set();
    set->features.resize(read_count(in));
    set->pad_id = read_i64(in);
    set->labelled = read_i64(in) != 0;
    for (auto& f : set->features) {
      f.example = read_i64(in);
      if (f.example < 0 || static_cast<size_t>(f.example) >= examples->size())
        throw DataError(fmt::format("feature of example {} but the data has {} examples", f.example,
                                    examples->size()));
      const size_t rows = read_count(in);
      f.input_ids.resize(rows);
      f.token_type_ids.resize(rows);
      for (size_t r = 0; r < rows; ++r) {
        f.input_ids[r] = read_i32s(in);
        f.token_type_ids[r] = read_i32s(in);
      }
      f.token_labels = read_i32s(in);
      f.label = read_i64(in);
      f.label_set = read_i32s(in);
      f.target = read_raw<float>(in);
      f.start_position = read_i64(in);
      f.end_position = read_i64(in);
    }
    set->read_extra(in);
    if (in.peek() != std::char_traits<char>::eof()) throw DataError("trailing bytes");
    set->examples = std::move(examples);
    return set;
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", path.string(), e.what()));
  }
}

std::shared_ptr<FeatureSet> cached_featurize(const TaskAdapter& adapter,
                                             std::shared_ptr<const ExampleSet> examples,
                                             const tok::Tokenizer& tokenizer,
                                             bool training,
                                             const std::filesystem::path& cache_dir,
                                             const std::string& key) {
  const auto path = cache_dir / fmt::format("{:016x}.features", fnv1a64(key));
  if (std::filesystem::exists(path)) {
    try {
      const auto start = std::chrono::steady_clock::now();
      auto set = load_features(path, adapter, examples);
      log::info("[cache] {} features of {} from {} ({:.2f}s)", set->features.size(),
                examples->source, path.string(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return set;
    } catch (const DataError& e) {
      log::warn("[cache] {}; featurizing again", e.what());
    }
  }
  auto set = adapter.featurize(examples, tokenizer, training);
  std::filesystem::create_directories(cache_dir);
  save_features(path, *set);
  log::info("[cache] wrote {} features of {} to {}", set->features.size(), examples->source,
            path.string());
  return set;
}

}  // namespace bert::tasks
