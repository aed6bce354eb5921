// `bertft tokenize`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/json_util.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/unicode.h"
#include "data/data_spec.h"
#include "recipes/runner/command.h"

namespace bert::recipes {
namespace {

using json = nlohmann::json;

struct TokenizeArgs {
  std::string vocab, spm, model;
  bool lowercase = false;
  bool no_casing_check = false;
  int64_t max_length = 0;
  std::string truncation = "longest_first";
  bool pad = false;
  int threads = 0;
};

bool is_one_of(const std::vector<std::string>& names, const std::string& key) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

/// The (text, pair) of a JSON line, by the readers' field names (data::text_a_names(), ...);
/// any other field than an id or a label (or labels) is an error, not ignored.
std::pair<std::string, std::optional<std::string>> text_fields(const json& j,
                                                               const std::string& where) {
  std::optional<std::string> text, pair;
  for (const auto& [key, value] : j.items()) {
    const bool a = is_one_of(data::text_a_names(), key), b = is_one_of(data::text_b_names(), key);
    if (!a && !b) {
      if (is_one_of(data::id_names(), key) || is_one_of(data::label_names(), key)) continue;
      throw DataError(fmt::format(
          "{}: unknown field '{}' (text: {}; pair: {}; also {}, {})", where, key,
          fmt::join(data::text_a_names(), " | "), fmt::join(data::text_b_names(), " | "),
          fmt::join(data::id_names(), ", "), fmt::join(data::label_names(), ", ")));
    }
    if (value.is_null()) continue;
    if (!value.is_string()) throw DataError(fmt::format("{}: \"{}\" must be a string", where, key));
    auto& slot = a ? text : pair;
    if (slot)
      throw DataError(
          fmt::format("{}: two fields give the {} text; keep one", where, a ? "first" : "second"));
    slot = value.get<std::string>();
  }
  if (!text) throw DataError(fmt::format("{}: a JSON line needs a string \"text\"", where));
  return {*text, pair};
}

std::unique_ptr<tok::Tokenizer> make_cli_tokenizer(const TokenizeArgs& a) {
  const int sources = !a.vocab.empty() + !a.spm.empty() + !a.model.empty();
  if (sources != 1) throw ConfigError("tokenize: give exactly one of --vocab, --spm, --model");
  if (!a.spm.empty()) return std::make_unique<tok::SentencePieceTokenizer>(a.spm);
  if (!a.model.empty()) {
    const auto dir = PretrainedDir::find(a.model);
    const auto config = BertConfig::from_file(dir.config);
    tok::TokenizerOverrides overrides;
    if (a.lowercase) overrides.lowercase = true;  // otherwise the directory's own setting
    overrides.check_casing = !a.no_casing_check;
    return tok::load_tokenizer(dir, config.vocab_size(), overrides);
  }
  return tok::WordPieceTokenizer::from_file(
      a.vocab, wordpiece_options(a.lowercase, a.no_casing_check ? tok::CasingCheck::kOff
                                                                : tok::CasingCheck::kError));
}

int run_tokenize(const TokenizeArgs& a) {
  const auto tokenizer = make_cli_tokenizer(a);
  tok::EncodeOptions options;
  options.max_length = a.max_length;
  options.truncation = tok::parse_truncation(a.truncation);
  options.padding = a.pad ? tok::Padding::kMaxLength : tok::Padding::kNone;
  if (a.pad && a.max_length <= 0) throw ConfigError("tokenize: --pad needs --max-length");

  constexpr size_t kChunk = 2048;
  std::vector<std::pair<std::string, std::optional<std::string>>> batch;
  size_t line_no = 0;
  auto flush = [&] {
    for (const auto& e : tokenizer->encode_batch(batch, options, a.threads))
      std::cout << tok::to_json(e).dump() << '\n';
    batch.clear();
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '{') {
      json j;
      try {
        j = parse_json_limited(line);
      } catch (const json::parse_error& e) {
        throw DataError(fmt::format("<stdin>:{}: invalid JSON: {}", line_no, e.what()));
      }
      batch.push_back(text_fields(j, fmt::format("<stdin>:{}", line_no)));
    } else {
      try {  // here, so that the error names this line rather than the batch's last
        std::vector<char32_t> code_points;
        std::vector<uint32_t> offsets;
        tok::unicode::decode_utf8(line, code_points, offsets);
      } catch (const TokenizerError& e) {
        throw TokenizerError(fmt::format("<stdin>:{}: {}", line_no, e.what()));
      }
      batch.emplace_back(line, std::nullopt);
    }
    if (batch.size() == kChunk) {
      try {
        flush();
      } catch (const TokenizerError& e) {
        throw TokenizerError(
            fmt::format("<stdin>: lines {}..{}: {}", line_no - kChunk + 1, line_no, e.what()));
      }
    }
  }
  try {
    flush();
  } catch (const TokenizerError& e) {
    throw TokenizerError(fmt::format("<stdin>: near line {}: {}", line_no, e.what()));
  }
  std::cout.flush();
  return 0;
}
}  // namespace

CommandRun setup_tokenize(CLI::App& app, const GlobalOptions&) {
  auto a = std::make_shared<TokenizeArgs>();
  app.add_option("--vocab", a->vocab, "WordPiece vocab.txt")->check(CLI::ExistingFile);
  app.add_option("--spm", a->spm, "SentencePiece .model file")->check(CLI::ExistingFile);
  app.add_option("--model", a->model, "Hugging Face model directory")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--lowercase", a->lowercase, "Lower-case and strip accents (uncased vocabularies)");
  app.add_flag("--no-casing-check", a->no_casing_check,
               "Allow a vocabulary whose casing contradicts --lowercase");
  app.add_option("--max-length", a->max_length, "Truncate to this many tokens (0 = off)")
      ->check(CLI::Range(int64_t{0}, tok::kMaxEncodeLength));
  app.add_option("--truncation", a->truncation, "longest_first | only_first | only_second")
      ->check(CLI::IsMember({"longest_first", "only_first", "only_second"}));
  app.add_flag("--pad", a->pad, "Pad every line to --max-length");
  app.add_option("--tokenizer-threads", a->threads, "Encoding threads (0 = all cores)");
  return [a] { return run_tokenize(*a); };
}

}  // namespace bert::recipes
