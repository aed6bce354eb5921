#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"
#include "bert/model/bert_model.h"
#include "bert/tokenizer/tokenizer.h"
#include "data/data_spec.h"

/// Sentence embeddings (`bertft embed`) and exact cosine search over them (`bertft similar`).
namespace bert::recipes {

/// How token vectors become one sentence vector: [CLS]'s, the mean of the real tokens (padding
/// excluded, as sentence-transformers' mean pooling), or their element-wise maximum.
enum class Pooling { kCls, kMean, kMax };
/// "cls" | "mean" | "max" (EnumNames<Pooling>; enum_name() gives the name back); ConfigError
/// naming the choices otherwise.
Pooling parse_pooling(const std::string& name);

/// hidden [batch, seq, width], attention_mask [batch, seq] (1 = token) -> [batch, width].
torch::Tensor pool(const torch::Tensor& hidden,
                   const torch::Tensor& attention_mask,
                   Pooling pooling);

struct EmbedOptions {
  Pooling pooling = Pooling::kCls;
  bool normalize = false;  ///< L2-normalise each vector (then a dot product is the cosine)
  int64_t max_seq_length = 128;
  int64_t batch_size = 32;
};

/// The encoder of any BERT directory (a base model, or a fine-tuned task model whose head is
/// ignored) with its tokenizer, in inference mode.
class SentenceEncoder {
 public:
  /// Throws CheckpointError when encoder weights are missing (only the pooler may be).
  /// `precision`: fp32, bf16 (autocast) or int8 (the encoder's projections in dynamic int8,
  /// bert/model/linear.h; CPU only, ConfigError otherwise).
  SentenceEncoder(const std::filesystem::path& model_dir,
                  torch::Device device = torch::kCPU,
                  const std::string& precision = "fp32");

  /// One vector per text, float32 on the CPU: [texts.size(), hidden]. Texts are cut to
  /// min(max_seq_length, max_position_embeddings) tokens and sorted by length into batches (less
  /// padding); the result is in input order.
  torch::Tensor encode(const std::vector<std::string>& texts, const EmbedOptions& options) const;
  /// The same from token ids already made (the HF parity test's entry point).
  torch::Tensor encode_ids(const torch::Tensor& input_ids,
                           const torch::Tensor& attention_mask,
                           const EmbedOptions& options) const;

  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  int64_t hidden_size() const { return hidden_; }

 private:
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  mutable BertModel model_{nullptr};  // forward() is not const in torch::nn
  torch::Device device_;
  bool bf16_ = false;
  int64_t hidden_ = 0;
  int64_t max_positions_ = 0;
};

/// Texts with their ids. A `.txt` file (or format "lines") gives one text per non-empty line, id
/// = its line number; SQuAD JSON gives its questions (`field` "question", id = the question's)
/// or its distinct paragraphs ("context", id = "title/paragraph-number"); the other formats give
/// text_a (and text_b joined after a space) with the reader's id column or "file:line".
struct TextRows {
  std::vector<std::string> ids;
  std::vector<std::string> texts;
};
TextRows read_texts(const data::DataSpec& spec, const std::string& field = "");

/// An embedding file: vectors [n, width] float32, the ids beside them and how they were made
/// (model, pooling, normalize) so `similar` can encode queries the same way.
struct EmbeddingFile {
  torch::Tensor vectors;
  std::vector<std::string> ids;
  nlohmann::json info = nlohmann::json::object();
};

/// Writes by extension, atomically: `.safetensors` (tensor "embeddings"; ids and info in the
/// metadata), `.npy` (float32 [n, width]; ids in `<file>.ids.txt`, info in `<file>.info.json`),
/// `.jsonl` ({"id", "embedding"} per line; info not kept). DataError for another extension.
void write_embeddings(const std::filesystem::path& path, const EmbeddingFile& file);
/// Reads a `.safetensors` or `.npy` written by write_embeddings (CheckpointError when malformed
/// or another extension). A `.npy` without its sidecars has row numbers as ids and no info.
EmbeddingFile read_embeddings(const std::filesystem::path& path);
/// The vectors of a `.npy` file: NPY 1.0, little-endian float32, C order, shape (rows, width).
/// CheckpointError naming the file for anything else (a header past the end, a shape whose size
/// overflows or disagrees with the data).
torch::Tensor read_npy(const std::filesystem::path& path);

/// Exact cosine top-k of each query row against every index row: one matmul per block of
/// `block` index rows, keeping the running best. `unit_index`: the rows are L2-normalised
/// already (`embed --normalize`), so the pass that normalises each block is skipped. Returns
/// (scores, row numbers), [queries, k] each, best first; k is capped at the index size.
std::pair<torch::Tensor, torch::Tensor> cosine_top_k(const torch::Tensor& index,
                                                     const torch::Tensor& queries,
                                                     int64_t k,
                                                     bool unit_index = false,
                                                     int64_t block = 65536);

}  // namespace bert::recipes

namespace bert {
template <>
struct EnumNames<recipes::Pooling> {
  static const std::vector<std::pair<const char*, recipes::Pooling>>& get();
};
}  // namespace bert
