#pragma once

#include <cstdint>
#include <vector>

namespace bert::tasks {

/// A stretch [begin, end) of a token sequence that fits one model input.
struct Window {
  int64_t begin = 0, end = 0;
};

/// Covers `length` tokens with windows of at most `capacity` tokens, consecutive windows
/// sharing `overlap` tokens (HF's `stride`; clamped to capacity - 1). One window (possibly
/// empty) when everything fits. Throws std::invalid_argument for capacity <= 0.
std::vector<Window> split_windows(int64_t length, int64_t capacity, int64_t overlap);

/// Google BERT's "max context" score of token `position` in `window`: min(left context,
/// right context) + 0.01 * window size. A token that appears in several windows is read from
/// the window where this is largest.
double context_score(const Window& window, int64_t position);

/// For each window, whether each of its tokens has its maximum context there (exactly one
/// window per token).
std::vector<std::vector<bool>> max_context_flags(const std::vector<Window>& windows);

}  // namespace bert::tasks
