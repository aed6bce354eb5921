#include "bert/checkpoint/load.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "bert/checkpoint/family_keys.h"
#include "bert/common/error.h"
#include "bert/common/strings.h"

namespace bert {
namespace {

std::string shape_string(const torch::Tensor& t) {
  return fmt::format("{}", t.sizes().vec());
}

std::string first_few(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), kShown));
  std::string out = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > kShown) out += fmt::format(", ... ({} more)", names.size() - kShown);
  return out;
}

}  // namespace

std::string LoadReport::summary() const {
  std::string out =
      fmt::format("{}: {} tensors loaded, {} missing, {} unexpected, {} mismatched", source, loaded,
                  missing.size(), unexpected.size(), mismatched.size());
  if (!ignored.empty()) out += fmt::format(", {} ignored", ignored.size());
  if (!renamed.empty()) out += fmt::format(", {} renamed", renamed.size());
  if (!missing.empty()) out += fmt::format("; missing: {}", first_few(missing));
  if (!unexpected.empty()) out += fmt::format("; unexpected: {}", first_few(unexpected));
  if (!mismatched.empty()) out += fmt::format("; mismatched: {}", first_few(mismatched));
  return out;
}

bool is_legacy_buffer_key(const std::string& key) {
  return ends_with(key, "embeddings.position_ids") || ends_with(key, "embeddings.token_type_ids");
}

TensorMap state_dict(const torch::nn::Module& model) {
  TensorMap out;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) out.emplace(p.key(), p.value());
  for (const auto& b : model.named_buffers(/*recurse=*/true)) out.emplace(b.key(), b.value());
  return out;
}

LoadReport load_state_dict(torch::nn::Module& model,
                           const TensorMap& checkpoint,
                           const std::string& source,
                           const LoadOptions& options) {
  LoadReport report;
  report.source = source;
  TensorMap targets = state_dict(model);

  // The encoder's prefix ("bert.", "roberta.", ...) on each side, if it has one.
  const auto prefix_of = [](const auto& keys) -> std::optional<std::string> {
    for (const auto& kv : keys)
      if (auto prefix = base_prefix_of(kv.first)) return prefix;
    return std::nullopt;
  };
  const auto model_prefix = prefix_of(targets);
  const auto checkpoint_prefix = prefix_of(checkpoint);

  // Checkpoint names in the model's key space.
  std::map<std::string, torch::Tensor> mapped;
  for (const auto& [original, tensor] : checkpoint) {
    std::string key = bertft_key(original);
    if (model_prefix && !checkpoint_prefix) key = *model_prefix + key;
    if (!model_prefix && checkpoint_prefix && starts_with(key, *checkpoint_prefix))
      key = key.substr(checkpoint_prefix->size());
    for (const auto& [legacy, modern] :
         {std::pair{".gamma", ".weight"}, std::pair{".beta", ".bias"}}) {
      if (ends_with(key, legacy) && key.find("LayerNorm") != std::string::npos) {
        const std::string renamed = key.substr(0, key.size() - std::string(legacy).size()) + modern;
        report.renamed.push_back(fmt::format("{} -> {}", original, renamed));
        key = renamed;
      }
    }
    if (is_legacy_buffer_key(key)) {
      if (targets.count(key) == 0) {
        report.ignored.push_back(original);
        continue;
      }
    }
    mapped.emplace(key, tensor);
  }
  // Tied aliases: load through the alias only when the target itself is absent.
  for (const auto& [alias, target] : options.tied_aliases) {
    const auto it = mapped.find(alias);
    if (it == mapped.end()) continue;
    const auto target_it = mapped.find(target);
    if (target_it == mapped.end()) {
      mapped.emplace(target, it->second);
    } else if (!it->second.sizes().equals(target_it->second.sizes()) ||
               !torch::equal(it->second.to(target_it->second.scalar_type()), target_it->second)) {
      report.mismatched.push_back(
          fmt::format("{}: tied alias of {} but holds different values", alias, target));
    }
    report.ignored.push_back(alias);
    mapped.erase(alias);
  }

  torch::NoGradGuard no_grad;
  for (const auto& [key, tensor] : mapped) {
    const auto target = targets.find(key);
    if (target == targets.end()) {
      report.unexpected.push_back(key);
      continue;
    }
    if (!target->second.sizes().equals(tensor.sizes())) {
      report.mismatched.push_back(fmt::format("{}: checkpoint {} vs model {}", key,
                                              shape_string(tensor), shape_string(target->second)));
      continue;
    }
    target->second.copy_(tensor);
    ++report.loaded;
  }
  for (const auto& [key, tensor] : targets) {
    if (mapped.count(key) != 0) continue;
    report.missing.push_back(key);
  }

  if (options.strict) {
    std::vector<std::string> problems;
    for (const auto& key : report.missing) {
      const bool allowed =
          std::any_of(options.allow_missing_prefixes.begin(), options.allow_missing_prefixes.end(),
                      [&](const std::string& p) { return starts_with(key, p); });
      if (!allowed) problems.push_back(fmt::format("{}: missing key '{}'", source, key));
    }
    for (const auto& key : report.unexpected)
      problems.push_back(fmt::format("{}: unexpected key '{}'", source, key));
    for (const auto& what : report.mismatched)
      problems.push_back(fmt::format("{}: size mismatch: {}", source, what));
    if (!problems.empty()) {
      std::string message = fmt::format(
          "{} does not fit the model ({} problems; strict loading):", source, problems.size());
      for (const auto& p : problems) message += "\n  " + p;
      throw CheckpointError(message);
    }
  }
  return report;
}

}  // namespace bert
