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

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : model_file_(model_file), module_(load_module_or_throw()) {
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
  special.unk = vocab.at(static_cast<size_t>(unk));
  auto pick = [&](std::string bracketed, std::string angled) {
    return module_->piece_to_id(processor_, bracketed.data(), bracketed.size()) != unk ? bracketed
                                                                                       : angled;
  };
  special.cls = pick("[CLS]", "<s>");
  special.sep = pick("[SEP]", "</s>");
  special.pad = pick("[PAD]", "<pad>");
  special.mask = pick("[MASK]", "<mask>");
  set_vocab(std::move(vocab), special);
}

SentencePieceTokenizer::~SentencePieceTokenizer() {
  if (processor_ != nullptr) module_->free(processor_);
}

std::vector<Piece> SentencePieceTokenizer::tokenize(std::string_view text) const {
  struct Context {
    std::vector<Piece>* out;
    size_t base;
    int32_t* word;
  };
  std::vector<Piece> out;
  int32_t word = -1;
  split_on_special_tokens(
      text,
      [&](size_t begin, size_t end) {
        Context context{&out, begin, &word};
        char error[512] = {};
        const auto on_piece = [](void* ctx, int id, const char* piece, size_t len, uint32_t b,
                                 uint32_t e) {
          auto* c = static_cast<Context*>(ctx);
          const std::string token(piece, len);
          if (token.rfind("\xe2\x96\x81", 0) == 0 || *c->word < 0) ++*c->word;  // "▁" starts a word
          c->out->push_back({id, token, static_cast<uint32_t>(c->base + b),
                             static_cast<uint32_t>(c->base + e), *c->word});
        };
        if (module_->encode(processor_, text.data() + begin, end - begin, on_piece, &context, error,
                            sizeof error) != 0)
          throw TokenizerError(fmt::format("sentencepiece: {}", error));
      },
      [&](size_t begin, size_t end, int64_t id) {
        out.push_back({id, id_to_token_[static_cast<size_t>(id)], static_cast<uint32_t>(begin),
                       static_cast<uint32_t>(end), ++word});
      });
  return out;
}

void SentencePieceTokenizer::save(const std::filesystem::path& dir) const {
  write_file_atomic(dir / "spiece.model", read_file(model_file_));
  const nlohmann::ordered_json config = {
      {"tokenizer_class", "AlbertTokenizer"},
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
