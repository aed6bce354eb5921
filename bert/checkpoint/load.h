#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "bert/checkpoint/tensor_map.h"

namespace bert {

/// What load_state_dict() did, in HF's terms.
struct LoadReport {
  std::string source;
  size_t loaded = 0;
  std::vector<std::string> missing;     ///< model keys the checkpoint lacks (left as initialised)
  std::vector<std::string> unexpected;  ///< checkpoint keys the model has no place for
  std::vector<std::string> mismatched;  ///< "key: checkpoint [a, b] vs model [c, d]"
  std::vector<std::string> ignored;     ///< harmless extras: old buffers, tied-weight aliases
  std::vector<std::string> renamed;     ///< legacy names mapped, e.g. "LayerNorm.gamma -> weight"

  bool clean() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// One line: counts plus the first few names of each problem.
  std::string summary() const;
};

struct LoadOptions {
  /// Missing, unexpected or mismatched keys throw CheckpointError (after collecting them all).
  bool strict = true;
  /// Model keys that may be missing even in strict mode (prefixes, e.g. a new task head
  /// "classifier.").
  std::vector<std::string> allow_missing_prefixes;
  /// Checkpoint keys that alias a model parameter (tied weights), e.g.
  /// "cls.predictions.decoder.weight" -> "bert.embeddings.word_embeddings.weight".
  std::map<std::string, std::string> tied_aliases;
};

/// Copies `checkpoint` into the parameters and persistent buffers of `model` under no_grad,
/// converting dtypes. Maps names as HF's from_pretrained does: adds or strips the encoder prefix
/// of task models ("bert.", "roberta.", "distilbert.", "electra."), reads DistilBERT's key names
/// as bertft's (bertft_key), renames LayerNorm gamma/beta to weight/bias, ignores the old
/// `embeddings.position_ids` / `token_type_ids` buffers, and resolves tied aliases (an alias
/// whose target is also present must be equal to it). `source` names the checkpoint in errors.
LoadReport load_state_dict(torch::nn::Module& model,
                           const TensorMap& checkpoint,
                           const std::string& source,
                           const LoadOptions& options = {});

/// True for keys of buffers that HF no longer saves (`embeddings.position_ids`,
/// `embeddings.token_type_ids`, with any prefix): old checkpoints hold them, loaders skip them.
bool is_legacy_buffer_key(const std::string& key);

/// The model's state dict (parameters and buffers) by HF key, sharing memory with the model.
TensorMap state_dict(const torch::nn::Module& model);

}  // namespace bert
