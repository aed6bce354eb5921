#include "bert/tokenizer/unigram.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <numeric>

#include "bert/common/error.h"

namespace bert::tok {

namespace {

/// HF's penalty below the lowest piece score for an unknown character.
constexpr double kUnknownPenalty = 10.0;

size_t utf8_length(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

}  // namespace

UnigramModel::UnigramModel(const std::vector<std::string>& pieces,
                           const std::vector<double>& scores,
                           int64_t unk_id)
    : scores_(scores), unk_id_(unk_id) {
  if (pieces.size() != scores.size() || unk_id < 0 || static_cast<size_t>(unk_id) >= pieces.size())
    throw TokenizerError(fmt::format("unigram model: {} pieces, {} scores, unknown id {}",
                                     pieces.size(), scores.size(), unk_id));
  unk_score_ =
      (scores.empty() ? 0.0 : *std::min_element(scores.begin(), scores.end())) - kUnknownPenalty;
  // Pieces sorted by their bytes; among equal strings the later id wins (as in HF's
  // string -> id map).
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return pieces[a] < pieces[b]; });
  // Breadth-first: node k covers order[lo, hi), all sharing their first `depth` bytes; its
  // edges are emitted when it is visited, so they are contiguous and nodes keep their order.
  struct Range {
    size_t lo, hi, depth;
  };
  std::deque<Range> queue{{0, order.size(), 0}};
  node_id_.push_back(-1);
  for (size_t node = 0; !queue.empty(); ++node) {
    auto [lo, hi, depth] = queue.front();
    queue.pop_front();
    first_.push_back(static_cast<uint32_t>(labels_.size()));
    while (lo < hi && pieces[order[lo]].size() == depth) {
      if (depth > 0) node_id_[node] = static_cast<int64_t>(order[lo]);
      ++lo;
    }
    while (lo < hi) {
      const auto byte = static_cast<unsigned char>(pieces[order[lo]][depth]);
      size_t end = lo + 1;
      while (end < hi && static_cast<unsigned char>(pieces[order[end]][depth]) == byte) ++end;
      labels_.push_back(byte);
      targets_.push_back(static_cast<uint32_t>(node_id_.size()));
      node_id_.push_back(-1);
      queue.push_back({lo, end, depth + 1});
      lo = end;
    }
  }
  first_.push_back(static_cast<uint32_t>(labels_.size()));
}

std::vector<UnigramModel::Token> UnigramModel::encode(std::string_view word) const {
  const auto child = [&](size_t node, unsigned char byte) -> int64_t {
    const auto b = labels_.begin() + first_[node], e = labels_.begin() + first_[node + 1];
    const auto it = std::lower_bound(b, e, byte);
    if (it == e || *it != byte) return -1;
    return static_cast<int64_t>(targets_[static_cast<size_t>(it - labels_.begin())]);
  };
  const auto lookup = [&](std::string_view s) -> int64_t {
    int64_t node = 0;
    for (const char c : s)
      if ((node = child(static_cast<size_t>(node), static_cast<unsigned char>(c))) < 0) return -1;
    return node_id_[static_cast<size_t>(node)];
  };

  struct Best {
    double score = 0.0;
    int64_t start = -1;
    int64_t id = 0;
  };
  const size_t n = word.size();
  std::vector<Best> best(n + 1);
  const auto offer = [&](size_t start, size_t end, int64_t id, double score) {
    Best& b = best[end];
    if (b.start < 0 || score > b.score) b = {score, static_cast<int64_t>(start), id};
  };
  for (size_t s = 0; s < n;) {
    const size_t char_len = std::min(utf8_length(static_cast<unsigned char>(word[s])), n - s);
    const double base = best[s].score;
    bool single = false;
    int64_t node = 0;
    for (size_t k = s; k < n; ++k) {
      node = child(static_cast<size_t>(node), static_cast<unsigned char>(word[k]));
      if (node < 0) break;
      const int64_t id = node_id_[static_cast<size_t>(node)];
      if (id < 0) continue;
      offer(s, k + 1, id, base + scores_[static_cast<size_t>(id)]);
      single = single || k + 1 - s == char_len;
    }
    if (!single) offer(s, s + char_len, unk_id_, base + unk_score_);
    s += char_len;
  }

  std::vector<Token> out;
  size_t fused_end = 0;  // end of the run of unknown pieces being fused (0: none)
  size_t fused_begin = 0;
  const auto flush = [&] {
    if (fused_end == 0) return;
    const int64_t id = lookup(word.substr(fused_begin, fused_end - fused_begin));
    out.push_back({id >= 0 ? id : unk_id_, fused_begin, fused_end});
    fused_end = 0;
  };
  for (size_t end = n; end > 0;) {
    const Best& b = best[end];
    const auto start = static_cast<size_t>(b.start);
    if (b.id == unk_id_) {
      if (fused_end == 0) fused_end = end;
      fused_begin = start;
    } else {
      flush();
      out.push_back({b.id, start, end});
    }
    end = start;
  }
  flush();
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace bert::tok
