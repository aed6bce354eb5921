#include "bert/tokenizer/factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
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

json read_json(const std::filesystem::path& path) {
  try {
    return parse_json_limited(read_file(path));
  } catch (const json::parse_error& e) {
    throw TokenizerError(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
}

/// `object`'s boolean `key`: nullopt where absent or null; TokenizerError "<where>: "<key>":
/// expected true or false" where it is something else.
std::optional<bool> json_bool(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw TokenizerError(fmt::format("{}: \"{}\": expected true or false", where, key));
  return it->get<bool>();
}

/// An added token as a file declares it.
struct DeclaredToken {
  AddedToken token;
  int64_t id = -1;  ///< the id the file gives it (-1: none)
  std::filesystem::path file;
};

/// The added tokens of `dir` beyond the special tokens `s`, as HF's fast tokenizer loads them:
/// tokenizer.json's "added_tokens" with their options, then the entries of added_tokens.json
/// that it lacks, by id (special when special_tokens_map.json lists them as
/// additional_special_tokens; normalized when not special).
std::vector<DeclaredToken> read_added_tokens(const PretrainedDir& dir, const SpecialTokens& s) {
  const std::set<std::string> specials = {s.unk, s.cls, s.sep, s.pad, s.mask};
  std::vector<DeclaredToken> out;
  std::set<std::string> seen;
  if (const auto path = dir.dir / "tokenizer.json"; std::filesystem::exists(path)) {
    const json file = read_json(path);
    const auto list = file.is_object() ? file.find("added_tokens") : file.end();
    if (file.is_object() && list != file.end() && !list->is_null()) {
      if (!list->is_array())
        throw TokenizerError(fmt::format("{}: \"added_tokens\": expected a list", path.string()));
      for (size_t i = 0; i < list->size(); ++i) {
        const json& entry = (*list)[i];
        const auto where = fmt::format("{}: \"added_tokens\"[{}]", path.string(), i);
        if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string())
          throw TokenizerError(where + ": expected an object with a string \"content\"");
        DeclaredToken d;
        d.file = path;
        d.token.content = entry["content"].get<std::string>();
        const auto flag = [&](const char* key, bool fallback) {
          return json_bool(entry, key, where).value_or(fallback);
        };
        d.token.special = flag("special", false);
        d.token.normalized = flag("normalized", !d.token.special);
        d.token.single_word = flag("single_word", false);
        d.token.lstrip = flag("lstrip", false);
        d.token.rstrip = flag("rstrip", false);
        if (const auto id = entry.find("id"); id != entry.end() && id->is_number_integer())
          d.id = id->get<int64_t>();
        if (specials.count(d.token.content) || !seen.insert(d.token.content).second) continue;
        out.push_back(std::move(d));
      }
    }
  }
  if (const auto path = dir.dir / "added_tokens.json"; std::filesystem::exists(path)) {
    const json added = read_json(path);
    if (!added.is_object())
      throw TokenizerError(fmt::format("{}: expected an object of token: id", path.string()));
    std::set<std::string> additional;
    if (const auto map = dir.dir / "special_tokens_map.json"; std::filesystem::exists(map)) {
      const json m = read_json(map);
      if (m.is_object() && m.contains("additional_special_tokens") &&
          m["additional_special_tokens"].is_array())
        for (const auto& t : m["additional_special_tokens"]) {
          if (t.is_string()) additional.insert(t.get<std::string>());
          if (t.is_object() && t.contains("content") && t["content"].is_string())
            additional.insert(t["content"].get<std::string>());
        }
    }
    std::vector<std::pair<int64_t, std::string>> by_id;
    for (const auto& [content, id] : added.items()) {
      if (!id.is_number_integer())
        throw TokenizerError(fmt::format("{}: \"{}\": expected an integer id, got {}",
                                         path.string(), content, id.dump()));
      by_id.emplace_back(id.get<int64_t>(), content);
    }
    std::sort(by_id.begin(), by_id.end());
    for (const auto& [id, content] : by_id) {
      if (specials.count(content) || !seen.insert(content).second) continue;
      DeclaredToken d;
      d.file = path;
      d.id = id;
      d.token.content = content;
      d.token.special = additional.count(content) > 0;
      d.token.normalized = !d.token.special;
      out.push_back(std::move(d));
    }
  }
  return out;
}

/// A SentencePiece tokenizer with the model's own ids (not XLM-R's fairseq ids, which run HF's
/// pipeline with added tokens) keeps only its special tokens whole, so a directory with any
/// other added token is refused: bertft would split it where HF keeps it whole, and every id
/// after it would differ.
void refuse_added_tokens(const std::vector<DeclaredToken>& added, const Tokenizer& tokenizer) {
  if (added.empty()) return;
  const auto& s = tokenizer.special_tokens();
  std::vector<std::string> names;
  for (size_t i = 0; i < added.size() && i < 5; ++i)
    names.push_back(fmt::format("'{}' (id {})", added[i].token.content, added[i].id));
  throw TokenizerError(fmt::format(
      "{}: added tokens are not supported for SentencePiece models numbered by their own ids "
      "(only for WordPiece, byte-level BPE and XLM-R's fairseq ids): {}{}. "
      "Hugging Face keeps each whole; bertft keeps only the special tokens ({}, {}, {}, {}, {}) "
      "whole and would split these into pieces. Remove them from added_tokens.json and "
      "tokenizer.json to tokenize without them",
      added.front().file.string(), fmt::join(names, ", "),
      added.size() > names.size() ? fmt::format(" and {} more", added.size() - names.size()) : "",
      s.unk, s.cls, s.sep, s.pad, s.mask));
}

/// tokenizer_config.json's boolean `key`: nullopt where absent or null; ConfigError naming the
/// file and key where it is something else.
std::optional<bool> config_bool(const json& config,
                                const std::string& config_name,
                                const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw ConfigError(fmt::format("{}: key '{}': expected true, false or null", config_name, key));
  return it->get<bool>();
}

/// tokenizer_config.json's string `key`: empty where absent or null; ConfigError naming the file
/// and key where it is something else.
std::string config_string(const json& config, const std::string& config_name, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  if (!it->is_string())
    throw ConfigError(fmt::format("{}: key '{}': expected a string, got {}", config_name, key,
                                  it->dump().substr(0, 80)));
  return it->get<std::string>();
}

/// HF's AlbertTokenizer, the class a directory of a SentencePiece model with its own ids names
/// (and the one bertft writes for it), lower-cases the text and strips its accents before
/// SentencePiece unless tokenizer_config.json says otherwise (do_lower_case true and keep_accents
/// false when absent). bertft tokenizes such a model as libsentencepiece does, so a directory that
/// asks HF for either is refused, naming the key, rather than tokenized unlike HF.
void refuse_albert_preprocessing(const json& config, const std::string& config_name) {
  if (config_string(config, config_name, "tokenizer_class").rfind("Albert", 0) != 0) return;
  std::vector<std::string> problems;
  const auto check = [&](const char* key, bool hf_default, bool wanted) {
    const auto given = config_bool(config, config_name, key);
    if (given.value_or(hf_default) == wanted) return;
    problems.push_back(
        given ? fmt::format("\"{}\": {}", key, *given)
              : fmt::format("no \"{}\" (AlbertTokenizer's default: {})", key, hf_default));
  };
  check("do_lower_case", /*hf_default=*/true, /*wanted=*/false);
  check("keep_accents", /*hf_default=*/false, /*wanted=*/true);
  if (problems.empty()) return;
  throw ConfigError(fmt::format(
      "{}: {}: Hugging Face's AlbertTokenizer would lower-case the text or strip its accents "
      "before SentencePiece, and bertft tokenizes a SentencePiece model numbered by its own ids "
      "as libsentencepiece does (neither), so its ids would differ from HF's. If the model was "
      "trained on text as it is, set \"do_lower_case\": false and \"keep_accents\": true",
      config_name, fmt::join(problems, ", ")));
}

/// The ids a tokenizer gave its added tokens (`assigned`, after `base` vocabulary entries of
/// `vocab_file`) are the ids their files declare; else the files disagree with HF's numbering
/// (and the model's embeddings): TokenizerError naming the token.
void check_added_ids(const std::vector<DeclaredToken>& declared,
                     const std::vector<AddedToken>& assigned,
                     int64_t base,
                     const char* vocab_file) {
  for (size_t i = 0; i < declared.size() && i < assigned.size(); ++i) {
    const auto& d = declared[i];
    if (d.id >= 0 && d.id != assigned[i].id)
      throw TokenizerError(fmt::format(
          "{}: added token '{}' has id {}, but Hugging Face numbers it {} (its vocabulary id, "
          "else the next id after {}'s {} entries and the added tokens before it)",
          d.file.string(), d.token.content, d.id, assigned[i].id, vocab_file, base));
  }
}

/// `path`: "`key`", the place of a tokenizer.json key in messages.
std::string json_key(const std::filesystem::path& path, const std::string& key) {
  return path.string() + ": \"" + key + "\"";
}

/// The "type" of tokenizer.json's section `key` ("" where it is absent or null).
std::string section_type(const json& file, const char* key, const std::filesystem::path& path) {
  const auto it = file.is_object() ? file.find(key) : file.end();
  if (it == file.end() || it->is_null()) return {};
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
    throw TokenizerError(json_key(path, key) + ": expected an object with a string \"type\"");
  return (*it)["type"].get<std::string>();
}

/// The model's "vocab" {token: id} as tokens by id (ids 0 to n - 1, each once).
std::vector<std::string> vocab_by_id(const json& model, const std::filesystem::path& path) {
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object() || vocab->empty())
    throw TokenizerError(json_key(path, "model.vocab") + ": expected an object of token: id");
  std::vector<std::string> out(vocab->size());
  std::vector<bool> given(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= out.size() ||
        given[id.get<size_t>()])
      throw TokenizerError(fmt::format("{}: \"{}\": id {}: the ids must be 0 to {}, each once",
                                       json_key(path, "model.vocab"), token,
                                       id.dump().substr(0, 40), out.size() - 1));
    given[id.get<size_t>()] = true;
    out[id.get<size_t>()] = token;
  }
  return out;
}

/// The class and separator token names of a BertProcessing or RobertaProcessing post-processor
/// ("cls": [name, id], "sep": [name, id]), where it gives them.
void processor_names(const json& processor,
                     std::optional<std::string>& cls,
                     std::optional<std::string>& sep) {
  for (const auto& [key, name] : {std::pair{"cls", &cls}, std::pair{"sep", &sep}}) {
    const auto it = processor.find(key);
    if (it != processor.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
      *name = (*it)[0].get<std::string>();
  }
}

/// A WordPiece tokenizer as a tokenizer.json alone describes it (a directory without
/// vocab.txt): the vocabulary by id, the BertNormalizer's options, the model's settings and the
/// special tokens its post-processor and model name.
struct WordPieceJson {
  std::vector<std::string> vocab;
  BertNormalizerOptions normalizer;
  std::optional<bool> strip_accents;  ///< null in the file: follows lower-casing
  std::string prefix = "##", unk = "[UNK]";
  size_t max_input_chars_per_word = 100;
  std::optional<std::string> cls, sep;
};

/// Reads the "model" (WordPiece only), "normalizer" (BertNormalizer or null), "pre_tokenizer"
/// (BertPreTokenizer) and "post_processor" (BertProcessing, TemplateProcessing or null) of
/// `file`, the tokenizer.json at `path`. TokenizerError naming the file and key for anything
/// else: bertft would tokenize it unlike HF.
WordPieceJson read_wordpiece_json(const json& file, const std::filesystem::path& path) {
  const auto where = [&](const std::string& key) { return json_key(path, key); };
  const auto type_of = [&](const char* key) { return section_type(file, key, path); };
  const auto model_type = type_of("model");
  if (model_type != "WordPiece")
    throw TokenizerError(fmt::format(
        "{}: a {} model; bertft reads a tokenizer.json without its vocabulary files only for "
        "WordPiece, byte-level BPE and XLM-R's Unigram",
        where("model.type"), model_type.empty() ? "missing" : "'" + model_type + "'"));
  WordPieceJson out;
  const json& model = file["model"];
  const auto string_in = [&](const json& object, const char* key, const std::string& name,
                             std::string& value) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return;
    if (!it->is_string()) throw TokenizerError(where(name) + ": expected a string");
    value = it->get<std::string>();
  };
  string_in(model, "unk_token", "model.unk_token", out.unk);
  string_in(model, "continuing_subword_prefix", "model.continuing_subword_prefix", out.prefix);
  if (const auto it = model.find("max_input_chars_per_word"); it != model.end()) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() == 0)
      throw TokenizerError(where("model.max_input_chars_per_word") + ": expected a count");
    out.max_input_chars_per_word = it->get<size_t>();
  }
  out.vocab = vocab_by_id(model, path);

  const auto normalizer = type_of("normalizer");
  if (normalizer.empty()) {  // none: the text as it is
    out.normalizer = {/*clean_text=*/false, /*handle_chinese_chars=*/false, /*lowercase=*/false,
                      /*strip_accents=*/false};
    out.strip_accents = false;
  } else if (normalizer == "BertNormalizer") {
    // HF's defaults where a key is absent or null: true, and strip_accents follows lowercase.
    const json& n = file["normalizer"];
    const auto flag = [&](const char* key) { return json_bool(n, key, where("normalizer")); };
    out.normalizer.clean_text = flag("clean_text").value_or(true);
    out.normalizer.handle_chinese_chars = flag("handle_chinese_chars").value_or(true);
    out.normalizer.lowercase = flag("lowercase").value_or(true);
    out.strip_accents = flag("strip_accents");
    out.normalizer.strip_accents = out.strip_accents.value_or(out.normalizer.lowercase);
  } else {
    throw TokenizerError(fmt::format(
        "{}: '{}'; bertft's WordPiece normalizes as HF's BertNormalizer (or not at all)",
        where("normalizer.type"), normalizer));
  }
  if (const auto pre = type_of("pre_tokenizer"); pre != "BertPreTokenizer")
    throw TokenizerError(
        fmt::format("{}: {}; bertft's WordPiece splits words as HF's BertPreTokenizer",
                    where("pre_tokenizer.type"), pre.empty() ? "none" : "'" + pre + "'"));

  // [CLS] and [SEP] as the post-processor names them.
  const auto post = type_of("post_processor");
  const json& p = post.empty() ? json() : file["post_processor"];
  if (post == "BertProcessing") {
    processor_names(p, out.cls, out.sep);
  } else if (post == "TemplateProcessing") {  // single: [CLS] $A [SEP]
    std::vector<std::string> specials;
    if (const auto single = p.find("single"); single != p.end() && single->is_array())
      for (const auto& piece : *single)
        if (piece.is_object() && piece.contains("SpecialToken") &&
            piece["SpecialToken"].is_object() && piece["SpecialToken"].contains("id") &&
            piece["SpecialToken"]["id"].is_string())
          specials.push_back(piece["SpecialToken"]["id"].get<std::string>());
    if (specials.size() == 2) out.cls = specials[0], out.sep = specials[1];
  } else if (!post.empty()) {
    throw TokenizerError(fmt::format(
        "{}: '{}'; bertft adds BERT's [CLS] A [SEP] B [SEP] (BertProcessing, TemplateProcessing)",
        where("post_processor.type"), post));
  }
  return out;
}

/// What a byte-level BPE tokenizer.json gives.
struct BpeJson {
  std::vector<std::string> vocab;  ///< by id
  std::vector<std::pair<std::string, std::string>> merges;
  std::optional<std::string> cls, sep;  ///< RobertaProcessing's
};

/// Reads the byte-level BPE of `file`, the tokenizer.json at `path`, as RoBERTa's has it:
/// "model" BPE (merges as "a b" or ["a", "b"]) without dropout, sub-word prefix or suffix,
/// byte fallback or ignore_merges; no "normalizer"; the ByteLevel "pre_tokenizer" without a
/// prefix space and with its regex; RobertaProcessing (or no "post_processor") with trimmed
/// offsets and no prefix space; the ByteLevel "decoder". TokenizerError naming the file and key
/// for anything else: bertft would tokenize or decode it unlike HF.
BpeJson read_bpe_json(const json& file, const std::filesystem::path& path) {
  const auto where = [&](const std::string& key) { return json_key(path, key); };
  const auto refuse = [&](const std::string& key, const std::string& why) {
    throw TokenizerError(
        fmt::format("{}: {}; bertft's byte-level BPE is RoBERTa's", where(key), why));
  };
  // A setting that must be absent, null or `expected`.
  const auto expect = [&](const json& section, const std::string& name, const char* key,
                          const json& expected) {
    const auto it = section.find(key);
    if (it != section.end() && !it->is_null() && *it != expected)
      refuse(name + "." + key,
             fmt::format("{} (not {})", it->dump().substr(0, 40), expected.dump()));
  };
  const json& model = file["model"];
  expect(model, "model", "dropout", nullptr);
  expect(model, "model", "continuing_subword_prefix", "");
  expect(model, "model", "end_of_word_suffix", "");
  expect(model, "model", "byte_fallback", false);
  expect(model, "model", "ignore_merges", false);
  BpeJson out;
  out.vocab = vocab_by_id(model, path);
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array())
    throw TokenizerError(where("model.merges") + ": expected a list of merges");
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    if (m.is_string()) {
      const auto text = m.get<std::string>();
      const auto space = text.find(' ');
      if (space != std::string::npos && space > 0 && space + 1 < text.size() &&
          text.find(' ', space + 1) == std::string::npos) {
        out.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
        continue;
      }
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    throw TokenizerError(fmt::format("{}: merge {}: {}: expected \"a b\" or [\"a\", \"b\"]",
                                     where("model.merges"), i + 1, m.dump().substr(0, 40)));
  }
  if (const auto n = section_type(file, "normalizer", path); !n.empty())
    refuse("normalizer.type", "'" + n + "' (RoBERTa's has none)");
  const auto byte_level = [&](const char* key, bool decoder) {
    const auto type = section_type(file, key, path);
    if (type != "ByteLevel") refuse(std::string(key) + ".type", type.empty() ? "none" : type);
    if (decoder) return;
    expect(file[key], key, "add_prefix_space", false);
    expect(file[key], key, "use_regex", true);
  };
  byte_level("pre_tokenizer", false);
  byte_level("decoder", true);
  if (const auto post = section_type(file, "post_processor", path); post == "RobertaProcessing") {
    const json& p = file["post_processor"];
    expect(p, "post_processor", "add_prefix_space", false);
    expect(p, "post_processor", "trim_offsets", true);
    processor_names(p, out.cls, out.sep);
  } else if (!post.empty()) {
    refuse("post_processor.type", "'" + post + "' (bertft adds <s> A </s></s> B </s>)");
  }
  return out;
}

/// What an XLM-R Unigram tokenizer.json gives.
struct UnigramJson {
  std::vector<std::string> pieces;  ///< by id
  std::vector<double> scores;
  int64_t unk_id = 0;
  SentencePieceTokenizer::UnigramPipeline pipeline;
};

/// Reads the Unigram of `file`, the tokenizer.json at `path`, as HF's converter writes XLM-R's
/// (now or in transformers 4.0): "model" Unigram ([piece, score] by id, "unk_id", no byte
/// fallback); "normalizer" a Precompiled map, then Replace(" {2,}", " "), each optional; the
/// Metaspace "pre_tokenizer" (after WhitespaceSplit or not) and "decoder" ("▁", a prefix space
/// always: add_prefix_space true or, as newer tokenizers write it, prepend_scheme "always";
/// split); `<s> A </s></s> B </s>` from TemplateProcessing or RobertaProcessing (or no
/// "post_processor"). TokenizerError naming the file and key for anything else: bertft would
/// tokenize or decode it unlike HF.
UnigramJson read_unigram_json(const json& file, const std::filesystem::path& path) {
  const auto where = [&](const std::string& key) { return json_key(path, key); };
  const auto refuse = [&](const std::string& key, const std::string& why) {
    throw TokenizerError(
        fmt::format("{}: {}; bertft reads a Unigram tokenizer.json alone as XLM-R's (or put the "
                    "SentencePiece .model beside it)",
                    where(key), why));
  };
  const json& model = file["model"];
  if (const auto it = model.find("byte_fallback");
      it != model.end() && !it->is_null() && *it != false)
    refuse("model.byte_fallback", it->dump().substr(0, 40) + " (not false)");
  UnigramJson out;
  const auto unk = model.find("unk_id");
  if (unk == model.end() || !unk->is_number_integer())
    refuse("model.unk_id", unk == model.end() ? "missing" : unk->dump().substr(0, 40));
  out.unk_id = unk->get<int64_t>();
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_array() || vocab->empty())
    throw TokenizerError(where("model.vocab") + ": expected a list of [piece, score]");
  for (size_t i = 0; i < vocab->size(); ++i) {
    const json& entry = (*vocab)[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
      throw TokenizerError(fmt::format("{}: entry {}: {}: expected [piece, score]",
                                       where("model.vocab"), i, entry.dump().substr(0, 40)));
    out.pieces.push_back(entry[0].get<std::string>());
    out.scores.push_back(entry[1].get<double>());
  }

  // The normalizer: the model's Precompiled map then Replace(" {2,}", " ") (transformers'
  // converter since 2021; 4.0's has the map alone), each optional, in a Sequence or alone.
  const auto type_of = [](const json& section) {
    const auto it = section.is_object() ? section.find("type") : section.end();
    return it != section.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto normalizer = section_type(file, "normalizer", path);
  std::vector<json> steps;
  if (normalizer == "Sequence") {
    const auto list = file["normalizer"].find("normalizers");
    if (list == file["normalizer"].end() || !list->is_array())
      throw TokenizerError(where("normalizer.normalizers") + ": expected a list");
    steps = list->get<std::vector<json>>();
  } else if (!normalizer.empty()) {
    steps = {file["normalizer"]};
  }
  const json collapse = {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}};
  out.pipeline.collapse_spaces = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto key = normalizer == "Sequence" ? fmt::format("normalizer.normalizers[{}]", i)
                                              : std::string("normalizer");
    const json& step = steps[i];
    if (i == 0 && type_of(step) == "Precompiled") {
      const auto blob = step.find("precompiled_charsmap");
      const auto decoded = blob != step.end() && blob->is_string()
                               ? base64_decode(blob->get<std::string>())
                               : std::nullopt;
      if (!decoded) refuse(key + ".precompiled_charsmap", "not a base64 string");
      out.pipeline.charsmap = *decoded;
    } else if (i + 1 == steps.size() && step == collapse) {
      out.pipeline.collapse_spaces = true;
    } else {
      refuse(key,
             step.dump().substr(0, 60) +
                 " (HF's XLM-R normalizer: the model's Precompiled map, then Replace(\" {2,}\", "
                 "\" \"))");
    }
  }

  // Metaspace as the pre-tokenizer, alone or after WhitespaceSplit (transformers 4.0's
  // converter), and as the decoder.
  const auto pre = section_type(file, "pre_tokenizer", path);
  std::vector<std::pair<std::string, const json*>> metaspaces;  // (key, section)
  if (pre == "Sequence") {
    const json& p = file["pre_tokenizer"];
    const auto list = p.find("pretokenizers");
    if (list == p.end() || !list->is_array() || list->size() != 2 ||
        type_of((*list)[0]) != "WhitespaceSplit" || type_of((*list)[1]) != "Metaspace")
      refuse("pre_tokenizer.pretokenizers",
             (list == p.end() ? std::string("missing") : list->dump().substr(0, 60)) +
                 " (not WhitespaceSplit then Metaspace)");
    out.pipeline.whitespace_split = true;
    metaspaces.emplace_back("pre_tokenizer.pretokenizers[1]", &(*list)[1]);
  } else if (pre == "Metaspace") {
    metaspaces.emplace_back("pre_tokenizer", &file["pre_tokenizer"]);
  } else {
    refuse("pre_tokenizer.type", pre.empty() ? "none" : pre);
  }
  const auto decoder = section_type(file, "decoder", path);
  if (decoder != "Metaspace") refuse("decoder.type", decoder.empty() ? "none" : decoder);
  metaspaces.emplace_back("decoder", &file["decoder"]);
  for (const auto& metaspace : metaspaces) {
    const std::string& key = metaspace.first;
    const json& m = *metaspace.second;
    const auto name = [&](const char* k) { return key + "." + k; };
    const auto replacement = m.find("replacement");
    if (replacement == m.end() || *replacement != "\u2581")
      refuse(name("replacement"),
             (replacement == m.end() ? "missing" : replacement->dump().substr(0, 40)) +
                 " (not \"\u2581\")");
    // A prefix space always (HF's default where neither key is given).
    if (const auto it = m.find("add_prefix_space"); it != m.end() && *it != true)
      refuse(name("add_prefix_space"), it->dump().substr(0, 40) + " (not true)");
    if (const auto it = m.find("prepend_scheme"); it != m.end() && *it != "always")
      refuse(name("prepend_scheme"), it->dump().substr(0, 40) + " (not \"always\")");
    if (const auto it = m.find("split"); it != m.end() && *it != true)
      refuse(name("split"), it->dump().substr(0, 40) + " (not true)");
  }

  // <s> A </s></s> B </s>.
  const auto post = section_type(file, "post_processor", path);
  if (post == "RobertaProcessing") {
    std::optional<std::string> cls, sep;
    processor_names(file["post_processor"], cls, sep);
    if (cls.value_or("<s>") != "<s>" || sep.value_or("</s>") != "</s>")
      refuse("post_processor", "not <s> and </s>");
  } else if (post == "TemplateProcessing") {
    const json& p = file["post_processor"];
    const auto layout = [&](const char* key) {
      std::vector<std::string> parts;
      const auto id = [](const json& part) {  // {"id": "..."} of a template part
        const auto it = part.is_object() ? part.find("id") : part.end();
        return it != part.end() && it->is_string() ? it->get<std::string>() : "?";
      };
      if (const auto it = p.find(key); it != p.end() && it->is_array())
        for (const auto& piece : *it) {
          if (piece.contains("SpecialToken")) parts.push_back(id(piece["SpecialToken"]));
          if (piece.contains("Sequence")) parts.push_back("$" + id(piece["Sequence"]));
        }
      return fmt::format("{}", fmt::join(parts, " "));
    };
    if (layout("single") != "<s> $A </s>") refuse("post_processor.single", layout("single"));
    if (layout("pair") != "<s> $A </s> </s> $B </s>") refuse("post_processor.pair", layout("pair"));
  } else if (!post.empty()) {
    refuse("post_processor.type", "'" + post + "' (bertft adds <s> A </s></s> B </s>)");
  }
  return out;
}

std::unique_ptr<Tokenizer> build_tokenizer(const PretrainedDir& dir,
                                           int64_t model_vocab_size,
                                           const TokenizerOverrides& overrides);

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const PretrainedDir& dir,
                                          int64_t model_vocab_size,
                                          const TokenizerOverrides& overrides) {
  return build_tokenizer(dir, model_vocab_size, overrides);
}

std::optional<std::filesystem::path> tokenizer_file(const PretrainedDir& dir) {
  // In build_tokenizer's order of choice.
  if (dir.vocab) return dir.vocab;
  if (dir.bpe_vocab && dir.bpe_merges) return dir.bpe_vocab;
  if (dir.sentencepiece) return dir.sentencepiece;
  if (const auto json_path = dir.dir / "tokenizer.json"; std::filesystem::exists(json_path))
    return json_path;
  return std::nullopt;
}

std::string tokenizer_kind(const Tokenizer& tokenizer) {
  if (dynamic_cast<const ByteLevelBpeTokenizer*>(&tokenizer)) return "byte-level BPE";
  if (dynamic_cast<const SentencePieceTokenizer*>(&tokenizer)) return "SentencePiece";
  if (dynamic_cast<const WordPieceTokenizer*>(&tokenizer)) return "WordPiece";
  return "other";
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
  // decode()'s clean-up, true where the key is absent (HF 4.31's default).
  const bool clean_up =
      config_bool(config, config_name, "clean_up_tokenization_spaces").value_or(true);

  std::string model_type = "bert";
  std::string class_stem = "Bert";  // of the family's HF classes ("DistilBert", ...)
  try {
    const json model_config = parse_json_limited(read_file(dir.config));
    if (model_config.is_object()) model_type = model_config.value("model_type", model_type);
    class_stem = family_class_stem(parse_model_type(model_type, dir.config.string()));
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
  // tokenizer.json alone (no vocab.txt, vocab.json + merges.txt or SentencePiece model): its
  // model says which tokenizer it is.
  const auto json_path = dir.dir / "tokenizer.json";
  std::optional<json> json_file;
  if (!dir.vocab && !(dir.bpe_vocab && dir.bpe_merges) && !dir.sentencepiece &&
      std::filesystem::exists(json_path))
    json_file = read_json(json_path);
  const auto json_model = json_file ? section_type(*json_file, "model", json_path) : "";
  const bool bpe_json = json_model == "BPE";
  if (!dir.vocab && ((dir.bpe_vocab && dir.bpe_merges) || bpe_json)) {
    ByteLevelBpeTokenizer::Options options;
    options.model_vocab_size = model_vocab_size;
    special = options.special;
    std::optional<BpeJson> from_json;
    if (bpe_json) {
      from_json = read_bpe_json(*json_file, json_path);
      if (from_json->cls) special.cls = *from_json->cls;
      if (from_json->sep) special.sep = *from_json->sep;
    }
    read_specials();
    options.special = special;
    if (const auto it = config.find("add_prefix_space");
        it != config.end() && it->is_boolean() && it->get<bool>())
      throw ConfigError(fmt::format(
          "{}: add_prefix_space: true is not supported (bertft's byte-level BPE adds no prefix "
          "space, as HF's RoBERTa tokenizer by default)",
          config_name));
    const auto added = read_added_tokens(dir, special);
    for (const auto& d : added) options.added_tokens.push_back(d.token);
    auto tokenizer =
        from_json ? std::make_unique<ByteLevelBpeTokenizer>(std::move(from_json->vocab),
                                                            std::move(from_json->merges), options,
                                                            json_path.string())
                  : ByteLevelBpeTokenizer::from_files(*dir.bpe_vocab, *dir.bpe_merges, options);
    check_added_ids(added, tokenizer->added_tokens(), tokenizer->base_vocab_size(),
                    from_json ? "tokenizer.json" : "vocab.json");
    tokenizer->set_model_max_length(max_length);
    tokenizer->set_clean_up_spaces(clean_up);
    return tokenizer;
  }
  if (!dir.vocab && (dir.sentencepiece || json_model == "Unigram")) {
    // XLM-RoBERTa numbers SentencePiece's pieces as fairseq did (HF XLMRobertaTokenizer), and so
    // does the Unigram of a tokenizer.json alone.
    if (dir.sentencepiece && model_type != "xlm-roberta" &&
        config_string(config, config_name, "tokenizer_class").rfind("XLMRoberta", 0) != 0) {
      refuse_albert_preprocessing(config, config_name);
      auto tokenizer =
          std::make_unique<SentencePieceTokenizer>(*dir.sentencepiece, SentencePieceIds::kModel);
      refuse_added_tokens(read_added_tokens(dir, tokenizer->special_tokens()), *tokenizer);
      tokenizer->set_model_max_length(max_length);
      tokenizer->set_clean_up_spaces(clean_up);
      return tokenizer;
    }
    std::optional<UnigramJson> unigram;
    if (!dir.sentencepiece) unigram = read_unigram_json(*json_file, json_path);
    // The added tokens are read against XLM-R's special tokens (fairseq's names).
    SpecialTokens xlmr = {"<unk>", "<s>", "</s>", "<pad>", "<mask>"};
    const auto added = read_added_tokens(dir, xlmr);
    std::vector<AddedToken> tokens;
    for (const auto& d : added) tokens.push_back(d.token);
    auto tokenizer =
        unigram ? SentencePieceTokenizer::from_unigram(
                      std::move(unigram->pieces), std::move(unigram->scores), unigram->unk_id,
                      std::move(unigram->pipeline), std::move(tokens), model_vocab_size, json_path)
                : std::make_unique<SentencePieceTokenizer>(*dir.sentencepiece,
                                                           SentencePieceIds::kFairseq,
                                                           std::move(tokens), model_vocab_size);
    check_added_ids(added, tokenizer->added_tokens(), tokenizer->base_vocab_size(),
                    unigram ? "tokenizer.json" : dir.sentencepiece->filename().string().c_str());
    tokenizer->set_model_max_length(max_length);
    tokenizer->set_clean_up_spaces(clean_up);
    return tokenizer;
  }
  // WordPiece: vocab.txt, else a tokenizer.json alone (its normalizer, the model's settings).
  std::optional<WordPieceJson> from_json;
  if (!dir.vocab) {
    if (!json_file)
      throw TokenizerError(fmt::format(
          "{}: no tokenizer files (vocab.txt, vocab.json + merges.txt, a sentencepiece model, or "
          "a WordPiece, byte-level BPE or XLM-R Unigram tokenizer.json)",
          dir.dir.string()));
    from_json = read_wordpiece_json(*json_file, json_path);
  }
  const std::string source = from_json ? json_path.string() : dir.vocab->string();
  std::vector<std::string> vocab =
      from_json ? std::move(from_json->vocab) : read_vocab_file(*dir.vocab);

  WordPieceOptions options;
  options.model_vocab_size = model_vocab_size;
  options.check_casing = !overrides.check_casing ? CasingCheck::kOff
                         : overrides.lowercase   ? CasingCheck::kError
                                                 : CasingCheck::kWarn;
  const auto read_bool = [&](const char* key) { return config_bool(config, config_name, key); };
  if (from_json) {
    options.normalizer = from_json->normalizer;
    options.continuing_subword_prefix = from_json->prefix;
    options.max_input_chars_per_word = from_json->max_input_chars_per_word;
    special.unk = from_json->unk;
    if (from_json->cls) special.cls = *from_json->cls;
    if (from_json->sep) special.sep = *from_json->sep;
  }
  // The normalizer: with tokenizer_config.json, as HF's BertTokenizer(Fast) takes it
  // (do_lower_case true, strip_accents following it and tokenize_chinese_chars true where
  // absent; the fast one sets these over tokenizer.json's normalizer too), unless it names the
  // generic PreTrainedTokenizerFast, which keeps tokenizer.json's normalizer as it is. Without
  // tokenizer_config.json: tokenizer.json's normalizer, or for vocab.txt alone the
  // vocabulary's casing (not HF's lower-casing default, which silently breaks cased
  // checkpoints). --lowercase over all of them.
  const bool keeps_normalizer =
      from_json &&
      (!dir.tokenizer_config ||
       config_string(config, config_name, "tokenizer_class") == "PreTrainedTokenizerFast");
  std::optional<bool> lowercase = overrides.lowercase;
  if (!keeps_normalizer) {
    if (!lowercase && dir.tokenizer_config) lowercase = read_bool("do_lower_case").value_or(true);
    if (!lowercase) {
      lowercase = !vocab_casing(vocab).cased();
      log::info(
          "[tokenizer] {}: no tokenizer_config.json; the vocabulary is {}, so lower-casing is {}",
          dir.dir.string(), *lowercase ? "uncased" : "cased", *lowercase ? "on" : "off");
    }
    options.normalizer.lowercase = *lowercase;
    options.normalizer.strip_accents = read_bool("strip_accents").value_or(*lowercase);
    options.normalizer.handle_chinese_chars = read_bool("tokenize_chinese_chars").value_or(true);
  } else if (lowercase) {  // --lowercase over tokenizer.json's normalizer
    options.normalizer.lowercase = *lowercase;
    options.normalizer.strip_accents = from_json->strip_accents.value_or(*lowercase);
  }
  read_specials();
  options.special = special;
  options.hf_class = class_stem + "Tokenizer";
  const auto added = read_added_tokens(dir, special);
  for (const auto& d : added) options.added_tokens.push_back(d.token);
  auto tokenizer = std::make_unique<WordPieceTokenizer>(std::move(vocab), options, source);
  check_added_ids(added, tokenizer->added_tokens(), tokenizer->base_vocab_size(),
                  from_json ? "tokenizer.json" : "vocab.txt");
  tokenizer->set_model_max_length(max_length);
  tokenizer->set_clean_up_spaces(clean_up);
  return tokenizer;
}

}  // namespace

}  // namespace bert::tok
