#include "bert/tokenizer/sentencepiece_model.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/spm_shim.h"
#include "bert/tokenizer/unicode.h"

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
  decltype(&bertft_spm_piece_to_id) piece_to_id = nullptr;
  decltype(&bertft_spm_id_to_piece) id_to_piece = nullptr;
  decltype(&bertft_spm_encode) encode = nullptr;
};

namespace {

const detail::SpmModule* load_module_or_throw();

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file,
                                               SentencePieceIds ids)
    : model_file_(model_file), ids_(ids), module_(load_module_or_throw()) {
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
    special = {"<unk>", "<s>", "</s>", "<pad>", "<mask>"};
    unk_id_ = unk;
    set_vocab(std::move(fairseq), special);
    roberta_template_ = true;
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
  unk_id_ = unk;
  set_vocab(std::move(vocab), special);
}

SentencePieceTokenizer::~SentencePieceTokenizer() {
  if (processor_ != nullptr) module_->free(processor_);
}

namespace {

constexpr const char* kWordMark = "\xe2\x96\x81";  // "▁"

/// The byte where the character before byte `at` of `text` starts.
size_t previous_char(std::string_view text, size_t at) {
  do --at;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80);
  return at;
}

/// The byte after the character that starts at byte `at` of `text`.
size_t next_char(std::string_view text, size_t at) {
  do ++at;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80);
  return at;
}

/// Whether the character that starts at byte `at` of `text` is whitespace.
bool whitespace_at(std::string_view text, size_t at) {
  std::vector<char32_t> cp;
  std::vector<uint32_t> offsets;
  unicode::decode_utf8(text.substr(at, next_char(text, at) - at), cp, offsets);
  return !cp.empty() && unicode::is_whitespace(cp[0]);
}

}  // namespace

void SentencePieceTokenizer::align_like_hf(std::string_view text,
                                           size_t begin,
                                           size_t end,
                                           size_t first,
                                           std::vector<Piece>& out,
                                           int32_t& word) const {
  // libsentencepiece strips whitespace at both ends and gives the word mark of a word its
  // spaces; HF's fast tokenizer (precompiled normalizer, spaces collapsed, Metaspace, Unigram)
  // gives a word's mark the last space before it, a mark or character of no span of its own the
  // character it stands at, and ends a text that ends in whitespace with a lone "▁".
  for (size_t i = first; i < out.size(); ++i) {
    Piece& p = out[i];
    size_t k = p.begin;  // the first character of the piece that is not whitespace
    while (k < p.end && whitespace_at(text, k)) k = next_char(text, k);
    const bool marked = p.token.rfind(kWordMark, 0) == 0;
    if (marked && k > begin && whitespace_at(text, previous_char(text, k))) {
      p.begin = static_cast<uint32_t>(previous_char(text, k));
      if (p.end < p.begin + 1) p.end = static_cast<uint32_t>(k);
    } else if (p.begin == p.end && p.begin < end) {
      p.end = static_cast<uint32_t>(next_char(text, p.begin));
    }
  }
  if (end > begin && whitespace_at(text, previous_char(text, end))) {
    const int64_t mark = token_to_id(kWordMark);
    out.push_back({mark >= 0 ? mark : special_.unk_id, kWordMark,
                   static_cast<uint32_t>(previous_char(text, end)), static_cast<uint32_t>(end),
                   ++word});
  }
}

std::vector<Piece> SentencePieceTokenizer::tokenize(std::string_view text) const {
  struct Context {
    std::vector<Piece>* out;
    size_t base;
    int32_t* word;
    bool fairseq;
    int unk;
  };
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
    const size_t first = out.size();
    Context context{&out, s.begin, &word, fairseq, unk_id_};
    char error[512] = {};
    const auto on_piece = [](void* ctx, int id, const char* piece, size_t len, uint32_t b,
                             uint32_t e) {
      auto* c = static_cast<Context*>(ctx);
      const std::string token(piece, len);
      if (token.rfind(kWordMark, 0) == 0 || *c->word < 0) ++*c->word;  // "▁" starts a word
      const int64_t ours = !c->fairseq ? id : id == c->unk ? 3 : id + 1;
      c->out->push_back({ours, token, static_cast<uint32_t>(c->base + b),
                         static_cast<uint32_t>(c->base + e), *c->word});
    };
    if (module_->encode(processor_, text.data() + s.begin, s.end - s.begin, on_piece, &context,
                        error, sizeof error) != 0)
      throw TokenizerError(fmt::format("sentencepiece: {}", error));
    if (fairseq) align_like_hf(text, s.begin, s.end, first, out, word);
  }
  return out;
}

void SentencePieceTokenizer::save(const std::filesystem::path& dir) const {
  const bool fairseq = ids_ == SentencePieceIds::kFairseq;
  write_file_atomic(dir / (fairseq ? "sentencepiece.bpe.model" : "spiece.model"),
                    read_file(model_file_));
  const nlohmann::ordered_json config = {
      {"tokenizer_class", fairseq ? "XLMRobertaTokenizer" : "AlbertTokenizer"},
      {"unk_token", special_.unk},
      {"cls_token", special_.cls},
      {"sep_token", special_.sep},
      {"pad_token", special_.pad},
      {"mask_token", special_.mask},
      {"model_max_length", model_max_length_ > 0 ? model_max_length_ : 512}};
  write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
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
