// Encoder forward and tokenizer throughput at bert-base shape. Every model figure is also
// printed as a ratio to a GEMM of the same shape measured in the same run, so machine noise
// cancels. Usage: bench_encoder [--batch 8] [--seq 128] [--iters 3] [--json FILE]
#include <ATen/autocast_mode.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bert/common/threads.h"
#include "bert/model/bert_model.h"
#include "bert/tokenizer/wordpiece.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Best-of-`iters` wall time of `fn` after one warm-up call.
template <class Fn>
double best_time(int iters, Fn&& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t = Clock::now();
    fn();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

struct Autocast {
  explicit Autocast(bool on) : on_(on) {
    if (on_) {
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    }
  }
  ~Autocast() {
    if (on_) {
      at::autocast::clear_cache();
      at::autocast::set_cpu_enabled(false);
    }
  }
  bool on_;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 8, seq = 128;
  int iters = 3;
  std::string json_out;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seq")) seq = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json")) json_out = argv[i + 1];
  }
  const int threads = bert::configure_threads(0);
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  json results = {{"threads", threads}, {"batch", batch}, {"seq", seq}};

  bert::BertConfig config;  // bert-base-cased shape
  config.vocab_size(28996);
  const int64_t H = config.hidden_size(), I = config.intermediate_size(), L = config.num_hidden_layers();
  const int64_t tokens = batch * seq;
  // Forward FLOPs: 4 H×H projections + 2 H×I feed-forward matmuls per token and layer,
  // plus QK^T and PV (2 × 2·S·H per token and layer), plus the pooler.
  const double flops = static_cast<double>(L) *
                           (2.0 * tokens * (4.0 * H * H + 2.0 * H * I) + 4.0 * tokens * seq * H) +
                       2.0 * batch * H * H;

  fmt::print("bertft encoder benchmark | threads {} | batch {} × seq {} | bert-base shape\n\n", threads,
             batch, seq);
  fmt::print("{:<34} {:>10} {:>12} {:>10} {:>10}\n", "measure", "seconds", "seq/s", "TFLOP/s", "vs GEMM");

  bert::BertModel model(config);
  model->eval();
  const auto ids = torch::randint(1000, 28996, {batch, seq});
  const auto mask = torch::ones({batch, seq}, torch::kLong);
  for (const bool bf16 : {false, true}) {
    const std::string precision = bf16 ? "bf16 autocast" : "fp32";
    // The ceiling: the feed-forward GEMM of this shape through linear, as the model runs it.
    const auto x = torch::randn({tokens, H});
    const auto w = torch::randn({I, H});
    const double gemm_flops = 2.0 * tokens * H * I;
    double gemm_s;
    {
      Autocast autocast(bf16);
      gemm_s = best_time(iters + 2, [&] { torch::linear(x, w); });
    }
    const double gemm_tflops = gemm_flops / gemm_s / 1e12;
    double fwd_s;
    {
      Autocast autocast(bf16);
      fwd_s = best_time(iters, [&] { model->forward(ids, mask); });
    }
    const double fwd_tflops = flops / fwd_s / 1e12;
    fmt::print("{:<34} {:>10.4f} {:>12} {:>10.3f} {:>10}\n", "gemm " + precision + fmt::format(" {}x{}x{}", tokens, H, I),
               gemm_s, "", gemm_tflops, "1.00");
    fmt::print("{:<34} {:>10.4f} {:>12.2f} {:>10.3f} {:>10.2f}\n", "encoder forward " + precision, fwd_s,
               batch / fwd_s, fwd_tflops, fwd_tflops / gemm_tflops);
    results[bf16 ? "bf16" : "fp32"] = {{"gemm_tflops", gemm_tflops}, {"forward_seconds", fwd_s},
                                       {"sequences_per_second", batch / fwd_s},
                                       {"forward_tflops", fwd_tflops},
                                       {"ratio_to_gemm", fwd_tflops / gemm_tflops}};
  }

  // Tokenizer on real text: SQuAD dev contexts, when ../shared is there.
  const std::string shared = std::string(BERTFT_SOURCE_DIR) + "/../shared";
  const std::string squad = shared + "/data/squad/dev-v1.1.json";
  const std::string vocab = shared + "/data/bert-vocab/bert-base-cased-vocab.txt";
  if (std::ifstream(squad) && std::ifstream(vocab)) {
    std::ifstream in(squad);
    const auto data = json::parse(in);
    std::vector<std::pair<std::string, std::optional<std::string>>> texts;
    double bytes = 0;
    for (const auto& article : data["data"])
      for (const auto& paragraph : article["paragraphs"]) {
        texts.emplace_back(paragraph["context"].get<std::string>(), std::nullopt);
        bytes += static_cast<double>(texts.back().first.size());
      }
    bert::tok::WordPieceOptions options;
    options.normalizer.lowercase = false;
    options.normalizer.strip_accents = false;
    const auto tokenizer = bert::tok::WordPieceTokenizer::from_file(vocab, options);
    fmt::print("\n{:<34} {:>10} {:>12} {:>12}\n", "tokenizer (SQuAD dev contexts)", "seconds", "MB/s", "Mtokens/s");
    for (const int t : {1, threads}) {
      size_t n_tokens = 0;
      const double s = best_time(2, [&] {
        n_tokens = 0;
        for (const auto& e : tokenizer->encode_batch(texts, {}, t)) n_tokens += e.size();
      });
      fmt::print("{:<34} {:>10.3f} {:>12.2f} {:>12.3f}\n", fmt::format("{} thread(s), {:.1f} MB", t, bytes / 1e6), s,
                 bytes / s / 1e6, n_tokens / s / 1e6);
      results["tokenizer"][fmt::format("threads_{}", t)] = {{"mb_per_second", bytes / s / 1e6},
                                                             {"tokens_per_second", n_tokens / s}};
    }
  } else {
    fmt::print("\n(tokenizer benchmark skipped: {} not found)\n", squad);
  }
  if (!json_out.empty()) std::ofstream(json_out) << results.dump(2) << "\n";
  fmt::print("\n{}\n", results.dump());
  return 0;
}
