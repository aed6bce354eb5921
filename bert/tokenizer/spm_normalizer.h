#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// SentencePiece normalisation the way Hugging Face's fast tokenizers run it (the XLM-R
/// converter's `Precompiled` + `Replace(" {2,}", " ")` + `Metaspace`), keeping, for every byte
/// of the normalised text, the span of the input it came from. libsentencepiece normalises with
/// the same character map but by longest match and with other alignments; HF looks the map up
/// per grapheme cluster, shortest match first, and its offsets follow rules of their own (a
/// character the map drops at the very start of a text shifts the alignments of what follows).
/// Written here because no library reproduces HF's offsets; see the README.
namespace bert::tok {

/// A normalised text and, per byte, the byte span [first, second) of the original it maps to.
struct AlignedText {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> align;

  /// `original` unchanged; every byte aligned to the span of its character. Throws
  /// TokenizerError on invalid UTF-8.
  static AlignedText from(std::string_view original);

  /// One change of HF's NormalizedString::transform: the new character and how it relates to
  /// the old ones (0: replaces the next one; 1: inserted; -n: replaces the next and removes n
  /// more).
  struct Change {
    char32_t c;
    int change;
  };
  /// Rebuilds the whole text from `changes`, read left to right against the old characters.
  void transform(const std::vector<Change>& changes);

  /// The original span of normalised bytes [begin, end) (begin < end).
  std::pair<uint32_t, uint32_t> original(size_t begin, size_t end) const {
    return {align[begin].first, align[end - 1].second};
  }
};

/// A SentencePiece model's precompiled character map (NormalizerSpec.precompiled_charsmap): a
/// darts-clone double array over UTF-8 byte strings whose values index NUL-terminated
/// replacements.
class PrecompiledCharsmap {
 public:
  /// Throws TokenizerError (naming `origin`) when the blob is malformed.
  PrecompiledCharsmap(std::string blob, const std::string& origin);

  /// The replacement of `chunk`, looked up as HF does: the shortest prefix of `chunk` with an
  /// entry decides, and the whole chunk is replaced.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  /// Runs the map over `text` grapheme cluster by grapheme cluster (whole clusters under 6
  /// bytes first, else character by character), keeping alignments as HF does.
  void normalize(AlignedText& text) const;

 private:
  std::string blob_;
  const unsigned char* units_ = nullptr;  // little-endian uint32 units inside blob_
  size_t n_units_ = 0;
  std::string_view replacements_;
};

/// The precompiled character map of a SentencePiece `.model` (empty when the model has none).
/// Reads the one protobuf field libsentencepiece's API does not expose; throws TokenizerError
/// naming the file when it is not a model.
std::string read_spm_charsmap(const std::filesystem::path& model_file);

/// Replaces every run of two or more ASCII spaces with one space aligned to the run's last
/// character (HF's `Replace(" {2,}", " ")`).
void collapse_spaces(AlignedText& text);

/// HF's Metaspace pre-tokenizer (replacement "▁", prefix always added, split): spaces become
/// "▁", a "▁" is put before a text that does not start with one, and the text is cut before
/// every "▁". Returns the words as byte ranges of `text.text`.
std::vector<std::pair<size_t, size_t>> metaspace_words(AlignedText& text);

}  // namespace bert::tok
