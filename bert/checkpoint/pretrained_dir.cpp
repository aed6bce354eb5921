#include "bert/checkpoint/pretrained_dir.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "bert/checkpoint/safetensors.h"
#include "bert/checkpoint/torch_pickle.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/common/strings.h"

namespace bert {
namespace fs = std::filesystem;
using json = nlohmann::json;

PretrainedDir PretrainedDir::find(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw CheckpointError(
        fmt::format("{}: not a directory (expected a Hugging Face model "
                    "directory with config.json and weights)",
                    dir.string()));
  PretrainedDir d;
  d.dir = dir;
  d.config = dir / "config.json";
  if (!fs::exists(d.config)) throw CheckpointError(fmt::format("{}: no config.json", dir.string()));
  if (fs::exists(dir / "vocab.txt")) d.vocab = dir / "vocab.txt";
  for (const char* name : kSentencePieceFiles) {
    if (!d.sentencepiece && fs::exists(dir / name)) d.sentencepiece = dir / name;
  }
  if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) {
    d.bpe_vocab = dir / "vocab.json";
    d.bpe_merges = dir / "merges.txt";
  }
  if (fs::exists(dir / "tokenizer_config.json")) d.tokenizer_config = dir / "tokenizer_config.json";
  const std::pair<const char*, WeightsFormat> candidates[] = {
      {kSafetensorsWeightsFile, WeightsFormat::kSafetensors},
      {"model.safetensors.index.json", WeightsFormat::kSafetensorsSharded},
      {"pytorch_model.bin", WeightsFormat::kTorchBin},
      {"pytorch_model.bin.index.json", WeightsFormat::kTorchBinSharded},
  };
  for (const auto& [name, format] : candidates) {
    if (fs::exists(dir / name)) {
      d.weights = dir / name;
      d.format = format;
      return d;
    }
  }
  throw CheckpointError(
      fmt::format("{}: no weights (looked for model.safetensors, model.safetensors.index.json, "
                  "pytorch_model.bin, pytorch_model.bin.index.json)",
                  dir.string()));
}

namespace {

TensorMap read_single(const fs::path& file, std::optional<torch::ScalarType> dtype) {
  if (ends_with(file.string(), ".safetensors")) return SafetensorsReader(file).read_all(dtype);
  TensorMap tensors = load_torch_state_dict(file);
  if (dtype) {
    for (auto& [name, t] : tensors)
      if (torch::isFloatingType(t.scalar_type())) t = t.to(*dtype);
  }
  return tensors;
}

}  // namespace

BertConfig read_model_config(const PretrainedDir& dir) {
  auto config = BertConfig::from_file(dir.config);
  uintmax_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir.dir, ec)) {
    const auto ext = entry.path().extension();
    if (ext == ".safetensors" || ext == ".bin") bytes += entry.file_size(ec);
  }
  const auto needed = static_cast<uintmax_t>(config.encoder_parameters()) * 2;
  if (bytes < needed)
    throw CheckpointError(fmt::format(
        "{}: config.json describes an encoder of {} parameters ({} bytes at least), but the "
        "weights in {} have {} bytes",
        dir.config.string(), config.encoder_parameters(), needed, dir.dir.string(), bytes));
  return config;
}

TensorMap read_weights(const fs::path& weights, std::optional<torch::ScalarType> dtype) {
  if (!ends_with(weights.string(), ".index.json")) return read_single(weights, dtype);
  json index;
  try {
    index = parse_json_limited(read_file(weights));
  } catch (const json::parse_error& e) {
    throw CheckpointError(fmt::format("{}: invalid JSON: {}", weights.string(), e.what()));
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw CheckpointError(
        fmt::format("{}: expected an object with a 'weight_map'", weights.string()));
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      throw CheckpointError(
          fmt::format("{}: weight_map['{}'] must be a file name", weights.string(), name));
    const auto file = shard.get<std::string>();
    if (file.find('/') != std::string::npos || file == "..")
      throw CheckpointError(fmt::format("{}: shard '{}' must be a file in the same directory",
                                        weights.string(), file));
    by_shard[file].insert(name);
  }
  TensorMap out;
  for (const auto& [file, names] : by_shard) {
    const fs::path shard_path = weights.parent_path() / file;
    if (!fs::exists(shard_path))
      throw CheckpointError(fmt::format("{}: shard '{}' named in the index does not exist",
                                        weights.string(), shard_path.string()));
    TensorMap shard = read_single(shard_path, dtype);
    for (const auto& name : names) {
      auto it = shard.find(name);
      if (it == shard.end())
        throw CheckpointError(fmt::format("{}: the index puts '{}' in {}, which lacks it",
                                          weights.string(), name, shard_path.string()));
      out.emplace(name, it->second);
    }
  }
  return out;
}

void save_weights(const fs::path& dir, const TensorMap& tensors, int64_t max_shard_bytes) {
  int64_t total = 0;
  for (const auto& [name, t] : tensors) total += t.numel() * t.element_size();
  if (max_shard_bytes <= 0 || total <= max_shard_bytes) {
    save_safetensors(dir / kSafetensorsWeightsFile, tensors);
    return;
  }
  std::vector<TensorMap> shards(1);
  int64_t current = 0;
  for (const auto& [name, t] : tensors) {
    const int64_t bytes = t.numel() * t.element_size();
    if (current > 0 && current + bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().emplace(name, t);
    current += bytes;
  }
  json weight_map = json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    save_safetensors(dir / file, shards[i]);
    for (const auto& [name, t] : shards[i]) weight_map[name] = file;
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

std::string torch_dtype_name(const TensorMap& tensors) {
  for (const auto& [name, t] : tensors) {
    switch (t.scalar_type()) {
      case torch::kFloat16:
        return "float16";
      case torch::kBFloat16:
        return "bfloat16";
      case torch::kFloat64:
        return "float64";
      case torch::kFloat32:
        return "float32";
      default:
        break;  // integer buffers (position ids) say nothing
    }
  }
  return "float32";
}

void save_config(const fs::path& dir,
                 const BertConfig& config,
                 const std::string& architecture,
                 const std::string& torch_dtype) {
  BertConfig copy = config;
  copy.architectures({architecture});
  json out = copy.to_json();
  out["transformers_version"] = out.value("transformers_version", "4.31.0");
  out["torch_dtype"] = torch_dtype;
  write_file_atomic(dir / "config.json", out.dump(2) + "\n");
}

}  // namespace bert
