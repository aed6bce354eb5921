#include "recipes/runner/embed.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "bert/checkpoint/family_keys.h"
#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "bert/model/linear.h"
#include "bert/model/onednn_linear.h"
#include "bert/tokenizer/factory.h"
#include "data/readers.h"
#include "data/text_file.h"
#include "tasks/training/precision.h"

namespace bert::recipes {

namespace fs = std::filesystem;
using json = nlohmann::json;

Pooling parse_pooling(const std::string& name) {
  if (const auto pooling = parse_enum<Pooling>(name)) return *pooling;
  throw ConfigError("pooling: expected " + enum_choices<Pooling>() + ", got '" + name + "'");
}

torch::Tensor pool(const torch::Tensor& hidden,
                   const torch::Tensor& attention_mask,
                   Pooling pooling) {
  if (pooling == Pooling::kCls) return hidden.select(1, 0);
  const auto mask = attention_mask.unsqueeze(-1).to(hidden.scalar_type());  // [batch, seq, 1]
  if (pooling == Pooling::kMean) return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9);
  // Padding can never be the maximum: it is moved to the lowest value first.
  return hidden.masked_fill(mask == 0, std::numeric_limits<float>::lowest()).amax(1);
}

SentenceEncoder::SentenceEncoder(const fs::path& model_dir,
                                 torch::Device device,
                                 const std::string& precision)
    : device_(device), bf16_(precision == "bf16") {
  if (precision != "fp32" && precision != "bf16" && precision != "int8")
    throw ConfigError("precision " + precision + ": fp32, bf16 or int8");
  if (precision == "int8" && !device.is_cpu())
    throw ConfigError("precision int8 runs on the CPU only, not " + device.str());
  const auto dir = PretrainedDir::find(model_dir);
  const auto config = read_model_config(dir);
  const TensorMap tensors = read_weights(dir.weights);
  bool has_pooler = false;
  for (const auto& [key, value] : tensors) {
    const auto base = base_prefix_of(key);  // "bert.", "roberta.", ...
    has_pooler = has_pooler || starts_with(base ? key.substr(base->size()) : key, "pooler.");
  }
  model_ = BertModel(config, has_pooler);
  LoadOptions options;
  options.strict = false;  // a task model's head (classifier., cls., qa_outputs.) is not used
  const auto report = load_state_dict(*model_, tensors, dir.weights.string(), options);
  if (!report.missing.empty() || !report.mismatched.empty())
    throw CheckpointError(fmt::format("{}: not a BERT encoder for embeddings: {}",
                                      dir.weights.string(), report.summary()));
  model_->to(device_);
  model_->eval();
  if (precision == "int8") {
    const auto n = quantize_dynamic_int8(*model_);
    log::info("[embed] int8: {} encoder projections in dynamic int8 ({})", n, int8_engine());
  }
  tokenizer_ = tok::load_tokenizer(dir, config.vocab_size());
  hidden_ = config.hidden_size();
  max_positions_ = config.max_sequence_length();
}

torch::Tensor SentenceEncoder::encode_ids(const torch::Tensor& input_ids,
                                          const torch::Tensor& attention_mask,
                                          const EmbedOptions& options) const {
  c10::InferenceMode inference;
  const auto ids = input_ids.to(device_), mask = attention_mask.to(device_);
  torch::Tensor hidden;
  {
    const tasks::AutocastScope autocast(bf16_ ? tasks::Precision::kBf16 : tasks::Precision::kFp32,
                                        device_);
    // [CLS] pooling reads the first position alone: the last layer computes only that row.
    ForwardOptions forward;
    forward.first_token_only = options.pooling == Pooling::kCls;
    hidden = model_->forward(ids, mask, torch::zeros_like(ids), forward).last_hidden_state;
  }
  auto vectors = pool(hidden.to(torch::kFloat), mask, options.pooling);
  if (options.normalize)
    vectors = torch::nn::functional::normalize(
        vectors, torch::nn::functional::NormalizeFuncOptions().p(2).dim(1).eps(1e-12));
  return vectors.to(torch::kCPU, torch::kFloat).contiguous();
}

torch::Tensor SentenceEncoder::encode(const std::vector<std::string>& texts,
                                      const EmbedOptions& options) const {
  tok::EncodeOptions encode_options;
  // Longer texts are cut to what the model has positions for, as HF pipelines cut them to the
  // tokenizer's model_max_length.
  encode_options.max_length = std::min(options.max_seq_length, max_positions_);
  std::vector<std::pair<std::string, std::optional<std::string>>> inputs;
  inputs.reserve(texts.size());
  for (const auto& text : texts) inputs.emplace_back(text, std::nullopt);
  const auto encodings = tokenizer_->encode_batch(inputs, encode_options);
  // Longest first, so each batch pads to about its own length.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encodings[a].size() > encodings[b].size(); });
  auto result = torch::empty({static_cast<int64_t>(texts.size()), hidden_});
  const auto batch = static_cast<size_t>(std::max<int64_t>(1, options.batch_size));
  for (size_t start = 0; start < order.size(); start += batch) {
    const size_t end = std::min(order.size(), start + batch);
    const auto width = static_cast<int64_t>(encodings[order[start]].size());
    auto ids = torch::full({static_cast<int64_t>(end - start), width},
                           tokenizer_->special_tokens().pad_id, torch::kLong);
    auto mask = torch::zeros({static_cast<int64_t>(end - start), width}, torch::kLong);
    for (size_t row = start; row < end; ++row) {
      const auto& e = encodings[order[row]];
      const auto n = static_cast<int64_t>(e.size());
      const auto r = static_cast<int64_t>(row - start);
      ids[r].slice(0, 0, n).copy_(torch::tensor(e.ids, torch::kLong));
      mask[r].slice(0, 0, n).fill_(1);
    }
    const auto vectors = encode_ids(ids, mask, options);
    for (size_t row = start; row < end; ++row)
      result[static_cast<int64_t>(order[row])].copy_(vectors[static_cast<int64_t>(row - start)]);
  }
  return result;
}

TextRows read_texts(const data::DataSpec& spec, const std::string& field) {
  TextRows rows;
  const bool lines = spec.format == data::DataFormat::kAuto && spec.path.extension() == ".txt";
  if (lines) {
    if (!spec.columns.empty() || !spec.header)
      throw ConfigError(spec.path.string() +
                        ": a .txt file is read as lines, one text each, without columns (give "
                        "--format tsv or csv to read it as a table)");
    const auto file = data::read_text_file(spec.path);  // UTF-8 checked, naming line and column
    for (const auto& line : data::split_lines(file.text)) {
      if (data::is_blank(line.text)) continue;
      rows.ids.push_back(std::to_string(line.number));
      rows.texts.emplace_back(line.text);
      if (spec.limit > 0 && static_cast<int64_t>(rows.texts.size()) >= spec.limit) break;
    }
    return rows;
  }
  const bool squad = spec.format == data::DataFormat::kSquad ||
                     (spec.format == data::DataFormat::kAuto && spec.path.extension() == ".json");
  if (squad) {  // read_squad refuses columns and a header setting
    const bool contexts = field == "context";
    if (!contexts && !field.empty() && field != "question")
      throw ConfigError("--field: SQuAD data has 'question' or 'context', got '" + field + "'");
    std::set<std::string> seen;
    std::map<std::string, int> paragraphs;  // title -> paragraphs seen
    for (const auto& q : data::read_squad(spec)) {
      if (!contexts) {
        rows.ids.push_back(q.id);
        rows.texts.push_back(q.question);
        continue;
      }
      if (!seen.insert(q.title + '\n' + q.context).second) continue;
      rows.ids.push_back(fmt::format("{}/{}", q.title, paragraphs[q.title]++));
      rows.texts.push_back(q.context);
    }
    return rows;
  }
  if (!field.empty()) throw ConfigError("--field applies to SQuAD data only");
  for (auto& e : data::read_text_examples(spec)) {
    rows.ids.push_back(e.id.empty() ? e.where : e.id);
    rows.texts.push_back(e.text_b ? e.text_a + " " + *e.text_b : e.text_a);
  }
  return rows;
}

namespace {

/// NPY format version 1.0: magic, header length, a Python-dict header padded to 64 bytes.
std::string npy_bytes(const torch::Tensor& vectors) {
  const auto v = vectors.to(torch::kFloat).contiguous();
  std::string header = fmt::format(
      "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", v.size(0), v.size(1));
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  const auto length = static_cast<uint16_t>(header.size());
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(length >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(v.data_ptr<float>()),
             static_cast<size_t>(v.numel()) * sizeof(float));
  return out;
}

}  // namespace

torch::Tensor read_npy(const fs::path& path) {
  const std::string bytes = read_file(path);
  const auto bad = [&](const std::string& what) {
    return CheckpointError(
        fmt::format("{}: not a float32 [n, width] .npy file: {}", path.string(), what));
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("no NPY magic");
  if (bytes[6] != 1) throw bad("only NPY version 1.0 is read");
  const size_t length = static_cast<unsigned char>(bytes[8]) |
                        (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (10 + length > bytes.size()) throw bad("header runs past the end");
  const std::string header = bytes.substr(10, length);
  if (header.find("'descr': '<f4'") == std::string::npos) throw bad("dtype is not '<f4'");
  if (header.find("'fortran_order': False") == std::string::npos) throw bad("Fortran order");
  long long rows = -1, width = -1;
  const auto shape = header.find("'shape': (");
  if (shape == std::string::npos ||
      std::sscanf(header.c_str() + shape + 10, "%lld, %lld)", &rows, &width) != 2 || rows < 0 ||
      width <= 0)
    throw bad("shape is not (rows, width)");
  size_t need = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(rows), static_cast<size_t>(width), &need) ||
      __builtin_mul_overflow(need, sizeof(float), &need))
    throw bad(fmt::format("shape ({}, {}) is too large", rows, width));
  if (bytes.size() - 10 - length != need)
    throw bad(
        fmt::format("{} data bytes for shape ({}, {})", bytes.size() - 10 - length, rows, width));
  auto out = torch::empty({rows, width});
  if (need > 0)  // an empty index has no data pointer to copy to
    std::memcpy(out.data_ptr<float>(), bytes.data() + 10 + length, need);
  return out;
}

namespace {

fs::path ids_path(const fs::path& npy) {
  return fs::path(npy.string() + ".ids.txt");
}

fs::path info_path(const fs::path& npy) {
  return fs::path(npy.string() + ".info.json");
}

}  // namespace

void write_embeddings(const fs::path& path, const EmbeddingFile& file) {
  TORCH_CHECK(
      file.vectors.dim() == 2 && file.vectors.size(0) == static_cast<int64_t>(file.ids.size()),
      "write_embeddings: ", file.ids.size(), " ids for vectors ", file.vectors.sizes());
  const auto ext = path.extension().string();
  if (ext == ".safetensors") {
    json meta = {{"format", "pt"}, {"ids", json(file.ids).dump()}, {"bertft", file.info.dump()}};
    save_safetensors(path, {{"embeddings", file.vectors.to(torch::kFloat).contiguous()}}, meta);
  } else if (ext == ".npy") {
    std::string ids;
    for (const auto& id : file.ids) ids += id + "\n";
    write_file_atomic(ids_path(path), ids);
    json info = file.info;  // how the vectors were made, and which vectors: a stale record shows
    info["rows"] = file.vectors.size(0);
    info["width"] = file.vectors.size(1);
    write_file_atomic(info_path(path), info.dump(2) + "\n");
    write_file_atomic(path, npy_bytes(file.vectors));
  } else if (ext == ".jsonl") {
    const auto v = file.vectors.to(torch::kFloat).contiguous();
    std::string out;
    for (int64_t i = 0; i < v.size(0); ++i) {
      const float* row = v[i].data_ptr<float>();
      json line = {{"id", file.ids[static_cast<size_t>(i)]},
                   {"embedding", std::vector<float>(row, row + v.size(1))}};
      out += line.dump() + "\n";
    }
    write_file_atomic(path, out);
  } else {
    throw DataError(path.string() + ": embeddings are written as .safetensors, .npy or .jsonl");
  }
}

EmbeddingFile read_embeddings(const fs::path& path) {
  EmbeddingFile file;
  if (path.extension() == ".npy") {
    file.vectors = read_npy(path);
    if (fs::exists(ids_path(path))) {
      const std::string ids = read_file(ids_path(path));
      for (const auto& line : data::split_lines(ids)) file.ids.emplace_back(line.text);
    }
    if (file.ids.size() != static_cast<size_t>(file.vectors.size(0))) {
      file.ids.clear();  // no usable sidecar: the row numbers are the ids
      for (int64_t i = 0; i < file.vectors.size(0); ++i) file.ids.push_back(std::to_string(i));
    }
    if (fs::exists(info_path(path))) {
      try {
        file.info = json::parse(read_file(info_path(path)));
      } catch (const json::exception& e) {
        throw CheckpointError(info_path(path).string() + ": not JSON: " + e.what());
      }
      if (!file.info.is_object())
        throw CheckpointError(info_path(path).string() + ": not a JSON object");
      // Written by embed with the vectors' shape; one written by hand may say less.
      const auto rows = file.info.value("rows", file.vectors.size(0));
      const auto width = file.info.value("width", file.vectors.size(1));
      if (rows != file.vectors.size(0) || width != file.vectors.size(1))
        throw CheckpointError(fmt::format(
            "{}: records {} x {} vectors but {} holds {} x {} (the .npy was rewritten by another "
            "program?): remove the record and give similar --model and --pooling",
            info_path(path).string(), rows, width, path.string(), file.vectors.size(0),
            file.vectors.size(1)));
      file.info.erase("rows");
      file.info.erase("width");
    }
    return file;
  }
  if (path.extension() != ".safetensors")
    throw CheckpointError(path.string() +
                          ": embeddings are read from a .safetensors or .npy file written by "
                          "bertft embed (a .jsonl is written for other tools, not read back)");
  const SafetensorsReader reader(path);
  if (!reader.contains("embeddings"))
    throw CheckpointError(path.string() + ": no tensor 'embeddings' (not written by bertft embed)");
  file.vectors = reader.get("embeddings", torch::kFloat).clone();
  if (file.vectors.dim() != 2)
    throw CheckpointError(path.string() + ": 'embeddings' must be [rows, width]");
  const auto& meta = reader.metadata();
  try {
    if (meta.contains("ids"))
      file.ids = json::parse(meta["ids"].get<std::string>()).get<std::vector<std::string>>();
    if (meta.contains("bertft")) file.info = json::parse(meta["bertft"].get<std::string>());
  } catch (const json::exception& e) {
    throw CheckpointError(path.string() + ": bad __metadata__ ids or bertft entry: " + e.what());
  }
  if (file.ids.size() != static_cast<size_t>(file.vectors.size(0)))
    throw CheckpointError(fmt::format("{}: {} ids for {} vectors", path.string(), file.ids.size(),
                                      file.vectors.size(0)));
  return file;
}

std::pair<torch::Tensor, torch::Tensor> cosine_top_k(const torch::Tensor& index,
                                                     const torch::Tensor& queries,
                                                     int64_t k,
                                                     bool unit_index,
                                                     int64_t block) {
  TORCH_CHECK(index.dim() == 2 && queries.dim() == 2 && index.size(1) == queries.size(1),
              "cosine_top_k: index ", index.sizes(), " and queries ", queries.sizes(),
              " must be [rows, width] of the same width");
  c10::InferenceMode inference;
  namespace F = torch::nn::functional;
  const auto unit = [](const torch::Tensor& x) {
    return F::normalize(x.to(torch::kFloat), F::NormalizeFuncOptions().p(2).dim(1).eps(1e-12));
  };
  const auto q = unit(queries);
  k = std::min<int64_t>(k, index.size(0));
  torch::Tensor best_scores = torch::full({q.size(0), 0}, 0.0f);
  torch::Tensor best_rows = torch::zeros({q.size(0), 0}, torch::kLong);
  for (int64_t start = 0; start < index.size(0); start += block) {
    const auto rows = index.slice(0, start, std::min(index.size(0), start + block));
    const auto part = unit_index ? rows.to(torch::kFloat) : unit(rows);
    // [queries, rows of this block], through oneDNN where bert::Linear's fp32 GEMMs go (on the
    // AMD EPYC kind 1.8-2x the speed of the OpenBLAS kernels LibTorch's matmul takes there).
    const auto scores = fast_linear(q, part, {});
    const auto [s, r] = scores.topk(std::min<int64_t>(k, part.size(0)), 1);
    const auto all_scores = torch::cat({best_scores, s}, 1);
    const auto all_rows = torch::cat({best_rows, r + start}, 1);
    const auto [top, at] = all_scores.topk(std::min<int64_t>(k, all_scores.size(1)), 1);
    best_scores = top;
    best_rows = all_rows.gather(1, at);
  }
  return {best_scores, best_rows};
}

}  // namespace bert::recipes

namespace bert {
const std::vector<std::pair<const char*, recipes::Pooling>>& EnumNames<recipes::Pooling>::get() {
  using P = recipes::Pooling;
  static const std::vector<std::pair<const char*, P>> names = {
      {"cls", P::kCls}, {"mean", P::kMean}, {"max", P::kMax}};
  return names;
}
}  // namespace bert
