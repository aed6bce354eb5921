#include "bert/tokenizer/sentencepiece_model.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/strings.h"
#include "bert/tokenizer/hf_added_tokens.h"
#include "bert/tokenizer/spm_normalizer.h"
#include "bert/tokenizer/spm_shim.h"
#include "bert/tokenizer/unicode.h"
#include "bert/tokenizer/unigram.h"

#ifndef BERTFT_SPM_MODULE_PATH
#define BERTFT_SPM_MODULE_PATH "libbertft_spm.so"
#endif

extern char** environ;

namespace bert::tok {

struct detail::SpmModule {
  decltype(&bertft_spm_load) load = nullptr;
  decltype(&bertft_spm_free) free = nullptr;
  decltype(&bertft_spm_size) size = nullptr;
  decltype(&bertft_spm_unk_id) unk_id = nullptr;
  decltype(&bertft_spm_score) score = nullptr;
  decltype(&bertft_spm_piece_to_id) piece_to_id = nullptr;
  decltype(&bertft_spm_id_to_piece) id_to_piece = nullptr;
  decltype(&bertft_spm_encode) encode = nullptr;
};

namespace {

const detail::SpmModule* load_module_or_throw();

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file,
                                               SentencePieceIds ids,
                                               std::vector<AddedToken> added,
                                               int64_t model_vocab_size)
    : model_file_(model_file), ids_(ids), module_(load_module_or_throw()) {
  if (!added.empty() && ids_ != SentencePieceIds::kFairseq)
    throw TokenizerError(fmt::format(
        "{}: added tokens are supported for SentencePiece with fairseq's ids (XLM-R) only",
        model_file.string()));
  char error[512] = {};
  processor_ = module_->load(model_file.c_str(), error, sizeof error);
  if (processor_ == nullptr)
    throw TokenizerError(
        fmt::format("{}: cannot load sentencepiece model: {}", model_file.string(), error));
  std::vector<std::string> vocab(static_cast<size_t>(module_->size(processor_)));
  for (size_t i = 0; i < vocab.size(); ++i)
    vocab[i] = module_->id_to_piece(processor_, static_cast<int>(i));
  const int unk = module_->unk_id(processor_);
  SpecialTokens special;
  if (ids_ == SentencePieceIds::kFairseq) {
    // fairseq's dictionary: four specials, the model's pieces from id 3 on shifted by one, <mask>.
    if (vocab.size() < 3)
      throw TokenizerError(fmt::format("{}: too few pieces for fairseq's numbering ({})",
                                       model_file.string(), vocab.size()));
    std::vector<std::string> fairseq = {"<s>", "<pad>", "</s>", "<unk>"};
    fairseq.insert(fairseq.end(), vocab.begin() + 3, vocab.end());
    fairseq.push_back("<mask>");
    // HF's converter scores the four specials and <mask> 0 and keeps the model's own scores.
    std::vector<double> scores(fairseq.size(), 0.0);
    for (size_t i = 3; i < vocab.size(); ++i)
      scores[i + 1] = module_->score(processor_, static_cast<int>(i));
    charsmap_blob_ = read_spm_charsmap(model_file);
    init_fairseq(std::move(fairseq), std::move(scores), /*unk_id=*/3, std::move(added),
                 model_vocab_size, model_file.string());
    return;
  }
  special.unk = vocab.at(static_cast<size_t>(unk));
  auto pick = [&](std::string bracketed, std::string angled) {
    return module_->piece_to_id(processor_, bracketed.data(), bracketed.size()) != unk ? bracketed
                                                                                       : angled;
  };
  special.cls = pick("[CLS]", "<s>");
  special.sep = pick("[SEP]", "</s>");
  special.pad = pick("[PAD]", "<pad>");
  special.mask = pick("[MASK]", "<mask>");
  base_vocab_size_ = static_cast<int64_t>(vocab.size());
  set_vocab(std::move(vocab), special);
}

SentencePieceTokenizer::SentencePieceTokenizer(WithoutModel, const std::filesystem::path& source)
    : model_file_(source), has_model_file_(false), ids_(SentencePieceIds::kFairseq) {}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_unigram(
    std::vector<std::string> pieces,
    std::vector<double> scores,
    int64_t unk_id,
    UnigramPipeline pipeline,
    std::vector<AddedToken> added,
    int64_t model_vocab_size,
    const std::filesystem::path& source) {
  if (pieces.size() != scores.size())
    throw TokenizerError(
        fmt::format("{}: {} pieces with {} scores", source.string(), pieces.size(), scores.size()));
  if (unk_id < 0 || unk_id >= static_cast<int64_t>(pieces.size()) ||
      pieces[static_cast<size_t>(unk_id)] != "<unk>")
    throw TokenizerError(
        fmt::format("{}: the unknown piece (id {}) is not \"<unk>\"; bertft's Unigram is XLM-R's",
                    source.string(), unk_id));
  for (const char* special : {"<s>", "</s>", "<pad>", "<mask>"})
    if (std::find(pieces.begin(), pieces.end(), special) == pieces.end())
      throw TokenizerError(
          fmt::format("{}: no piece \"{}\"; bertft's Unigram is XLM-R's, with "
                      "<s> <pad> </s> <unk> and <mask>",
                      source.string(), special));
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer(WithoutModel(), source));
  t->charsmap_blob_ = std::move(pipeline.charsmap);
  t->collapse_spaces_ = pipeline.collapse_spaces;
  t->whitespace_split_ = pipeline.whitespace_split;
  t->init_fairseq(std::move(pieces), std::move(scores), unk_id, std::move(added), model_vocab_size,
                  source.string());
  return t;
}

void SentencePieceTokenizer::init_fairseq(std::vector<std::string> pieces,
                                          std::vector<double> scores,
                                          int64_t unk_id,
                                          std::vector<AddedToken> added,
                                          int64_t model_vocab_size,
                                          const std::string& source) {
  if (model_vocab_size > 0 && static_cast<int64_t>(pieces.size()) > model_vocab_size)
    throw TokenizerError(fmt::format(
        "{}: the vocabulary has {} pieces but the model embeds only {} (config.json vocab_size)",
        source, pieces.size(), model_vocab_size));
  unigram_ = std::make_unique<UnigramModel>(pieces, scores, unk_id);
  scores_ = std::move(scores);
  if (!charsmap_blob_.empty())
    charsmap_ = std::make_unique<PrecompiledCharsmap>(charsmap_blob_, source);
  base_vocab_size_ = static_cast<int64_t>(pieces.size());
  number_added_tokens(added, pieces, model_vocab_size, source);
  set_vocab(std::move(pieces), {"<unk>", "<s>", "</s>", "<pad>", "<mask>"});
  roberta_template_ = true;
  added_ = std::move(added);
  if (!added_.empty()) {
    // HF matches a normalized added token against the normalized text, by its own content
    // normalized the same way.
    auto matchers =
        added_token_matchers(special_strings_, special_.mask_id, added_, [&](const auto& c) {
          std::vector<char32_t> cps;
          std::vector<uint32_t> at;
          unicode::decode_utf8(normalize_like_hf(c).text, cps, at);
          return std::u32string(cps.begin(), cps.end());
        });
    raw_added_ = std::move(matchers.raw);
    normalized_added_ = std::move(matchers.normalized);
    for (const auto& t : added_)
      if (t.normalized)
        normalized_added_text_.emplace(t.content, normalize_like_hf(t.content).text);
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() {
  if (processor_ != nullptr) module_->free(processor_);
}

std::string SentencePieceTokenizer::detokenize(const std::vector<std::string>& tokens) const {
  static constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁"
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    // HF's fast tokenizer gives an added token matched in the normalized text as normalized.
    const auto added = normalized_added_text_.find(tokens[i]);
    const std::string_view token =
        added != normalized_added_text_.end() ? std::string_view(added->second) : tokens[i];
    // The first piece's "▁" is the space the pre-tokenizer put before the text.
    size_t at =
        i == 0 && token.substr(0, kSpaceSymbol.size()) == kSpaceSymbol ? kSpaceSymbol.size() : 0;
    for (size_t hit; (hit = token.find(kSpaceSymbol, at)) != std::string_view::npos;
         at = hit + kSpaceSymbol.size())
      text.append(token.substr(at, hit - at)).push_back(' ');
    text.append(token.substr(at));
  }
  return text;
}

std::vector<Piece> SentencePieceTokenizer::tokenize(std::string_view text) const {
  if (!added_.empty()) return tokenize_with_added(text);
  const bool fairseq = ids_ == SentencePieceIds::kFairseq;
  std::vector<Piece> out;
  int32_t word = -1;
  for (const auto& s : special_segments(text, /*mask_lstrip=*/fairseq)) {
    if (s.id >= 0) {
      // fairseq's <mask> takes the whitespace before it, offsets included (HF's lstrip).
      out.push_back({s.id, std::string(text.substr(s.text_begin, s.end - s.text_begin)),
                     static_cast<uint32_t>(s.text_begin), static_cast<uint32_t>(s.end), ++word});
      continue;
    }
    const auto stretch = text.substr(s.begin, s.end - s.begin);
    if (fairseq)
      tokenize_like_hf(stretch, s.begin, out, word);
    else
      tokenize_with_libsentencepiece(stretch, s.begin, out, word);
  }
  return out;
}

void SentencePieceTokenizer::tokenize_like_hf(std::string_view stretch,
                                              size_t base,
                                              std::vector<Piece>& out,
                                              int32_t& word) const {
  metaspace_unigram(normalize_like_hf(stretch), base, out, word);
}

AlignedText SentencePieceTokenizer::normalize_like_hf(std::string_view text) const {
  AlignedText t = AlignedText::from(text);
  if (charsmap_) charsmap_->normalize(t);
  if (collapse_spaces_) collapse_spaces(t);
  return t;
}

void SentencePieceTokenizer::metaspace_unigram(AlignedText split,
                                               size_t base,
                                               std::vector<Piece>& out,
                                               int32_t& word) const {
  if (!whitespace_split_) return metaspace_words_unigram(std::move(split), base, out, word);
  // Each run of non-whitespace on its own, the whitespace dropped.
  std::vector<char32_t> cps;
  std::vector<uint32_t> at;
  unicode::decode_utf8(split.text, cps, at);
  for (size_t i = 0; i < cps.size();) {
    if (unicode::is_whitespace(cps[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && !unicode::is_whitespace(cps[j])) ++j;
    AlignedText run;
    run.text = split.text.substr(at[i], at[j] - at[i]);
    run.align.assign(split.align.begin() + at[i], split.align.begin() + at[j]);
    metaspace_words_unigram(std::move(run), base, out, word);
    i = j;
  }
}

void SentencePieceTokenizer::metaspace_words_unigram(AlignedText split,
                                                     size_t base,
                                                     std::vector<Piece>& out,
                                                     int32_t& word) const {
  for (const auto& [wb, we] : metaspace_words(split)) {
    ++word;
    for (const auto& token : unigram_->encode(std::string_view(split.text).substr(wb, we - wb))) {
      const auto [b, e] = split.original(wb + token.begin, wb + token.end);
      out.push_back({token.id, split.text.substr(wb + token.begin, token.end - token.begin),
                     static_cast<uint32_t>(base + b), static_cast<uint32_t>(base + e), word});
    }
  }
}

std::vector<Piece> SentencePieceTokenizer::tokenize_with_added(std::string_view text) const {
  std::vector<Piece> out;
  std::vector<char32_t> cps, normalized_cps;
  std::vector<uint32_t> at, normalized_at;
  std::vector<AddedTokenMatcher::Match> raw, normalized;
  unicode::decode_utf8(text, cps, at);
  raw_added_.find(cps.data(), cps.size(), raw);
  int32_t word = -1;
  const auto ordinary = [&](size_t from, size_t to) {  // code points of `text`
    const size_t base = at[from];
    const AlignedText t = normalize_like_hf(text.substr(base, at[to] - base));
    unicode::decode_utf8(t.text, normalized_cps, normalized_at);
    normalized_added_.find(normalized_cps.data(), normalized_cps.size(), normalized);
    split_at_matches(
        normalized, normalized_cps.size(),
        [&](size_t b, size_t e) {  // normalized bytes [nb, ne) between the matches
          const size_t nb = normalized_at[b], ne = normalized_at[e];
          AlignedText split;
          split.text = t.text.substr(nb, ne - nb);
          split.align.assign(t.align.begin() + static_cast<std::ptrdiff_t>(nb),
                             t.align.begin() + static_cast<std::ptrdiff_t>(ne));
          metaspace_unigram(std::move(split), base, out, word);
        },
        [&](const AddedTokenMatcher::Match& m) {
          const size_t nb = normalized_at[m.begin], ne = normalized_at[m.end];
          const auto [b, e] = t.original(nb, ne);
          out.push_back({m.id, t.text.substr(nb, ne - nb), static_cast<uint32_t>(base + b),
                         static_cast<uint32_t>(base + e), ++word});
        });
  };
  // A raw match (a special token, or an added token that is not normalized) keeps the text it
  // matched, whitespace taken by lstrip/rstrip included, offsets too (HF's lstrip of <mask>).
  split_at_matches(raw, cps.size(), ordinary, [&](const AddedTokenMatcher::Match& m) {
    out.push_back({m.id, std::string(text.substr(at[m.begin], at[m.end] - at[m.begin])),
                   at[m.begin], at[m.end], ++word});
  });
  return out;
}

void SentencePieceTokenizer::tokenize_with_libsentencepiece(std::string_view stretch,
                                                            size_t base,
                                                            std::vector<Piece>& out,
                                                            int32_t& word) const {
  struct Context {
    std::vector<Piece>* out;
    size_t base;
    int32_t* word;
  };
  Context context{&out, base, &word};
  char error[512] = {};
  const auto on_piece = [](void* ctx, int id, const char* piece, size_t len, uint32_t b,
                           uint32_t e) {
    auto* c = static_cast<Context*>(ctx);
    std::string token(piece, len);
    if (token.rfind("\xe2\x96\x81", 0) == 0 || *c->word < 0) ++*c->word;  // "▁" starts a word
    c->out->push_back({id, std::move(token), static_cast<uint32_t>(c->base + b),
                       static_cast<uint32_t>(c->base + e), *c->word});
  };
  if (module_->encode(processor_, stretch.data(), stretch.size(), on_piece, &context, error,
                      sizeof error) != 0)
    throw TokenizerError(fmt::format("sentencepiece: {}", error));
}

nlohmann::json SentencePieceTokenizer::hf_tokenizer_json() const {
  using json = nlohmann::json;
  if (ids_ != SentencePieceIds::kFairseq)
    throw TokenizerError(model_file_.string() +
                         ": tokenizer.json is written for fairseq's ids (XLM-R) only");
  json vocab = json::array();
  for (int64_t i = 0; i < base_vocab_size_; ++i)
    vocab.push_back(json::array({id_to_token_[static_cast<size_t>(i)], scores_[i]}));
  const auto special = [](const std::string& id) {
    return json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
  };
  const auto sequence = [](const char* id) {
    return json{{"Sequence", {{"id", id}, {"type_id", 0}}}};
  };
  const json metaspace = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
  json normalizers = json::array();
  if (!charsmap_blob_.empty())
    normalizers.push_back(
        {{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(charsmap_blob_)}});
  if (collapse_spaces_)
    normalizers.push_back(
        {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  const json pre_tokenizer =
      whitespace_split_
          ? json{{"type", "Sequence"},
                 {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}}, metaspace})}}
          : metaspace;
  const auto& cls = special_.cls;
  const auto& sep = special_.sep;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", hf_added_tokens(special_strings_, special_.mask_id, added_)},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({special(cls), sequence("A"), special(sep)})},
            {"pair", json::array({special(cls), sequence("A"), special(sep), special(sep),
                                  sequence("B"), special(sep)})},
            {"special_tokens",
             {{cls, {{"id", cls}, {"ids", {special_.cls_id}}, {"tokens", {cls}}}},
              {sep, {{"id", sep}, {"ids", {special_.sep_id}}, {"tokens", {sep}}}}}}}},
          {"decoder", metaspace},
          {"model",
           {{"type", "Unigram"},
            {"unk_id", special_.unk_id},
            {"vocab", vocab},
            {"byte_fallback", false}}}};
}

void SentencePieceTokenizer::save(const std::filesystem::path& dir) const {
  const bool fairseq = ids_ == SentencePieceIds::kFairseq;
  // Without a .model (from_unigram) the tokenizer.json written below is the whole tokenizer.
  if (has_model_file_)
    write_file_atomic(dir / (fairseq ? "sentencepiece.bpe.model" : "spiece.model"),
                      read_file(model_file_));
  nlohmann::ordered_json config = {
      {"tokenizer_class", fairseq ? "XLMRobertaTokenizer" : "AlbertTokenizer"},
      {"unk_token", special_.unk},
      {"cls_token", special_.cls},
      {"sep_token", special_.sep},
      {"pad_token", special_.pad},
      {"mask_token", special_.mask},
      {"model_max_length", model_max_length_ > 0 ? model_max_length_ : 512},
      {"clean_up_tokenization_spaces", clean_up_spaces_}};
  if (!fairseq) {
    // AlbertTokenizer lower-cases and strips accents unless told not to; bertft does neither.
    config["do_lower_case"] = false;
    config["keep_accents"] = true;
  }
  write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
  if (!fairseq) return;
  write_file_atomic(dir / "tokenizer.json", hf_tokenizer_json().dump() + "\n");
  nlohmann::ordered_json added = nlohmann::ordered_json::object();
  for (const auto& t : added_)
    if (t.id >= base_vocab_size_) added[t.content] = t.id;
  if (!added.empty()) write_file_atomic(dir / "added_tokens.json", added.dump(2) + "\n");
}

namespace {

const detail::SpmModule* load_module_or_throw() {
  static std::once_flag once;
  static detail::SpmModule module;
  static std::string failure;
  std::call_once(once, [] {
    const char* env = std::getenv("BERTFT_SPM_MODULE");
    const std::string path = env != nullptr ? env : BERTFT_SPM_MODULE_PATH;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      failure = fmt::format("cannot load the sentencepiece module {}: {} (set BERTFT_SPM_MODULE)",
                            path, ::dlerror());
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (fn == nullptr && failure.empty())
        failure = fmt::format("{}: missing symbol {}", path, name);
    };
    sym(module.load, "bertft_spm_load");
    sym(module.free, "bertft_spm_free");
    sym(module.size, "bertft_spm_size");
    sym(module.unk_id, "bertft_spm_unk_id");
    sym(module.score, "bertft_spm_score");
    sym(module.piece_to_id, "bertft_spm_piece_to_id");
    sym(module.id_to_piece, "bertft_spm_id_to_piece");
    sym(module.encode, "bertft_spm_encode");
  });
  if (!failure.empty()) throw TokenizerError(failure);
  return &module;
}

}  // namespace

void train_sentencepiece_with_args(const std::vector<std::string>& args) {
  const char* env = std::getenv("BERTFT_SPM_TRAIN");
  const std::string helper = env != nullptr ? env : BERTFT_SPM_TRAIN_PATH;
  std::vector<char*> argv = {const_cast<char*>(helper.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = posix_spawn(&pid, helper.c_str(), nullptr, nullptr, argv.data(), environ);
      rc != 0)
    throw TokenizerError(
        fmt::format("cannot start the sentencepiece trainer {}: {} (set BERTFT_SPM_TRAIN)", helper,
                    std::strerror(rc)));
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw TokenizerError(fmt::format(
        "the sentencepiece trainer {} failed (status {}); its message is above", helper, status));
}

}  // namespace bert::tok
