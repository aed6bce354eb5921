#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bert::tok {

/// A Unigram language-model segmenter that picks the segmentation HF's fast tokenizers pick:
/// the best total score in double precision, the first-found candidate kept on ties (so the
/// one whose last piece starts earliest), a character no single piece covers scored as the
/// unknown piece (lowest score - 10), and runs of unknown pieces fused into one token.
/// libsentencepiece sums in single precision and breaks ties the other way ("▁-----" is
/// "▁ -- - --" there, "▁ - -- --" in HF), so segmentations that must equal HF's come from here.
class UnigramModel {
 public:
  /// `pieces[i]` has id i and score `scores[i]`; `unk_id` is the id of the unknown piece.
  UnigramModel(const std::vector<std::string>& pieces,
               const std::vector<double>& scores,
               int64_t unk_id);

  struct Token {
    int64_t id;
    size_t begin, end;  ///< bytes of the word
  };
  /// The segmentation of `word` (valid UTF-8).
  std::vector<Token> encode(std::string_view word) const;

 private:
  /// A byte trie over the pieces: node n's edges are labels_/targets_[first_[n], first_[n+1]).
  std::vector<uint32_t> first_;
  std::vector<unsigned char> labels_;
  std::vector<uint32_t> targets_;
  std::vector<int64_t> node_id_;  ///< the piece ending at the node, or -1
  std::vector<double> scores_;
  int64_t unk_id_;
  double unk_score_;
};

}  // namespace bert::tok
