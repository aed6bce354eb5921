// A model directory's tokenizer files as load_tokenizer reads them: the input, split at NUL
// bytes, becomes tokenizer_config.json, tokenizer.json, added_tokens.json and
// special_tokens_map.json (each present as far as the input reaches) beside a fixed vocab.txt
// (WordPiece), vocab.json + merges.txt (byte-level BPE) or SentencePiece model (numbered by its
// own ids, or XLM-R's fairseq ids), or with no vocabulary file (WordPiece, byte-level BPE or
// XLM-R's Unigram from tokenizer.json alone); the tokenizer built, if any, then encodes a text
// with added-token candidates in it.
#include <stdlib.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/byte_level_bpe.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/vocab_trainer.h"
#include "fuzz/fuzz_input.h"

// libsentencepiece is reached through a module dlopen()ed with RTLD_DEEPBIND (spm_shim.h), which
// AddressSanitizer's runtime refuses: under ASan the SentencePiece kinds are skipped, and they
// are fuzzed in a build without it (BERTFT_FUZZ_SANITIZERS=undefined scripts/fuzz.sh) and
// replayed by the ordinary build's tests.
#if defined(__SANITIZE_ADDRESS__)
#define BERTFT_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BERTFT_FUZZ_ASAN 1
#endif
#endif
#ifndef BERTFT_FUZZ_ASAN
#define BERTFT_FUZZ_ASAN 0
#endif

namespace {

namespace fs = std::filesystem;

enum Kind { kWordPiece, kBpe, kSentencePiece, kXlmR };

/// Four directories written once per process: "wordpiece" (vocab.txt), "bpe" (vocab.json,
/// merges.txt), "spm" (a unigram model trained here, its own ids: an ALBERT-style directory) and
/// "xlmr" (the same model as XLM-R's sentencepiece.bpe.model), each with a config.json; removed
/// at exit.
struct Dirs {
  fs::path root, wordpiece, bpe, spm, xlmr;
  int64_t wordpiece_size = 0, bpe_size = 0, spm_size = 0, xlmr_size = 0;
  Dirs() {
    std::string pattern = (fs::temp_directory_path() / "bertft-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) __builtin_trap();
    root = pattern;
    wordpiece = root / "wordpiece";
    bpe = root / "bpe";
    fs::create_directory(wordpiece);
    fs::create_directory(bpe);

    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    wordpiece_size = 5;
    for (char c = 33; c < 127; ++c, wordpiece_size += 2)
      vocab += std::string(1, c) + "\n##" + std::string(1, c) + "\n";
    for (const char* w : {"the", "tok", "##en", "中", "文", "é"}) {
      vocab += std::string(w) + "\n";
      ++wordpiece_size;
    }
    bert::write_file_atomic(wordpiece / "vocab.txt", vocab);
    bert::write_file_atomic(wordpiece / "config.json", R"({"model_type": "bert"})");

    using bert::tok::byte_symbol;
    nlohmann::json ids = nlohmann::json::object();
    for (const char* s : {"<s>", "<pad>", "</s>", "<unk>"}) ids[s] = bpe_size++;
    for (int b = 0; b < 256; ++b) ids[byte_symbol(static_cast<unsigned char>(b))] = bpe_size++;
    std::string merges = "#version: 0.2\n";
    for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
             {"t", "h"}, {"th", "e"}, {byte_symbol(' '), "the"}}) {
      merges += a + " " + b + "\n";
      ids[a + b] = bpe_size++;
    }
    ids["<mask>"] = bpe_size++;
    bert::write_file_atomic(bpe / "vocab.json", ids.dump());
    bert::write_file_atomic(bpe / "merges.txt", merges);
    bert::write_file_atomic(bpe / "config.json", R"({"model_type": "roberta"})");

    if (BERTFT_FUZZ_ASAN) return;
    // A small unigram model from generated sentences (libsentencepiece's trainer).
    spm = root / "spm";
    xlmr = root / "xlmr";
    fs::create_directory(spm);
    fs::create_directory(xlmr);
    std::string corpus;
    const char* words[] = {"the", "token", "end", "x", "alpha", "beta", "é", "中文", "mask"};
    for (int i = 0; i < 600; ++i)
      corpus += std::string(words[i % 9]) + " " + words[(i * 5 + 2) % 9] + " " +
                words[(i * 7 + 1) % 9] + ".\n";
    bert::write_file_atomic(root / "corpus.txt", corpus);
    bert::tok::train_sentencepiece({root / "corpus.txt"}, (root / "model").string(), 48, "unigram");
    const std::string model = bert::read_file(root / "model.model");
    bert::write_file_atomic(spm / "spiece.model", model);
    bert::write_file_atomic(spm / "config.json", R"({"model_type": "albert"})");
    bert::write_file_atomic(xlmr / "sentencepiece.bpe.model", model);
    bert::write_file_atomic(xlmr / "config.json", R"({"model_type": "xlm-roberta"})");
    spm_size = bert::tok::SentencePieceTokenizer(spm / "spiece.model").vocab_size();
    xlmr_size = bert::tok::SentencePieceTokenizer(xlmr / "sentencepiece.bpe.model",
                                                  bert::tok::SentencePieceIds::kFairseq)
                    .vocab_size();
  }
  const fs::path& dir(Kind kind) const {
    return kind == kBpe ? bpe : kind == kSentencePiece ? spm : kind == kXlmR ? xlmr : wordpiece;
  }
  int64_t size(Kind kind) const {
    return kind == kBpe             ? bpe_size
           : kind == kSentencePiece ? spm_size
           : kind == kXlmR          ? xlmr_size
                                    : wordpiece_size;
  }
  ~Dirs() {
    std::error_code ignored;
    bert::remove_tree(root, ignored);
  }
};

constexpr std::array<const char*, 4> kFiles = {"tokenizer_config.json", "tokenizer.json",
                                               "added_tokens.json", "special_tokens_map.json"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const Dirs dirs;
  // Bit 0 clear: WordPiece (bits 1-2 both set: from tokenizer.json alone, vocab.txt unseen);
  // set: bits 1-2 pick byte-level BPE (0 or 3), own-id SentencePiece (1) or XLM-R's (2).
  const int pick = (data[0] >> 1) & 3;
  const bool json_alone = !(data[0] & 1) && pick == 3;
  const Kind kind = !(data[0] & 1) ? kWordPiece
                    : pick == 1    ? kSentencePiece
                    : pick == 2    ? kXlmR
                                   : kBpe;
  if (BERTFT_FUZZ_ASAN && (kind == kSentencePiece || kind == kXlmR)) return 0;
  const fs::path dir = dirs.dir(kind);
  // The input after its first byte, cut at NUL bytes into the files in kFiles' order: as many
  // files as there are parts (an empty first part: no tokenizer_config.json).
  auto rest = bert::fuzz::as_text(data + 1, size - 1);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < kFiles.size()) {
    const auto nul = rest.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(rest.substr(0, nul));
    rest = rest.substr(nul + 1);
  }
  parts.push_back(rest);
  const bool has_config = !parts[0].empty();
  for (size_t i = 0; i < kFiles.size(); ++i) {
    if (i < parts.size() && (i > 0 || has_config))
      bert::write_file_atomic(dir / kFiles[i], parts[i]);
    else
      fs::remove(dir / kFiles[i]);
  }
  bert::PretrainedDir d;
  d.dir = dir;
  d.config = dir / "config.json";
  if (kind == kBpe) {
    d.bpe_vocab = dir / "vocab.json";
    d.bpe_merges = dir / "merges.txt";
  } else if (kind == kSentencePiece) {
    d.sentencepiece = dir / "spiece.model";
  } else if (kind == kXlmR) {
    d.sentencepiece = dir / "sentencepiece.bpe.model";
  } else if (!json_alone) {
    d.vocab = dir / "vocab.txt";
  }
  if (has_config) d.tokenizer_config = dir / kFiles[0];
  bert::tok::TokenizerOverrides overrides;
  if (data[0] & 2) overrides.lowercase = (data[0] & 4) != 0;
  overrides.check_casing = (data[0] & 8) != 0;
  // Room for a few added tokens beyond the base vocabulary, or none.
  const int64_t model_vocab_size = dirs.size(kind) + (data[0] >> 4);
  try {
    const auto tokenizer = bert::tok::load_tokenizer(d, model_vocab_size, overrides);
    const auto encoding = tokenizer->encode("The token <e> x  中文 é [MASK]<mask> end", "pair");
    for (const auto id : encoding.ids)
      if (id < 0 || id >= model_vocab_size) __builtin_trap();  // an id the model cannot embed
    (void)tokenizer->decode(encoding.ids, data[0] & 1);
  } catch (const bert::Error&) {
  }
  return 0;
}
