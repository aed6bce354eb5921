#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bert/checkpoint/tensor_map.h"
#include "bert/model/bert_config.h"

namespace bert {

/// The HF file name of unsharded safetensors weights.
inline constexpr const char* kSafetensorsWeightsFile = "model.safetensors";

/// The SentencePiece model file names PretrainedDir::find looks for, in its order of preference.
inline constexpr const char* kSentencePieceFiles[] = {"spiece.model", "spm.model",
                                                      "sentencepiece.bpe.model", "tokenizer.model"};

enum class WeightsFormat {
  kSafetensors,         ///< model.safetensors
  kSafetensorsSharded,  ///< model.safetensors.index.json + shards
  kTorchBin,            ///< pytorch_model.bin (torch.save zip)
  kTorchBinSharded,     ///< pytorch_model.bin.index.json + shards
};

/// The files of a Hugging Face model directory. Weights are chosen in HF's order of
/// preference: model.safetensors, its sharded index, pytorch_model.bin, its sharded index.
struct PretrainedDir {
  std::filesystem::path dir;
  std::filesystem::path config;                           ///< config.json
  std::optional<std::filesystem::path> vocab;             ///< vocab.txt (WordPiece)
  std::optional<std::filesystem::path> sentencepiece;     ///< spiece.model / spm.model / *.model
  std::optional<std::filesystem::path> bpe_vocab;         ///< vocab.json (byte-level BPE)
  std::optional<std::filesystem::path> bpe_merges;        ///< merges.txt (byte-level BPE)
  std::optional<std::filesystem::path> tokenizer_config;  ///< tokenizer_config.json
  std::filesystem::path weights;
  WeightsFormat format = WeightsFormat::kSafetensors;

  /// Throws CheckpointError naming the directory and what is missing in it.
  static PretrainedDir find(const std::filesystem::path& dir);
};

/// The config.json of `dir` for building its model: BertConfig::from_file, then a
/// CheckpointError when the weights files of `dir` are too small to hold the encoder it
/// describes (2 bytes a parameter, the smallest float type), so that a config.json cannot make
/// bertft allocate what its weights cannot fill.
BertConfig read_model_config(const PretrainedDir& dir);

/// Reads every tensor of a weights file or sharded index (any WeightsFormat), converting
/// floating tensors to `dtype` when given. Throws CheckpointError.
TensorMap read_weights(const std::filesystem::path& weights,
                       std::optional<torch::ScalarType> dtype = std::nullopt);

/// Writes `tensors` in HF layout: one model.safetensors, or, when their size exceeds
/// `max_shard_bytes` (> 0), shards model-0000i-of-0000n.safetensors plus
/// model.safetensors.index.json. Every file is written atomically.
void save_weights(const std::filesystem::path& dir,
                  const TensorMap& tensors,
                  int64_t max_shard_bytes = 0);

/// HF's name of the floating-point type of `tensors`, as config.json's torch_dtype holds it
/// (save_pretrained writes its first floating parameter's): "float32", "float16", "bfloat16" or
/// "float64"; "float32" when no tensor is floating.
std::string torch_dtype_name(const TensorMap& tensors);

/// Writes config.json (atomically) for `config` with `architectures` set to `architecture` and
/// `torch_dtype` (the weights' type, torch_dtype_name) beside them.
void save_config(const std::filesystem::path& dir,
                 const BertConfig& config,
                 const std::string& architecture,
                 const std::string& torch_dtype = "float32");

}  // namespace bert
