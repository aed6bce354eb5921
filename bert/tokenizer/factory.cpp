#include "bert/tokenizer/factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/common/log.h"
#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/wordpiece.h"

namespace bert::tok {
namespace {

using json = nlohmann::json;

/// A special token in tokenizer_config.json is a string or {"content": "..."}.
std::optional<std::string> special_name(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

/// HF matches its added tokens (added_tokens.json; tokenizer.json's "added_tokens") in the text
/// before the subword model runs and keeps each whole. bertft's tokenizers do that for their
/// special tokens only, so a directory with any other added token is refused: bertft would split
/// it into pieces where HF keeps it whole, and every id after it would differ.
void refuse_added_tokens(const PretrainedDir& dir, const Tokenizer& tokenizer) {
  const auto& s = tokenizer.special_tokens();
  const std::set<std::string> kept = {s.unk, s.cls, s.sep, s.pad, s.mask};
  std::vector<std::string> others;
  std::filesystem::path where;
  const auto read = [](const std::filesystem::path& path) {
    try {
      return parse_json_limited(read_file(path));
    } catch (const json::parse_error& e) {
      throw TokenizerError(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
    }
  };
  const auto note = [&](const std::string& content, const json& id,
                        const std::filesystem::path& path) {
    if (kept.count(content)) return;
    if (others.empty()) where = path;
    others.push_back(fmt::format("'{}' (id {})", content, id.dump()));
  };
  if (const auto path = dir.dir / "added_tokens.json"; std::filesystem::exists(path)) {
    const json added = read(path);
    if (!added.is_object())
      throw TokenizerError(fmt::format("{}: expected an object of token: id", path.string()));
    for (const auto& [content, id] : added.items()) note(content, id, path);
  }
  if (const auto path = dir.dir / "tokenizer.json";
      others.empty() && std::filesystem::exists(path)) {
    const json file = read(path);
    if (file.is_object() && file.contains("added_tokens") && file["added_tokens"].is_array())
      for (const auto& token : file["added_tokens"])
        if (token.is_object() && token.contains("content") && token["content"].is_string())
          note(token["content"].get<std::string>(), token.value("id", json()), path);
  }
  if (others.empty()) return;
  const size_t shown = std::min<size_t>(others.size(), 5);
  throw TokenizerError(fmt::format(
      "{}: added tokens are not supported: {}{}. Hugging Face keeps each whole; bertft keeps "
      "only the special tokens ({}, {}, {}, {}, {}) whole and would split these into pieces. "
      "Remove them from added_tokens.json and tokenizer.json to tokenize without them",
      where.string(),
      fmt::join(std::vector<std::string>(others.begin(), others.begin() + static_cast<long>(shown)),
                ", "),
      others.size() > shown ? fmt::format(" and {} more", others.size() - shown) : "", s.unk, s.cls,
      s.sep, s.pad, s.mask));
}

std::unique_ptr<Tokenizer> build_tokenizer(const PretrainedDir& dir,
                                           int64_t model_vocab_size,
                                           const TokenizerOverrides& overrides);

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const PretrainedDir& dir,
                                          int64_t model_vocab_size,
                                          const TokenizerOverrides& overrides) {
  auto tokenizer = build_tokenizer(dir, model_vocab_size, overrides);
  refuse_added_tokens(dir, *tokenizer);
  return tokenizer;
}

namespace {

std::unique_ptr<Tokenizer> build_tokenizer(const PretrainedDir& dir,
                                           int64_t model_vocab_size,
                                           const TokenizerOverrides& overrides) {
  json config = json::object();
  std::string config_name = "(none)";
  if (dir.tokenizer_config) {
    config_name = dir.tokenizer_config->string();
    try {
      config = parse_json_limited(read_file(*dir.tokenizer_config));
    } catch (const json::parse_error& e) {
      throw ConfigError(fmt::format("{}: invalid JSON: {}", config_name, e.what()));
    }
    if (!config.is_object())
      throw ConfigError(fmt::format("{}: expected a JSON object", config_name));
  }
  int64_t max_length = 0;
  if (const auto it = config.find("model_max_length");
      it != config.end() && it->is_number_integer()) {
    const auto n = it->get<int64_t>();
    if (n > 0 && n < (int64_t{1} << 40)) max_length = n;  // HF writes 1e30 for "unlimited"
  }

  std::string model_type = "bert";
  try {
    const json model_config = parse_json_limited(read_file(dir.config));
    if (model_config.is_object()) model_type = model_config.value("model_type", model_type);
  } catch (const std::exception&) {
    // config.json's own problems are reported where the model reads it.
  }
  SpecialTokens special;
  const auto read_specials = [&] {
    if (auto s = special_name(config, "unk_token")) special.unk = *s;
    if (auto s = special_name(config, "cls_token")) special.cls = *s;
    if (auto s = special_name(config, "sep_token")) special.sep = *s;
    if (auto s = special_name(config, "pad_token")) special.pad = *s;
    if (auto s = special_name(config, "mask_token")) special.mask = *s;
  };
  if (!dir.vocab && dir.bpe_vocab && dir.bpe_merges) {
    ByteLevelBpeTokenizer::Options options;
    options.model_vocab_size = model_vocab_size;
    special = options.special;
    read_specials();
    options.special = special;
    if (const auto it = config.find("add_prefix_space");
        it != config.end() && it->is_boolean() && it->get<bool>())
      throw ConfigError(fmt::format(
          "{}: add_prefix_space: true is not supported (bertft's byte-level BPE adds no prefix "
          "space, as HF's RoBERTa tokenizer by default)",
          config_name));
    auto tokenizer = ByteLevelBpeTokenizer::from_files(*dir.bpe_vocab, *dir.bpe_merges, options);
    tokenizer->set_model_max_length(max_length);
    return tokenizer;
  }
  if (!dir.vocab && dir.sentencepiece) {
    // XLM-RoBERTa numbers SentencePiece's pieces as fairseq did (HF XLMRobertaTokenizer).
    const bool fairseq = model_type == "xlm-roberta" ||
                         config.value("tokenizer_class", std::string()).rfind("XLMRoberta", 0) == 0;
    auto tokenizer = std::make_unique<SentencePieceTokenizer>(
        *dir.sentencepiece, fairseq ? SentencePieceIds::kFairseq : SentencePieceIds::kModel);
    tokenizer->set_model_max_length(max_length);
    return tokenizer;
  }
  if (!dir.vocab)
    throw TokenizerError(fmt::format(
        "{}: no tokenizer files (vocab.txt, vocab.json + merges.txt, or a sentencepiece model)",
        dir.dir.string()));

  WordPieceOptions options;
  options.model_vocab_size = model_vocab_size;
  options.check_casing = !overrides.check_casing ? CasingCheck::kOff
                         : overrides.lowercase   ? CasingCheck::kError
                                                 : CasingCheck::kWarn;
  auto read_bool = [&](const char* key) -> std::optional<bool> {
    const auto it = config.find(key);
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean())
      throw ConfigError(
          fmt::format("{}: key '{}': expected true, false or null", config_name, key));
    return it->get<bool>();
  };
  std::optional<bool> lowercase = overrides.lowercase;
  if (!lowercase && dir.tokenizer_config) lowercase = read_bool("do_lower_case").value_or(true);
  if (!lowercase) {
    // No tokenizer_config.json: decide from the vocabulary instead of HF's lower-casing default,
    // which silently breaks cased checkpoints.
    std::vector<std::string> vocab;
    {
      std::istringstream in(read_file(*dir.vocab));
      std::string line;
      while (std::getline(in, line)) vocab.push_back(line);
    }
    lowercase = !vocab_casing(vocab).cased();
    log::info(
        "[tokenizer] {}: no tokenizer_config.json; the vocabulary is {}, so lower-casing is {}",
        dir.dir.string(), *lowercase ? "uncased" : "cased", *lowercase ? "on" : "off");
  }
  options.normalizer.lowercase = *lowercase;
  options.normalizer.strip_accents = read_bool("strip_accents").value_or(*lowercase);
  options.normalizer.handle_chinese_chars = read_bool("tokenize_chinese_chars").value_or(true);
  read_specials();
  options.special = special;
  auto tokenizer = WordPieceTokenizer::from_file(*dir.vocab, options);
  tokenizer->set_model_max_length(max_length);
  return tokenizer;
}

}  // namespace

}  // namespace bert::tok
