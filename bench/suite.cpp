// The bertft benchmark suite (issue 6): gemm, train_step, infer, seq_scaling, attention (inference
// attention head by head vs batched), tokenizer, load, sweep, data_parallel (1 process x 2 threads
// vs 2 processes x 1 thread, issue 13), vs_hf (Hugging Face transformers on the same workloads, run
// A B A B with bertft, issue 16), checkpointing (a
// bert-base 4x512 train step with and without activation checkpointing: peak RSS and time), int8
// (dynamic int8 inference speed against fp32 and bf16, and its accuracy cost on SST-2 dev).
// Every model figure is also given as a ratio to the GEMM ceiling of the same precision measured
// in the same run (MFU), so machine noise cancels, and train_step's and infer's rows with the most
// MFU their products at the gemm section's rates (and training's optimizer as timed) allow
// (`reach`). The suite runs on every CPU kind: bf16 rows are
// measured only where the CPU's bf16 GEMM is clearly faster than fp32 (training.precision: auto's
// probe decides), and say so otherwise.
// Usage: bench_suite [--only gemm,train_step,...] [--iters N] [--rounds N] [--json FILE].
// Not in the default set: `--only precision` (bf16 vs fp32 dev accuracy on SST-2: six small
// trainings, about 4 minutes); `--only profile [--profile-precision fp32|bf16]` breaks one train
// step down by operator (bf16 also where its GEMMs are slow: the work outside them is what
// carries over to a CPU where they are fast); `--only real_data [--real-limit N] [--real-tasks
// mrpc,stsb]` times MRPC and STS-B training against HF run_glue-style (bench/hf_glue_epoch.py);
// `--only similar` times `bertft similar` over 1 M vectors; `--only pretrain_step` times a
// bert-base MLM + NSP step with the last layer whole against [CLS] and the masked positions alone;
// `--only bf16_shadows` times a bf16 step with the weights' bf16 copies kept (plain and packed)
// against cast in every forward; `--only clip_norm` times clipping's norm against LibTorch's
// per-tensor norms;
// `--only retrieval [--retrieval-models DIR,...]` gives recall@1/@10 of SQuAD v1.1 dev
// questions -> their paragraphs by `embed` + `similar`.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/file_util.h"
#include "bert/common/threads.h"
#include "bert/model/dropout.h"
#include "bert/model/linear.h"
#include "bert/model/onednn_attention.h"
#include "bert/model/onednn_linear.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/wordpiece.h"
#include "recipes/runner/embed.h"
#include "recipes/runner/export.h"
#include "recipes/runner/new_model.h"
#include "recipes/runner/process.h"
#include "tasks/pretraining/adapter.h"
#include "tasks/registry.h"
#include "tasks/training/distributed.h"
#include "tasks/training/optimizer.h"
#include "tasks/training/precision.h"
#include "tasks/training/trainer.h"
#include "tests/support/dev_paths.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using bert::tasks::Batch;
using bert::tasks::Precision;
using bert::testing::hf_python_path;
using bert::testing::shared_dir;  // $BERTFT_SHARED on a GPU machine (scripts/device_kit.sh)

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Best wall time of `iters` calls of `fn` after one warm-up call.
template <class Fn>
double best_time(int iters, Fn&& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t = Clock::now();
    fn();
    best = std::min(best, since(t));
  }
  return best;
}

/// Peak resident set (VmHWM) since the last reset, in MiB.
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}
double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

bert::BertConfig base_config() {
  bert::BertConfig c;  // bert-base-cased shape
  c.vocab_size(28996);
  return c;
}

/// The FLOPs of the bert-base sentence classifier's forward, counting the work it does: every
/// layer's projections and attention over every token but the last layer's, which (a sentence
/// head reads the first position alone: ForwardOptions::first_token_only) computes the first
/// position's query, its query through the key weights, its mix of the positions through the
/// value weights (bert::BertSelfAttention: the keys and values of the other tokens are never
/// projected), output and feed-forward, and scores and mixes each head over every position; then
/// pooler and 2-label head per sequence. Embeddings do lookups, not FLOPs. (HF computes the last
/// layer whole: 9% more at 128 tokens.)
double attention_flops(const bert::BertConfig& c, double batch, double seq) {
  const double H = c.hidden_size(), L = c.num_hidden_layers(), heads = c.num_attention_heads();
  return 4.0 * H * seq * ((L - 1) * batch * seq + heads * batch);  // scores and mixes
}
double forward_flops(const bert::BertConfig& c, double batch, double seq) {
  const double H = c.hidden_size(), I = c.intermediate_size(), L = c.num_hidden_layers();
  const double tokens = batch * seq, layer = 4 * H * H + 2 * H * I;  // per row
  const double rows_x_params = (L - 1) * layer * tokens + layer * batch + (H * H + 2 * H) * batch;
  return 2 * rows_x_params + attention_flops(c, batch, seq);
}

/// bert-base's projections as the gemm section times them: the product [tokens, k] x [k, n]
/// under `name` in results["gemm"], its weight gradient (dy^T x: [n, tokens] x [tokens, k])
/// under `gradient` in results["gemm_weight_gradients"], and how many a layer has.
struct ProjectionShape {
  const char* name;
  const char* gradient;
  int64_t k, n, per_layer;
};
constexpr std::array<ProjectionShape, 3> kProjectionShapes = {{
    {"qkv/out 768x768", "qkv/out dW 768x1024x768", 768, 768, 4},
    {"ffn up 768x3072", "up dW 3072x1024x768", 768, 3072, 1},
    {"ffn down 3072x768", "down dW 768x1024x3072", 3072, 768, 1},
}};
/// The shape whose fastest product is the ceiling (the largest).
constexpr const ProjectionShape& kCeilingShape = kProjectionShapes[1];
/// results["gemm"]'s rates by ceiling_product's engine kind, and the weight gradients' two ways.
constexpr std::array<const char*, 5> kGemmColumns = {
    "fp32_tflops", "fp32_onednn_tflops", "bf16_tflops", "bf16_onednn_tflops", "bf16_packed_tflops"};
constexpr std::array<const char*, 2> kWeightGradientColumns = {"matmul_tflops",
                                                               "inner_product_tflops"};

Batch random_batch(int64_t batch, int64_t seq, int64_t vocab) {
  Batch b;
  b.input_ids = torch::randint(1000, vocab, {batch, seq});
  b.attention_mask = torch::ones({batch, seq}, torch::kLong);
  b.token_type_ids = torch::zeros({batch, seq}, torch::kLong);
  b.labels = torch::randint(0, 2, {batch});
  for (int64_t i = 0; i < batch; ++i) b.feature_indices.push_back(i), b.lengths.push_back(seq);
  return b;
}

/// This very binary for the suite's child processes: /proc/PID/exe runs the same file even when
/// a rebuild has replaced it on disk meanwhile (its path then reads "... (deleted)").
std::string self_executable() {
  return fmt::format("/proc/{}/exe", ::getpid());
}

/// Runs `command` through the shell (stdout to `tmp`/<name>.json, stderr to <name>.log): its
/// last JSON line, or null when it failed or printed none.
json run_for_json(const std::string& command, const fs::path& tmp, const std::string& name) {
  const auto out = tmp / (name + ".json");
  fs::remove(out);
  const int rc = std::system(
      fmt::format("{} > {} 2> {}", command, out.string(), (tmp / (name + ".log")).string())
          .c_str());
  if (rc != 0 || !fs::exists(out)) return json{};
  std::ifstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') last = line;
  return last.empty() ? json{} : json::parse(last);
}

/// The bert-base-cased WordPiece tokenizer (its vocab from ../shared).
std::unique_ptr<bert::tok::WordPieceTokenizer> cased_tokenizer(const fs::path& vocab) {
  bert::tok::WordPieceOptions options;
  options.normalizer.lowercase = false;
  options.normalizer.strip_accents = false;
  return bert::tok::WordPieceTokenizer::from_file(vocab, options);
}

/// A randomly initialised small BERT (2 layers, 2 heads, FFN 4 x hidden) over that vocabulary, in
/// HF layout: the model of the sweep and precision sections.
void write_small_model(const fs::path& vocab, const fs::path& dir, int64_t hidden) {
  const auto tok = cased_tokenizer(vocab);
  bert::BertConfig config;
  config.vocab_size(tok->vocab_size())
      .hidden_size(hidden)
      .num_hidden_layers(2)
      .num_attention_heads(2)
      .intermediate_size(4 * hidden)
      .max_position_embeddings(128);
  bert::recipes::write_random_model(dir, config, *tok, 0);
}

/// The binary classifier whose training steps the sections time.
std::unique_ptr<bert::tasks::TaskAdapter> classifier() {
  auto a = bert::tasks::TaskRegistry::global().create("sequence_classification",
                                                      bert::YamlReader(YAML::Load("{}"), "bench"));
  a->set_labels({"0", "1"});
  return a;
}

/// A bert-base classifier (seed 0) in training mode, its AdamW, and its parameters.
struct Training {
  bert::tasks::TaskModel model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::vector<torch::Tensor> params;
};
Training start_training(const bert::tasks::TaskAdapter& a) {
  torch::manual_seed(0);
  Training t;
  t.model = a.build_model(base_config());
  t.model->train();
  t.optimizer = bert::tasks::make_adamw(*t.model, {});
  for (const auto& p : t.model->parameters()) t.params.push_back(p);
  return t;
}

/// One training step as the Trainer takes it: the forward under `bf16`'s autocast, backward,
/// clipping at 1.0, AdamW, the gradients released. Returns the seconds of the forward, the
/// backward and the optimizer.
std::array<double, 3> timed_train_step(const bert::tasks::TaskAdapter& a,
                                       Training& t,
                                       const Batch& b,
                                       bool bf16) {
  const auto t0 = Clock::now();
  torch::Tensor loss;
  {
    const bert::tasks::AutocastScope autocast(bf16 ? Precision::kBf16 : Precision::kFp32,
                                              torch::kCPU);
    loss = a.loss(t.model->forward(b), b);
  }
  const auto t1 = Clock::now();
  loss.backward();
  const auto t2 = Clock::now();
  bert::tasks::clip_gradients(*t.optimizer, t.params, 1.0);
  t.optimizer->step();
  bert::tasks::release_gradients(t.params);
  const auto t3 = Clock::now();
  const auto d = [](Clock::time_point x, Clock::time_point y) {
    return std::chrono::duration<double>(y - x).count();
  };
  return {d(t0, t1), d(t1, t2), d(t2, t3)};
}

/// One worker of the data_parallel section (a child process): bert-base, this rank's part of an
/// 8 x 128 fp32 batch, gradients all-reduced in buckets (during backward with `overlap`, else
/// after it); rank 0 writes its best step's timings to `out`.
int data_parallel_worker(
    int rank, int world, int port, int iters, bool overlap, const fs::path& out) {
  bert::tasks::DistributedEnv env;
  env.rank = rank;
  env.world_size = world;
  env.master_port = port;
  bert::tasks::DataParallelOptions options;
  options.overlap = overlap;
  const auto group = bert::tasks::DataParallel::connect(env, torch::kCPU, options);
  const auto config = base_config();
  const auto a = classifier();
  auto [model, optimizer, params] = start_training(*a);
  group->broadcast_module(*model);
  const auto sync = group->sync_gradients(params);
  torch::manual_seed(static_cast<uint64_t>(rank));
  const auto b = random_batch(8 / world, 128, config.vocab_size());
  json best = {{"step_s", 1e30}};
  for (int i = 0; i <= iters; ++i) {
    const auto t0 = Clock::now();
    const auto loss = a->loss(model->forward(b), b) * (1.0 / world);
    loss.backward();
    const auto t1 = Clock::now();
    const double waited = sync->finish();
    bert::tasks::clip_gradients(*optimizer, params, 1.0);  // as the Trainer does
    optimizer->step();
    {
      torch::NoGradGuard no_grad;
      for (auto& p : params) p.mutable_grad().zero_();
    }
    const double step = since(t0);
    if (i > 0 && step < best["step_s"].get<double>())
      best = {{"step_s", step},
              {"forward_backward_s", std::chrono::duration<double>(t1 - t0).count()},
              {"allreduce_wait_s", waited}};
  }
  // The all-reduce alone (every bucket, nothing to hide it behind).
  double alone = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t = Clock::now();
    sync->finish();
    alone = std::min(alone, since(t));
  }
  best["allreduce_alone_s"] = alone;
  best["buckets"] = sync->buckets();
  int64_t bytes = 0;
  for (const auto& p : params) bytes += static_cast<int64_t>(p.nbytes());
  best["gradient_mib"] = static_cast<double>(bytes) / (1 << 20);
  if (rank == 0) std::ofstream(out) << best.dump() << "\n";
  return 0;
}

/// One bertft run of the real_data section (a child process, so its peak RSS is its own): the
/// first `limit` examples of `task`'s GLUE train.tsv, bert-base fp32, batch 8, max 128 tokens,
/// dynamic padding (with `grouped`, length-grouped batches), one warm-up step, then one timed pass
/// of forward, backward, clipping at 1.0, AdamW. Writes seconds, padded tokens and peak RSS.
int real_data_worker(const std::string& task, bool grouped, int limit, const fs::path& out) {
  const fs::path shared = shared_dir();
  const auto train = shared / "data" / "glue" / (task == "stsb" ? "STS-B" : "MRPC") / "train.tsv";
  const auto tok = cased_tokenizer(shared / "data" / "bert-vocab" / "bert-base-cased-vocab.txt");
  auto a = bert::tasks::TaskRegistry::global().create(
      "sequence_classification",
      bert::YamlReader(YAML::Load(task == "stsb" ? "{num_labels: 1}" : "{}"), "bench"));
  bert::data::DataSpec spec;
  spec.path = train;
  spec.format = bert::data::DataFormat::kGlue;
  spec.limit = limit;
  const auto examples = a->read(spec);
  a->fit_labels(*examples);
  const auto features = a->featurize(examples, *tok, /*training=*/true);
  auto [model, optimizer, params] = start_training(*a);
  const auto batches = bert::tasks::Trainer::epoch_batches(*features, 8, /*seed=*/42, grouped);
  const auto step = [&](const std::vector<int64_t>& indices) {
    const auto b = a->collate(*features, indices);
    a->loss(model->forward(b), b).backward();
    bert::tasks::clip_gradients(*optimizer, params, 1.0);  // as the Trainer does
    optimizer->step();
    bert::tasks::release_gradients(params);  // as the Trainer does
    return b.input_ids.numel();
  };
  step(batches.front());  // warm-up, as on the HF side
  int64_t tokens = 0;
  const auto t0 = Clock::now();
  for (const auto& indices : batches) tokens += step(indices);
  const double seconds = since(t0);
  std::ofstream(out) << json{{"seconds", seconds},
                             {"padded_tokens", tokens},
                             {"peak_rss_mib", peak_rss_mib()}}
                            .dump()
                     << "\n";
  return 0;
}

/// One side of the vs_hf section inside bench_suite (a child process, as HF's perf_bert.py
/// is one): perf_bert.py's workload done the bertft way. A bert-base classifier (seed 0),
/// `batch` x `seq` tokens with the second half of each row segment 1; "train" is forward +
/// backward + AdamW with HF's no-decay groups, dropout on; "infer" is an eval forward without
/// autograd. The median of `steps` steps after `warmup`, and the peak RSS, go to `out` as JSON.
int hf_twin_worker(const std::string& mode,
                   bool bf16,
                   int64_t batch,
                   int64_t seq,
                   int warmup,
                   int steps,
                   bool checkpoint,
                   const fs::path& out) {
  const auto config = base_config();
  const auto a = classifier();
  auto [model, optimizer, params] = start_training(*a);
  bert::set_activation_checkpointing(*model, checkpoint);
  auto b = random_batch(batch, seq, config.vocab_size());
  b.token_type_ids.slice(1, seq / 2).fill_(1);
  const Precision precision = bf16 ? Precision::kBf16 : Precision::kFp32;
  std::vector<double> times;
  if (mode == "train") {
    for (int i = 0; i < warmup + steps; ++i) {
      const auto t = Clock::now();
      bert::tasks::release_gradients(params);  // perf_bert.py: zero_grad(set_to_none=True)
      torch::Tensor loss;
      {
        const bert::tasks::AutocastScope autocast(precision, torch::kCPU);
        loss = a->loss(model->forward(b), b);
      }
      loss.backward();
      optimizer->step();
      if (i >= warmup) times.push_back(since(t));
    }
  } else {
    model->eval();
    const c10::InferenceMode inference;
    for (int i = 0; i < warmup + steps; ++i) {
      const auto t = Clock::now();
      const bert::tasks::AutocastScope autocast(precision, torch::kCPU);
      model->forward(b);
      if (i >= warmup) times.push_back(since(t));
    }
  }
  std::sort(times.begin(), times.end());
  const double median = times.size() % 2
                            ? times[times.size() / 2]
                            : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  std::ofstream(out) << json{{"median_s", median}, {"peak_rss_mib", peak_rss_mib()}}.dump() << "\n";
  return 0;
}

struct Suite {
  int iters = 2;
  int rounds = 2;
  int real_limit = 256;  ///< train examples per task in the real_data section (0: all, an epoch)
  std::vector<std::string> real_tasks = {"mrpc", "stsb"};  ///< the real_data section's tasks
  int threads = 1;
  json results = json::object();
  std::map<std::string, double> ceiling;  // "fp32" / "bf16" -> TFLOP/s
  std::map<bool, std::pair<torch::Tensor, torch::Tensor>> ceiling_operands;  // bf16 -> x, w
  bert::OneDnnPackedBf16Weight ceiling_packed;  ///< bf16's w packed, where that is the ceiling
  /// Whether this CPU runs bf16 GEMMs clearly faster than fp32 (the probe of precision: auto),
  /// and the probe's words; without it the bf16 rows are skipped (~100x slower on AVX2 only).
  bool bf16_fast = false;
  std::string bf16_reason;
  /// The profile section's precision: fp32 or bf16 whatever the CPU runs fastest, else that.
  std::optional<Precision> profile_precision;
  /// The profile section's workload: "train" (a step at 8x128) or "infer" (a forward at 32x128).
  std::string profile_workload = "train";

  /// The precisions the model sections measure: fp32, and bf16 where it is fast.
  std::vector<bool> precisions() const {
    return bf16_fast ? std::vector<bool>{false, true} : std::vector<bool>{false};
  }
  /// The precision a single-precision section uses: the one this CPU runs fastest.
  Precision fastest() const { return bf16_fast ? Precision::kBf16 : Precision::kFp32; }

  std::unique_ptr<bert::tasks::TaskAdapter> adapter() const { return classifier(); }

  /// The gemm section's engine that gave the bf16 ceiling (2 LibTorch's, 3 oneDNN's, 4 oneDNN's
  /// from a packed weight).
  int bf16_ceiling_kind = 2;

  /// x w^T through one of the gemm section's engines: 0 fp32 through LibTorch's (BLAS), 1 fp32
  /// through oneDNN, 2 bf16 through LibTorch's, 3 bf16 through oneDNN as bertft's bf16
  /// projections call it in training, 4 the same from `packed` (w packed) as in inference (the
  /// operands bf16 already: no cast is timed).
  static void ceiling_product(int kind,
                              const torch::Tensor& x,
                              const torch::Tensor& w,
                              const bert::OneDnnPackedBf16Weight& packed = {}) {
    if (kind == 1) {
      bert::onednn_linear(x, w, {});
    } else if (kind == 3) {
      bert::onednn_linear_bf16_cast(x, w, {}, /*gelu=*/false);
    } else if (kind == 4) {
      bert::onednn_linear_bf16_packed(x, packed, {}, /*gelu=*/false);
    } else {
      torch::linear(x, w);
    }
  }

  void gemm() {
    fmt::print(
        "\n== gemm: the ceiling (linear, tokens 1024, TF/s) ==\n{:<28} {:>10} {:>12} {:>13} "
        "{:>12} {:>12}\n",
        "shape", "fp32 BLAS", "fp32 oneDNN", "bf16 LibTorch", "bf16 oneDNN", "bf16 packed");
    const int64_t T = 1024;
    for (const auto& shape : kProjectionShapes) {
      const int64_t k = shape.k, n = shape.n;
      // fp32 BLAS, fp32 oneDNN, bf16 LibTorch, bf16 oneDNN, bf16 oneDNN from a packed weight
      double tf[5] = {0, 0, 0, 0, 0};
      for (const int kind : {0, 1, 2, 3, 4}) {
        if ((kind % 2 == 1 || kind == 4) && !bert::onednn_built()) continue;
        if (kind >= 2 && !bf16_fast) continue;
        // After a multithreaded call OpenBLAS's idle thread yields on the other core for ~0.1 s
        // (its thread timeout), which would halve oneDNN's speed here: let it fall asleep.
        if (kind > 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        // bf16 operands made once: the ceiling is the matmul itself (oneDNN / AMX), not casts.
        const auto dtype = kind >= 2 ? torch::kBFloat16 : torch::kFloat;
        const auto x = torch::randn({T, k}).to(dtype), w = torch::randn({n, k}).to(dtype);
        torch::NoGradGuard no_grad;
        // bf16 inference's kept weights where this CPU's kernels take them packed
        const auto packed = kind == 4 ? bert::onednn_pack_bf16_weight(w.to(torch::kFloat))
                                      : bert::OneDnnPackedBf16Weight();
        if (kind == 4 && !packed.defined()) continue;
        const double s = best_time(iters + 5, [&] { ceiling_product(kind, x, w, packed); });
        tf[kind] = 2.0 * T * k * n / s / 1e12;
        results["gemm"][shape.name][kGemmColumns[kind]] = tf[kind];
      }
      const auto column = [&](int kind) {
        if ((kind % 2 == 1 || kind == 4) && !bert::onednn_built()) return std::string("not built");
        if (kind >= 2 && !bf16_fast) return std::string("skipped");
        return kind == 4 && tf[4] == 0 ? std::string("plain") : fmt::format("{:.3f}", tf[kind]);
      };
      fmt::print("{:<28} {:>10.3f} {:>12} {:>13} {:>12} {:>12}\n", shape.name, tf[0], column(1),
                 column(2), column(3), column(4));
      // Each ceiling is the fastest engine's: fp32's (bert::Linear's is the rule's, fp32_gemm()),
      // and bf16's (LibTorch's own, or oneDNN's that bertft's bf16 projections call directly,
      // from a plain weight in training or a packed one in inference).
      if (&shape == &kCeilingShape) {
        ceiling = {{"fp32", std::max(tf[0], tf[1])}, {"bf16", std::max({tf[2], tf[3], tf[4]})}};
        bf16_ceiling_kind = tf[4] > std::max(tf[2], tf[3]) ? 4 : tf[3] > tf[2] ? 3 : 2;
      }
    }
    fmt::print("fp32 engine of this process: {}\n", bert::fp32_gemm().reason);
    results["fp32_gemm"] = bert::fp32_gemm().reason;
    if (!bf16_fast) fmt::print("(bf16 skipped everywhere: {})\n", bf16_reason);
    if (bert::onednn_built()) gemm_halves();
    if (bf16_fast && bert::onednn_bf16_available()) gemm_weight_gradients();
  }

  /// The fp32 FFN backward's GEMMs whose b is row-major with a side of 3072, as oneDNN computes
  /// them whole and in two halves (bert::ScopedGemmSplit; training takes the halves where oneDNN
  /// has AVX-512 kernels), alternated in this process: whether the rule pays on this CPU.
  void gemm_halves() {
    fmt::print(
        "\nfp32 FFN backward GEMMs, b row-major: whole vs two halves (TF/s; training takes the "
        "halves where oneDNN has AVX-512 kernels)\n{:<28} {:>10} {:>10} {:>8}\n",
        "shape", "whole", "halves", "ratio");
    const int64_t T = 1024, H = 768, I = 3072;
    for (const auto& [name, m, k, n, a_transposed] :
         std::vector<std::tuple<std::string, int64_t, int64_t, int64_t, bool>>{
             {"down dW 768x1024x3072", H, T, I, true},
             {"down dX 1024x768x3072", T, H, I, false},
             {"up dX 1024x3072x768", T, I, H, false}}) {
      // The weight gradient's a is the output gradient transposed (column-major).
      const auto a = a_transposed ? torch::randn({k, m}).t() : torch::randn({m, k});
      const auto b = torch::randn({k, n});
      torch::NoGradGuard no_grad;
      double best[2] = {1e30, 1e30};
      for (int round = 0; round < 3; ++round)
        for (const bool halves : {false, true}) {
          const bert::ScopedGemmSplit split(halves);
          best[halves] =
              std::min(best[halves], best_time(iters + 2, [&] { bert::onednn_matmul(a, b); }));
        }
      const double flops = 2.0 * static_cast<double>(m * k * n);
      fmt::print("{:<28} {:>10.3f} {:>10.3f} {:>7.2f}x\n", name, flops / best[0] / 1e12,
                 flops / best[1] / 1e12, best[0] / best[1]);
      results["gemm_halves"][name] = {{"whole_tflops", flops / best[0] / 1e12},
                                      {"halves_tflops", flops / best[1] / 1e12}};
    }
  }

  /// bf16 training's weight and bias gradients (dy^T x and dy's column sums, float32 results) as
  /// a matmul of the transposed dy (and a product of ones for the bias) and as oneDNN's
  /// inner-product backward (bert::ScopedInnerProductWeightGradients; training takes it),
  /// alternated in this process, each product's operands fresh from a set of twelve (a step's
  /// layers) so that they come cold as in a step.
  void gemm_weight_gradients() {
    fmt::print(
        "\nbf16 weight and bias gradients dy^T x: a matmul vs oneDNN's inner product (TF/s of the "
        "weight's; training takes the inner product)\n{:<28} {:>10} {:>10} {:>8}\n",
        "shape", "matmul", "inner", "ratio");
    const int64_t T = 1024, layers = 12;
    torch::NoGradGuard no_grad;
    for (const auto& shape : kProjectionShapes) {
      const int64_t out = shape.n, in = shape.k;
      std::vector<torch::Tensor> dy, x;
      for (int64_t l = 0; l < layers; ++l) {
        dy.push_back(torch::randn({T, out}).to(torch::kBFloat16));
        x.push_back(torch::randn({T, in}).to(torch::kBFloat16));
      }
      double seconds[2] = {0, 0};
      torch::Tensor bias;
      for (int round = 0; round < 2 * iters + 2; ++round)
        for (const bool inner : {false, true}) {
          const bert::ScopedInnerProductWeightGradients scoped(inner);
          const auto t = Clock::now();
          for (int64_t l = 0; l < layers; ++l)
            bert::onednn_bf16_weight_gradient(dy[l], x[l], &bias);
          if (round > 0) seconds[inner] += since(t);  // the first round makes the primitives
        }
      const double flops = 2.0 * static_cast<double>(out * T * in) * layers * (2 * iters + 1);
      fmt::print("{:<28} {:>10.3f} {:>10.3f} {:>7.2f}x\n", shape.gradient,
                 flops / seconds[0] / 1e12, flops / seconds[1] / 1e12, seconds[0] / seconds[1]);
      for (const bool inner : {false, true})
        results["gemm_weight_gradients"][shape.gradient][kWeightGradientColumns[inner]] =
            flops / seconds[inner] / 1e12;
    }
  }

  /// The gemm section's ceiling product (ffn up: 1024 tokens x 768 -> 3072, fp32 through
  /// bert::Linear's engine, bf16 through the faster engine of that section) repeated for about
  /// `seconds`, at most kAdjacentMaxSeconds, in TFLOP/s. Timed right after a workload of that
  /// length, best of as many blocks as the workload's best of steps, it is the ceiling of the same
  /// minutes over a like stretch of time: this VM's two vCPUs give one to two cores' worth of GEMM
  /// throughput from one stretch of seconds to the next (the same 1024x768x768 product, one
  /// process: 0.29 TF/s, then 0.148 for half a minute), and the gemm section's best of a few 20 ms
  /// products finds the fast stretches that a 3-second step averages over. The cap keeps a 17 s
  /// step (32x128 training on an AVX2 CPU) from adding 17 s of products: a shorter block finds
  /// fast stretches more easily, so the cap can only lower an adjacent MFU.
  double ceiling_over(bool bf16, double seconds) {
    constexpr double kAdjacentMaxSeconds = 4.0;
    seconds = std::min(seconds, kAdjacentMaxSeconds);
    torch::NoGradGuard no_grad;
    auto& [x, w] = ceiling_operands[bf16];
    if (!x.defined()) {
      const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
      x = torch::randn({1024, kCeilingShape.k}).to(dtype);
      w = torch::randn({kCeilingShape.n, kCeilingShape.k}).to(dtype);
      if (bf16 && bf16_ceiling_kind == 4)
        ceiling_packed = bert::onednn_pack_bf16_weight(w.to(torch::kFloat));
    }
    const auto once = [&] {
      if (bf16)
        ceiling_product(bf16_ceiling_kind, x, w, ceiling_packed);
      else
        bert::fast_linear(x, w, {});
    };
    once();
    const double flops = 2.0 * 1024 * static_cast<double>(kCeilingShape.k * kCeilingShape.n);
    const double known = ceiling[bf16 ? "bf16" : "fp32"];  // 0 where the gemm section did not run
    const double rate = known > 0 ? known : 0.1;
    const int64_t n = std::max<int64_t>(1, std::llround(seconds * rate * 1e12 / flops));
    const auto t = Clock::now();
    for (int64_t i = 0; i < n; ++i) once();
    return static_cast<double>(n) * flops / since(t) / 1e12;
  }

  /// A bert-base pre-training step (MLM + NSP, 8 x 128, 20 masked tokens a row as Google's
  /// max_predictions_per_seq at 128, fp32, forward + backward + AdamW), the last layer whole (a
  /// batch without last_layer_rows) against [CLS] and the masked positions alone (as collate
  /// selects them), alternated in this process.
  void pretrain_step() {
    fmt::print("\n== pretrain_step: bert-base MLM + NSP 8x128, 20 masked a row, fp32 ==\n");
    const auto config = base_config();
    const auto a = bert::tasks::TaskRegistry::global().create(
        "pretraining", bert::YamlReader(YAML::Load("{}"), "bench"));
    torch::manual_seed(0);
    auto model = a->build_model(config);
    model->train();
    auto optimizer = bert::tasks::make_adamw(*model, {});
    std::vector<torch::Tensor> params;
    for (const auto& p : model->parameters()) params.push_back(p);
    Batch whole = random_batch(8, 128, config.vocab_size());
    std::vector<int64_t> positions;
    for (int64_t r = 0; r < 8; ++r) {
      const auto chosen = std::get<0>((torch::randperm(127) + 1).narrow(0, 0, 20).sort());
      for (int64_t k = 0; k < 20; ++k)
        positions.insert(positions.end(), {r, chosen[k].item<int64_t>()});
    }
    whole.masked_positions = torch::tensor(positions, torch::kLong).view({-1, 2});
    whole.labels =
        torch::cat({torch::randint(1000, config.vocab_size(), {160}), torch::randint(0, 2, {8})});
    Batch rows = whole;
    bert::tasks::select_last_layer_rows(rows);
    const auto step = [&](const Batch& b) {
      const auto t = Clock::now();
      a->loss(model->forward(b), b).backward();
      bert::tasks::clip_gradients(*optimizer, params, 1.0);
      optimizer->step();
      bert::tasks::release_gradients(params);
      return since(t);
    };
    step(whole);  // warm-up
    double best_whole = 1e30, best_rows = 1e30;
    for (int i = 0; i < std::max(3, iters); ++i) {
      best_whole = std::min(best_whole, step(whole));
      best_rows = std::min(best_rows, step(rows));
    }
    fmt::print("whole last layer {:.3f} s, [CLS] + masked rows ({} a row) {:.3f} s: {:.3f}x\n",
               best_whole, rows.last_layer_rows.size(1), best_rows, best_whole / best_rows);
    results["pretrain_step"] = {{"whole_last_layer_s", best_whole},
                                {"chosen_rows_s", best_rows},
                                {"speedup", best_whole / best_rows}};
  }

  /// The most of the gemm section's ceiling a bert-base workload (batch x seq, a training step or
  /// a forward) could reach on this CPU if nothing but its products and, in training, the
  /// optimizer (`optimizer_s`, as timed) took time: each projection's products at the gemm
  /// section's fastest rate for its shape, in training the input gradient's at the forward's and
  /// bf16 weight gradients at the faster of the section's two ways (fp32's, not measured there, at
  /// the forward's), the attention's products at the ceiling. An upper bound on what work outside
  /// the products can still buy here; 0 where the gemm section did not measure the precision.
  /// Above 1.0 where a shape runs faster than the ceiling's. The pooler's product (a row a
  /// sequence) is counted with the attention's.
  double reach(bool bf16, double batch, double seq, bool training, double optimizer_s) const {
    const std::string precision = bf16 ? "bf16" : "fp32";
    const auto known = ceiling.find(precision);
    if (known == ceiling.end() || known->second <= 0 || !results.contains("gemm")) return 0;
    // The fastest of the columns [first, last) in a row of results.
    const auto best_of = [](const json& row, const char* const* first, const char* const* last) {
      double best = 0;
      for (; first != last; ++first)
        if (row.contains(*first)) best = std::max(best, row[*first].get<double>());
      return best;
    };
    const auto config = base_config();
    const double H = config.hidden_size();
    // The rows forward_flops counts: every token in all layers but the last, each first one there.
    const double rows = (config.num_hidden_layers() - 1) * batch * seq + batch;
    const double pooler = 2 * (H * H + 2 * H) * batch;
    double seconds = ((training ? 3 : 1) * (attention_flops(config, batch, seq) + pooler)) /
                     (known->second * 1e12);
    for (const auto& shape : kProjectionShapes) {
      const double flops = 2.0 * static_cast<double>(shape.per_layer * shape.k * shape.n) * rows;
      const json& row = results["gemm"].value(shape.name, json::object());
      const double forward = bf16 ? best_of(row, kGemmColumns.begin() + 2, kGemmColumns.end())
                                  : best_of(row, kGemmColumns.begin(), kGemmColumns.begin() + 2);
      if (forward <= 0) return 0;
      double weights = 0;
      if (bf16 && results.contains("gemm_weight_gradients"))
        weights = best_of(results["gemm_weight_gradients"].value(shape.gradient, json::object()),
                          kWeightGradientColumns.begin(), kWeightGradientColumns.end());
      if (weights <= 0) weights = forward;
      seconds += flops / (forward * 1e12);
      if (training) seconds += flops / (forward * 1e12) + flops / (weights * 1e12);
    }
    if (training) seconds += optimizer_s;
    const double all = (training ? 3 : 1) * forward_flops(config, batch, seq);
    return all / (known->second * 1e12) / seconds;
  }

  void train_step() {
    fmt::print(
        "\n== train_step: bert-base seq classification, forward + backward + AdamW (clip 1.0) "
        "==\n");
    fmt::print("{:<16} {:>8} {:>8} {:>8} {:>8} {:>10} {:>9} {:>7} {:>9} {:>7} {:>9}\n", "shape",
               "fwd s", "bwd s", "opt s", "step s", "tokens/s", "TFLOP/s", "MFU", "MFU adj",
               "reach", "peak MiB");
    const auto config = base_config();
    const auto a = adapter();
    for (const int64_t batch : {8, 32})
      for (const bool bf16 : precisions()) {
        auto training = start_training(*a);
        const auto b = random_batch(batch, 128, config.vocab_size());
        reset_peak_rss();
        double fwd = 1e30, bwd = 1e30, opt = 1e30, step = 1e30, adjacent = 0;
        for (int i = 0; i <= iters; ++i) {
          const auto [f, w, o] = timed_train_step(*a, training, b, bf16);
          if (i == 0) continue;  // warm-up
          fwd = std::min(fwd, f);
          bwd = std::min(bwd, w);
          opt = std::min(opt, o);
          step = std::min(step, f + w + o);
          adjacent = std::max(adjacent, ceiling_over(bf16, f + w + o));
        }
        const double tokens = static_cast<double>(batch * 128);
        const double flops = 3 * forward_flops(config, static_cast<double>(batch), 128);
        const double tflops = flops / step / 1e12;
        const std::string precision = bf16 ? "bf16" : "fp32";
        const std::string name = fmt::format("{}x128 {}", batch, precision);
        const double mfu = tflops / ceiling[precision];
        const double most = reach(bf16, static_cast<double>(batch), 128, /*training=*/true, opt);
        fmt::print(
            "{:<16} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>10.0f} {:>9.3f} {:>7.2f} {:>9.2f} "
            "{:>7.2f} {:>9.0f}\n",
            name, fwd, bwd, opt, step, tokens / step, tflops, mfu, tflops / adjacent, most,
            peak_rss_mib());
        results["train_step"][name] = {{"forward_s", fwd},
                                       {"backward_s", bwd},
                                       {"optimizer_s", opt},
                                       {"step_s", step},
                                       {"tokens_per_s", tokens / step},
                                       {"tflops", tflops},
                                       {"mfu", mfu},
                                       {"adjacent_ceiling_tflops", adjacent},
                                       {"mfu_adjacent", tflops / adjacent},
                                       {"reach", most},
                                       {"peak_rss_mib", peak_rss_mib()}};
      }
    fmt::print(
        "MFU: of the gemm section's ceiling; MFU adj: of the ceiling product run for as long as a "
        "step (at most 4 s) right after each one (best of as many); reach: the most MFU the step "
        "could have if only its products (at the gemm section's rates for their shapes) and the "
        "optimizer (opt s) took time\n");
  }

  /// Data-parallel training on this machine's cores: bert-base 8 x 128 fp32 steps (forward,
  /// backward, AdamW) in 1 process x 2 threads against 2 processes x 1 thread (4 x 128 each,
  /// Gloo over loopback), the buckets all-reduced during backward (overlap) or after it, one
  /// after the other; tokens/s, the ratios, and the all-reduce's share of a step (time
  /// waited for it after backward, and its cost with nothing to hide behind).
  void data_parallel(const fs::path& tmp) {
    fmt::print(
        "\n== data_parallel: bert-base 8x128 fp32 train step, 1 process x 2 threads vs 2 "
        "processes x 1 thread ==\n");
    const auto config = base_config();
    const auto a = adapter();
    const double tokens = 8 * 128;
    double single = 1e30;
    json dual[2];  // two processes' step: all-reduce after backward, overlapped
    const auto executable = self_executable();
    {  // one process, both threads; each run the best of `iters` steps, one round (three took
       // ~285 s of the 15 minutes)
      bert::configure_threads(2);
      auto [model, optimizer, params] = start_training(*a);
      const auto b = random_batch(8, 128, config.vocab_size());
      for (int i = 0; i <= iters; ++i) {
        const auto t0 = Clock::now();
        a->loss(model->forward(b), b).backward();
        bert::tasks::clip_gradients(*optimizer, params, 1.0);  // as the Trainer does
        optimizer->step();
        bert::tasks::release_gradients(params);  // as the Trainer does
        if (i > 0) single = std::min(single, since(t0));
      }
      bert::configure_threads(threads);
    }
    for (int overlap = 0; overlap < 2; ++overlap) {  // two processes
      const auto out = tmp / "data_parallel.json";
      const int port = bert::recipes::free_local_port();
      std::vector<pid_t> workers;
      for (int rank = 0; rank < 2; ++rank) {
        bert::recipes::SpawnOptions options;
        options.log_file = tmp / fmt::format("data_parallel_{}.log", rank);
        workers.push_back(bert::recipes::spawn(
            {executable, "--data-parallel-worker", std::to_string(rank), "--port",
             std::to_string(port), "--overlap", std::to_string(overlap), "--iters",
             std::to_string(iters), "--json", out.string()},
            options));
      }
      bool ok = true;
      for (const auto pid : workers) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      if (!ok) {
        fmt::print("worker failed:\n{}\n", bert::read_file(tmp / "data_parallel_0.log"));
        return;
      }
      dual[overlap] = json::parse(bert::read_file(out));
    }
    fmt::print("{:<44} {:>8} {:>9} {:>7} {:>8} {:>8}\n", "", "step s", "tokens/s", "ratio",
               "waited", "share");
    fmt::print("{:<44} {:>8.3f} {:>9.0f} {:>7} {:>8} {:>8}\n", "1 process x 2 threads (8x128)",
               single, tokens / single, "1.00", "-", "-");
    for (int overlap = 0; overlap < 2; ++overlap) {
      const auto& d = dual[overlap];
      const double step = d["step_s"], wait = d["allreduce_wait_s"];
      fmt::print("{:<44} {:>8.3f} {:>9.0f} {:>7.2f} {:>8.3f} {:>7.0f}%\n",
                 overlap ? "2 processes x 1 thread, all-reduce overlapped"
                         : "2 processes x 1 thread, all-reduce after bwd",
                 step, tokens / step, single / step, wait, 100 * wait / step);
      results["data_parallel"][overlap ? "overlapped" : "after_backward"] = {
          {"step_s", step},
          {"tokens_per_s", tokens / step},
          {"ratio", single / step},
          {"allreduce_wait_s", wait},
          {"allreduce_share", wait / step},
          {"allreduce_alone_s", d["allreduce_alone_s"]}};
    }
    fmt::print(
        "goal: 2 processes >= 0.9x of 1; the all-reduce of {:.0f} MiB ({} buckets) costs {:.3f} "
        "s alone; 'waited' is what backward did not hide\n",
        dual[1]["gradient_mib"].get<double>(), dual[1]["buckets"].get<int>(),
        dual[1]["allreduce_alone_s"].get<double>());
    results["data_parallel"]["single"] = {{"step_s", single}, {"tokens_per_s", tokens / single}};
    results["data_parallel"]["gradient_mib"] = dual[1]["gradient_mib"];
  }

  /// Gradient clipping's norm over a bert-base model's gradients (random, float32): clip_gradients
  /// (one pass, fixed pieces, double beyond short runs) against clip_grad_norm_'s arithmetic
  /// (LibTorch's norm of each gradient, then the norm of those), alternated in this process, with
  /// each one's relative error against the norm computed in double. Not in the default set (a few
  /// seconds).
  void clip_norm() {
    fmt::print("\n== clip_norm: the gradients' total 2-norm, bert-base (ms, best of {}) ==\n",
               4 * iters);
    auto training = start_training(*adapter());
    torch::NoGradGuard no_grad;
    for (auto& p : training.params) p.mutable_grad() = torch::randn_like(p) * 1e-3;
    double ours = 1e30, libtorch = 1e30, ours_norm = 0, libtorch_norm = 0;
    for (int round = 0; round < 4 * iters; ++round) {
      ours = std::min(ours, best_time(1, [&] {
                        ours_norm =
                            bert::tasks::clip_gradients(*training.optimizer, training.params, 1e30);
                      }));
      libtorch = std::min(libtorch, best_time(1, [&] {
                            std::vector<torch::Tensor> norms;
                            for (const auto& p : training.params) norms.push_back(p.grad().norm(2));
                            libtorch_norm = torch::stack(norms).norm(2).item<double>();
                          }));
    }
    double squares = 0;  // the exact norm, in double
    for (const auto& p : training.params)
      squares += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
    const double exact = std::sqrt(squares);
    const auto error = [&](double norm) { return std::abs(norm - exact) / exact; };
    fmt::print(
        "clip_gradients {:.1f} ms, LibTorch's norms {:.1f} ms: {:.2f}x; relative error against "
        "the norm in double {:.1e} and {:.1e}\n",
        ours * 1e3, libtorch * 1e3, libtorch / ours, error(ours_norm), error(libtorch_norm));
    results["clip_norm"] = {{"clip_gradients_ms", ours * 1e3},
                            {"libtorch_norms_ms", libtorch * 1e3},
                            {"clip_gradients_error", error(ours_norm)},
                            {"libtorch_error", error(libtorch_norm)}};
  }

  /// bf16 training's weight copies kept between steps (bert::bf16_shadow) against casting every
  /// weight in every forward, and the copies kept plain against packed for the CPU's kernels (the
  /// default where they read a packed b): a bert-base 8x128 bf16 step's forward, backward and
  /// optimizer (clipping + AdamW) times each way, alternated in this process (the copies dropped
  /// and made again, untimed, at each change), and what casting the encoder's 72 weights costs
  /// alone (what a forward saves; the optimizer pays for writing the copies). Run wherever oneDNN
  /// has bf16 products, fast or not: the parts that do not depend on the GEMMs transfer. Not in
  /// the default set (about 2 minutes on 2 cores).
  void bf16_shadows() {
    fmt::print(
        "\n== bf16_shadows: bert-base 8x128 bf16 train step, weight copies cast, kept plain, "
        "kept packed ==\n");
    if (!bert::onednn_bf16_available()) {
      fmt::print("(skipped: this CPU's oneDNN has no bf16 products)\n");
      return;
    }
    const auto config = base_config();
    const auto a = adapter();
    auto training = start_training(*a);
    const auto b = random_batch(8, 128, config.vocab_size());
    enum Mode { kCast, kPlain, kPacked };
    bool packed = false;  // whether the packed mode's copies were packed (the CPU's kernels')
    std::array<std::array<std::vector<double>, 3>, 3> parts;  // [mode][fwd, bwd, opt]
    std::vector<torch::Tensor> projections;
    for (const auto& p : training.model->named_parameters())
      if (p.key().find("encoder.") != std::string::npos && p.value().dim() == 2)
        projections.push_back(p.value());
    const auto step = [&](int mode, bool timed) {
      const bert::ScopedBf16Shadows shadows(mode != kCast);
      const bert::ScopedBf16ShadowPacking packing(mode == kPacked);
      const auto took = timed_train_step(*a, training, b, /*bf16=*/true);
      if (timed)
        for (size_t k = 0; k < 3; ++k) parts[mode][k].push_back(took[k]);
      if (mode == kPacked) packed = bert::bf16_shadow::find_current(projections[0]).packed();
    };
    const auto switch_to = [&](int mode) {  // copies of the mode's kind, made untimed
      for (const auto& w : projections) bert::bf16_shadow::drop(w);
      step(mode, false);
    };
    const int rounds = std::max(iters, 6);
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 3; ++i) {
        const int mode = (r + i) % 3;
        switch_to(mode);
        step(mode, true);
        step(mode, true);
      }
    const auto& weights = projections;
    std::vector<double> casts;
    {
      const torch::NoGradGuard no_grad;
      for (int r = 0; r < 15; ++r) {
        const auto t = Clock::now();
        for (const auto& w : weights) w.to(torch::kBFloat16);
        casts.push_back(since(t));
      }
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    fmt::print("{:<32} {:>9} {:>9} {:>9} {:>9}\n",
               "median of " + std::to_string(2 * rounds) + " steps", "fwd s", "bwd s", "opt s",
               "step s");
    const char* names[] = {
        "cast every forward", "copies kept, plain",
        packed ? "copies kept, packed (default)" : "kept, packed (= plain here)"};
    const char* keys[] = {"cast", "kept", "packed"};
    for (const int mode : {kCast, kPlain, kPacked}) {
      const auto& p = parts[mode];
      std::vector<double> total(p[0].size());
      for (size_t i = 0; i < total.size(); ++i) total[i] = p[0][i] + p[1][i] + p[2][i];
      fmt::print("{:<32} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f}\n", names[mode], median(p[0]),
                 median(p[1]), median(p[2]), median(total));
      results["bf16_shadows"][keys[mode]] = {{"forward_s", median(p[0])},
                                             {"backward_s", median(p[1])},
                                             {"optimizer_s", median(p[2])},
                                             {"step_s", median(total)}};
    }
    results["bf16_shadows"]["packed_for_this_cpu"] = packed;
    fmt::print("casting the {} encoder weights alone: {:.4f} s (median of 15)\n", weights.size(),
               median(casts));
    results["bf16_shadows"]["cast_weights_s"] = median(casts);
  }

  /// Where one train step (8 x 128, the fastest precision or --profile-precision's; the Trainer's
  /// step: forward, backward, clipping, AdamW) spends its time, by operator self time
  /// (LibTorch's own profiler; children's time is subtracted from their parent's). Not in the
  /// default set. The profiler inflates memory-bound operators several-fold: use the shares to find
  /// candidates and the unprofiled best step time (printed first) to judge a change.
  void profile() {
    const Precision precision = profile_precision.value_or(fastest());
    const auto config = base_config();
    const auto a = adapter();
    auto training = start_training(*a);
    const bool infer = profile_workload == "infer";
    const auto b = random_batch(infer ? 32 : 8, 128, config.vocab_size());
    // The Trainer's step, clipping included; or vs_hf's inference, an eval forward without
    // autograd.
    if (infer) training.model->eval();
    const auto step = [&] {
      if (!infer) {
        timed_train_step(*a, training, b, precision == Precision::kBf16);
        return;
      }
      const c10::InferenceMode inference;
      const bert::tasks::AutocastScope autocast(precision, torch::kCPU);
      training.model->forward(b);
    };
    step();  // warm-up: oneDNN builds its kernels on first use
    double best = 1e30;
    long faults = 0;
    for (int i = 0; i < iters + 1; ++i) {
      const long before = minor_faults();
      const auto t0 = Clock::now();
      step();
      best = std::min(best, since(t0));
      faults = minor_faults() - before;
    }
    fmt::print("\n== profile: {} {}, bert-base {}x128: best {:.3f} s, {} page faults a step ==\n",
               bert::enum_name(precision), infer ? "inference" : "train step", b.input_ids.size(0),
               best, faults);
    results["profile_step"] = {{"workload", infer ? "infer 32x128" : "train 8x128"},
                               {"step_s", best},
                               {"page_faults", faults}};
    namespace prof = torch::autograd::profiler;
    const auto t = Clock::now();
    prof::enableProfilerLegacy(
        torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU,
                                              /*report_input_shapes=*/true));
    step();
    const auto lists = prof::disableProfilerLegacy();
    const double wall = since(t);
    // Push/pop pairs nest on each thread: an operator's self time is its time less its children's.
    std::map<std::string, std::pair<double, int>> self, by_shape;  // name -> (microseconds, calls)
    for (const auto& events : lists) {
      std::vector<std::pair<const prof::LegacyEvent*, double>> open;  // push event, children's time
      for (const auto& e : events) {
        if (e.kind() == prof::EventKind::PushRange) {
          open.emplace_back(&e, 0.0);
        } else if (e.kind() == prof::EventKind::PopRange && !open.empty()) {
          const auto [push, children] = open.back();
          open.pop_back();
          const double total = push->cpuElapsedUs(e);
          std::string shapes;
          for (const auto& s : push->shapes()) shapes += fmt::format("[{}]", fmt::join(s, ","));
          for (auto* m : {&self, &by_shape}) {
            auto& entry =
                (*m)[m == &self ? push->name() : fmt::format("{} {}", push->name(), shapes)];
            entry.first += total - children;
            entry.second += 1;
          }
          if (!open.empty()) open.back().second += total;
        }
      }
    }
    const auto by_time = [](const std::map<std::string, std::pair<double, int>>& m) {
      std::vector<std::pair<std::string, std::pair<double, int>>> rows(m.begin(), m.end());
      std::sort(rows.begin(), rows.end(),
                [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
      if (rows.size() > 25) rows.resize(25);
      return rows;
    };
    fmt::print("one step with the profiler on: {:.3f} s\n{:<44} {:>9} {:>7} {:>7}\n", wall,
               "operator", "self ms", "share", "calls");
    for (const auto& [name, s] : by_time(self)) {
      fmt::print("{:<44} {:>9.1f} {:>6.1f}% {:>7}\n", name.substr(0, 44), s.first / 1e3,
                 100 * s.first / 1e6 / wall, s.second);
      results["profile"][name] = {{"self_ms", s.first / 1e3}, {"calls", s.second}};
    }
    fmt::print("\nthe same by input shapes:\n");
    for (const auto& [name, s] : by_time(by_shape))
      fmt::print("{:>9.1f} ms {:>5} calls  {}\n", s.first / 1e3, s.second, name.substr(0, 110));
  }

  void infer() {
    fmt::print(
        "\n== infer: bert-base seq classification, eval, no_grad ==\n{:<18} {:>9} {:>10} {:>9} "
        "{:>7} {:>8} {:>7}\n",
        "shape", "seconds", "seq/s", "TFLOP/s", "MFU", "MFU adj", "reach");
    const auto config = base_config();
    const auto a = adapter();
    torch::manual_seed(0);
    auto model = a->build_model(config);
    model->eval();
    torch::NoGradGuard no_grad;
    for (const int64_t seq : {128, 384})
      for (const bool bf16 : precisions()) {
        if (seq == 384 && !bf16) continue;  // fp32 at 384 would take minutes; bf16 is the fast path
        for (const int64_t batch : {1, 8, 32}) {
          const auto b = random_batch(batch, seq, config.vocab_size());
          const bert::tasks::AutocastScope autocast(bf16 ? Precision::kBf16 : Precision::kFp32,
                                                    torch::kCPU);
          model->forward(b);  // warm-up
          double s = 1e30, adjacent = 0;
          for (int i = 0; i < (batch * seq >= 32 * 384 ? 1 : iters); ++i) {
            const auto t = Clock::now();
            model->forward(b);
            s = std::min(s, since(t));
            adjacent = std::max(adjacent, ceiling_over(bf16, since(t)));
          }
          const std::string precision = bf16 ? "bf16" : "fp32";
          const std::string name = fmt::format("{}x{} {}", batch, seq, precision);
          const double tflops =
              forward_flops(config, static_cast<double>(batch), static_cast<double>(seq)) / s /
              1e12;
          const double most = reach(bf16, static_cast<double>(batch), static_cast<double>(seq),
                                    /*training=*/false, 0);
          fmt::print("{:<18} {:>9.4f} {:>10.2f} {:>9.3f} {:>7.2f} {:>8.2f} {:>7.2f}\n", name, s,
                     batch / s, tflops, tflops / ceiling[precision], tflops / adjacent, most);
          results["infer"][name] = {{"seconds", s},
                                    {"sequences_per_s", batch / s},
                                    {"tflops", tflops},
                                    {"mfu", tflops / ceiling[precision]},
                                    {"adjacent_ceiling_tflops", adjacent},
                                    {"mfu_adjacent", tflops / adjacent},
                                    {"reach", most}};
          if (batch == 1) results["infer"][name]["latency_ms"] = s * 1e3;
        }
      }
    fmt::print(
        "reach: the most MFU the forward could have if only its products (at the gemm section's "
        "rates for their shapes) took time\n");
  }

  void seq_scaling() {
    fmt::print(
        "\n== seq_scaling: {} forward, 4096 tokens per batch ==\n{:<10} {:>9} {:>11} {:>9} "
        "{:>15}\n",
        bf16_fast ? "bf16" : "fp32", "shape", "seconds", "tokens/s", "TFLOP/s", "attention share");
    const auto config = base_config();
    const auto a = adapter();
    auto model = a->build_model(config);
    model->eval();
    torch::NoGradGuard no_grad;
    for (const int64_t seq : {64, 128, 256, 512}) {
      const int64_t batch = 4096 / seq;
      const auto b = random_batch(batch, seq, config.vocab_size());
      const bert::tasks::AutocastScope autocast(fastest(), torch::kCPU);
      const double s = best_time(1, [&] { model->forward(b); });
      const double flops =
          forward_flops(config, static_cast<double>(batch), static_cast<double>(seq));
      const double attention =
          attention_flops(config, static_cast<double>(batch), static_cast<double>(seq));
      fmt::print("{:<10} {:>9.3f} {:>11.0f} {:>9.3f} {:>14.1f}%\n",
                 fmt::format("{}x{}", batch, seq), s, 4096 / s, flops / s / 1e12,
                 100 * attention / flops);
      results["seq_scaling"][std::to_string(seq)] = {{"seconds", s},
                                                     {"tokens_per_s", 4096 / s},
                                                     {"tflops", flops / s / 1e12},
                                                     {"attention_flop_share", attention / flops}};
    }
  }

  /// Inference attention of one bert-base layer (12 heads of 64), fp32: the batched products
  /// (all heads' scores written out, the scale and mask in the first GEMM's output pass, LibTorch's
  /// softmax, the context written in place: the training path, and inference's before) against
  /// onednn_attention (head by head, each thread's scores in its cache), alternated in this
  /// process, with and without padding. Needs oneDNN as the fp32 engine.
  void attention() {
    if (!bert::use_onednn_matmul(torch::zeros({1, 1, 128, 64}), torch::zeros({1, 1, 64, 1024}))) {
      fmt::print("\n(attention skipped: fp32 GEMMs are not oneDNN's here)\n");
      return;
    }
    fmt::print(
        "\n== attention: one bert-base layer's inference attention, fp32 (ms, best of {}) ==\n"
        "{:<8} {:<8} {:>9} {:>9} {:>7} {:>10}\n",
        5 * iters, "shape", "padding", "batched", "by head", "ratio", "max diff");
    torch::NoGradGuard no_grad;
    const int64_t heads = 12, dim = 64, hidden = heads * dim;
    for (const auto& [batch, seq] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 128}, {32, 128}, {8, 384}, {8, 512}}) {
      const auto heads_of = [&](const torch::Tensor& x) {
        return x.view({batch, seq, heads, dim}).transpose(1, 2);  // the projections' views
      };
      const auto q = heads_of(torch::randn({batch, seq, hidden}));
      const auto k = heads_of(torch::randn({batch, seq, hidden}));
      const auto v = heads_of(torch::randn({batch, seq, hidden}));
      for (const bool padded : {false, true}) {
        // Padding: the last quarter of every other sequence masked, as HF's mask holds it.
        auto mask = torch::zeros({batch, 1, 1, seq});
        if (padded)
          mask.narrow(0, 0, (batch + 1) / 2)
              .narrow(-1, seq - seq / 4, seq / 4)
              .fill_(std::numeric_limits<float>::lowest());
        const auto batched = [&] {
          return bert::onednn_attention_batched(q, k, v, mask, 0.125, 0.0);
        };
        const auto by_head = [&] { return bert::onednn_attention(q, k, v, mask, 0.125); };
        const double diff = (batched() - by_head()).abs().max().item<double>();
        double t_batched = 1e30, t_by_head = 1e30;
        for (int round = 0; round < 5 * iters; ++round) {
          t_batched = std::min(t_batched, best_time(1, batched));
          t_by_head = std::min(t_by_head, best_time(1, by_head));
        }
        const auto shape = fmt::format("{}x{}", batch, seq);
        fmt::print("{:<8} {:<8} {:>9.2f} {:>9.2f} {:>6.2f}x {:>10.1e}\n", shape,
                   padded ? "yes" : "no", t_batched * 1e3, t_by_head * 1e3, t_batched / t_by_head,
                   diff);
        results["attention"][shape + (padded ? " padded" : "")] = {
            {"batched_ms", t_batched * 1e3}, {"by_head_ms", t_by_head * 1e3}, {"max_diff", diff}};
      }
    }
    const double fp32_ms = attention_training(torch::kFloat);
    // bf16 (autocast's projections give bf16 q, k, v): where bf16 is fast, or at least not far
    // slower than fp32 (both paths are bf16; a CPU without bf16 instructions would take minutes).
    if (!bert::onednn_bf16_available()) {
      fmt::print("\n(bf16 training attention skipped: this CPU's oneDNN has no bf16 products)\n");
      return;
    }
    const double bf16_ms = bf16_fast ? 0.0 : attention_training_ms(torch::kBFloat16, 8, 128);
    if (bf16_fast || bf16_ms < 4 * fp32_ms)
      attention_training(torch::kBFloat16);
    else
      fmt::print("\n(bf16 training attention skipped: one 8x128 call {:.0f} ms, fp32 {:.0f} ms)\n",
                 bf16_ms, fp32_ms);
  }

  /// One head-by-head training attention call (forward + backward) of `type` at batch x seq, ms.
  double attention_training_ms(torch::ScalarType type, int64_t batch, int64_t seq) {
    const torch::AutoGradMode grad(true);
    const auto leaf = [&] { return torch::randn({batch, seq, 768}).to(type).requires_grad_(true); };
    const auto q = leaf(), k = leaf(), v = leaf();
    const auto heads = [&](const torch::Tensor& x) {
      return x.view({batch, seq, 12, 64}).transpose(1, 2);
    };
    return 1e3 * best_time(1, [&] {
             bert::onednn_attention_training(heads(q), heads(k), heads(v), {}, 0.125, 0.1)
                 .sum()
                 .backward();
           });
  }

  /// The same layer's training attention, forward + backward with attention dropout 0.1: the
  /// batched ops (the differentiable batched products, LibTorch's softmax, hash_dropout over the
  /// whole probabilities: the path with BERTFT_ATTENTION=batched) against
  /// onednn_attention_training (head by head, the probabilities recomputed in backward), alternated
  /// in this process, padded as above; the max diff is the gradient of q's. In float32, or with
  /// bf16 q, k and v as autocast's projections give them (the batched ops then round the scores
  /// and probabilities to bf16; by head they stay float32). Returns the by-head 8x128 time, ms.
  double attention_training(torch::ScalarType type) {
    const bool bf16 = type == torch::kBFloat16;
    fmt::print(
        "\n== attention: the same in training, {}, forward + backward, dropout 0.1 (ms, best of "
        "{}) ==\n{:<8} {:<8} {:>9} {:>9} {:>7} {:>10}\n",
        bf16 ? "bf16" : "fp32", 3 * iters, "shape", "padding", "batched", "by head", "ratio",
        "max diff");
    const torch::AutoGradMode grad(true);  // (attention() runs without)
    const int64_t heads = 12, dim = 64, hidden = heads * dim;
    double by_head_8x128 = 0;
    for (const auto& [batch, seq] :
         std::vector<std::pair<int64_t, int64_t>>{{8, 48}, {8, 128}, {32, 128}, {8, 384}}) {
      const auto leaf = [&] {
        return torch::randn({batch, seq, hidden}).to(type).requires_grad_(true);
      };
      const auto q_rows = leaf(), k_rows = leaf(), v_rows = leaf();
      const auto upstream = torch::randn({batch, seq, hidden}).to(type);
      const auto heads_of = [&](const torch::Tensor& x) {
        return x.view({batch, seq, heads, dim}).transpose(1, 2);
      };
      auto mask = torch::zeros({batch, 1, 1, seq});
      mask.narrow(0, 0, (batch + 1) / 2)
          .narrow(-1, seq - seq / 4, seq / 4)
          .fill_(std::numeric_limits<float>::lowest());
      const auto step = [&](bool by_head) {
        for (const auto* t : {&q_rows, &k_rows, &v_rows}) t->mutable_grad() = torch::Tensor();
        const auto q = heads_of(q_rows), k = heads_of(k_rows), v = heads_of(v_rows);
        torch::manual_seed(3);  // the same dropout keys for both
        const torch::Tensor out = by_head
                                      ? bert::onednn_attention_training(q, k, v, mask, 0.125, 0.1)
                                      : bert::onednn_attention_batched(q, k, v, mask, 0.125, 0.1);
        out.backward(upstream);
        return q_rows.grad().clone();
      };
      const double diff = (step(false) - step(true)).abs().max().item<double>();
      double t_batched = 1e30, t_by_head = 1e30;
      for (int round = 0; round < 3 * iters; ++round) {
        t_batched = std::min(t_batched, best_time(1, [&] { step(false); }));
        t_by_head = std::min(t_by_head, best_time(1, [&] { step(true); }));
      }
      const auto shape = fmt::format("{}x{}", batch, seq);
      fmt::print("{:<8} {:<8} {:>9.2f} {:>9.2f} {:>6.2f}x {:>10.1e}\n", shape, "yes",
                 t_batched * 1e3, t_by_head * 1e3, t_batched / t_by_head, diff);
      results[bf16 ? "attention_training_bf16" : "attention_training"][shape] = {
          {"batched_ms", t_batched * 1e3}, {"by_head_ms", t_by_head * 1e3}, {"max_diff", diff}};
      if (batch == 8 && seq == 128) by_head_8x128 = t_by_head * 1e3;
    }
    return by_head_8x128;
  }

  /// `bertft similar`'s search (cosine_top_k) over 1 M bert-base-sized vectors (3 GiB, unit rows
  /// as `embed --normalize` writes them): queries per second for one query at a time and for
  /// batches of 64, with the fraction of the GEMM ceiling the batched matmul reaches. Not in the
  /// default set.
  void similar() {
    const int64_t rows = 1000000, width = 768;
    fmt::print("\n== similar: exact cosine top-10 over {} x {} fp32 unit vectors ==\n", rows,
               width);
    torch::Tensor index;
    {
      c10::InferenceMode guard;
      index = torch::randn({rows, width});
      index.div_(index.norm(2, 1, true));
    }
    for (const int64_t batch : {1, 64}) {
      const auto queries = torch::randn({batch, width});
      const double s = best_time(
          iters + 1, [&] { bert::recipes::cosine_top_k(index, queries, 10, /*unit_index=*/true); });
      const double tflops = 2.0 * batch * rows * width / s / 1e12;
      fmt::print("{:>3} quer{} per call: {:.3f} s, {:.0f} queries/s, {:.3f} TFLOP/s{}\n", batch,
                 batch == 1 ? "y" : "ies", s, batch / s, tflops,
                 ceiling.count("fp32")
                     ? fmt::format(" ({:.2f} of the GEMM ceiling)", tflops / ceiling["fp32"])
                     : "");
      results["similar"][std::to_string(batch)] = {{"seconds", s}, {"queries_per_s", batch / s}};
    }
  }

  /// Question -> paragraph retrieval on SQuAD v1.1 dev (issue 17), the way `bertft embed` +
  /// `bertft similar` do it: every distinct paragraph embedded (unit vectors), every question
  /// searched by exact cosine top-10; recall@k = the share of questions whose own paragraph is
  /// among the first k. Each model of --retrieval-models (comma-separated directories; default
  /// the one trained BERT in ../shared, tiny-bert-camphr-ner), with mean and [CLS] pooling.
  /// Not in the default set.
  void retrieval(const fs::path& shared, const std::string& models) {
    const auto squad = shared / "data" / "squad" / "dev-v1.1.json";
    fmt::print("\n== retrieval: SQuAD v1.1 dev, question -> its paragraph, exact cosine ==\n");
    if (!fs::exists(squad)) {
      fmt::print("skipped: {} not found\n", squad.string());
      return;
    }
    const auto j = json::parse(bert::read_file(squad));
    std::vector<std::string> paragraphs, questions;
    std::vector<int64_t> owner;  // the paragraph of each question
    for (const auto& article : j.at("data"))
      for (const auto& p : article.at("paragraphs")) {
        paragraphs.push_back(p.at("context").get<std::string>());
        for (const auto& qa : p.at("qas")) {
          questions.push_back(qa.at("question").get<std::string>());
          owner.push_back(static_cast<int64_t>(paragraphs.size()) - 1);
        }
      }
    const auto truth = torch::tensor(owner, torch::kLong).unsqueeze(1);  // [questions, 1]
    fmt::print("{} paragraphs, {} questions; chance recall@10 {:.4f}\n", paragraphs.size(),
               questions.size(), 10.0 / static_cast<double>(paragraphs.size()));
    results["retrieval"]["paragraphs"] = paragraphs.size();
    results["retrieval"]["questions"] = questions.size();
    std::stringstream list(models.empty() ? (shared / "data" / "tiny-bert-camphr-ner").string()
                                          : models);
    for (std::string dir; std::getline(list, dir, ',');) {
      if (!fs::exists(dir)) {
        fmt::print("{}: not found, skipped\n", dir);
        continue;
      }
      const bert::recipes::SentenceEncoder encoder(dir);
      for (const auto pooling : {bert::recipes::Pooling::kMean, bert::recipes::Pooling::kCls}) {
        bert::recipes::EmbedOptions o;
        o.pooling = pooling;
        o.normalize = true;
        o.max_seq_length = 512;  // cut to the model's positions
        const auto t = Clock::now();
        const auto index = encoder.encode(paragraphs, o);
        const auto queries = encoder.encode(questions, o);
        const auto rows =
            bert::recipes::cosine_top_k(index, queries, 10, /*unit_index=*/true).second;
        const auto hit = rows.eq(truth);  // [questions, 10]
        const double r1 = hit.select(1, 0).to(torch::kDouble).mean().item<double>();
        const double r10 = hit.any(1).to(torch::kDouble).mean().item<double>();
        const std::string name = fs::path(dir).filename().string() + " " +
                                 (pooling == bert::recipes::Pooling::kMean ? "mean" : "cls");
        fmt::print("{:<40} recall@1 {:.4f}  recall@10 {:.4f}  ({:.0f} s to embed and search)\n",
                   name, r1, r10, since(t));
        results["retrieval"]["models"][name] = {
            {"recall_at_1", r1}, {"recall_at_10", r10}, {"seconds", since(t)}};
      }
    }
  }

  void tokenizer(const fs::path& shared) {
    const auto squad = shared / "data" / "squad" / "dev-v1.1.json";
    const auto vocab = shared / "data" / "bert-vocab" / "bert-base-cased-vocab.txt";
    if (!fs::exists(squad) || !fs::exists(vocab)) {
      fmt::print("\n(tokenizer skipped: {} not found)\n", squad.string());
      return;
    }
    const auto data = json::parse(bert::read_file(squad));
    std::vector<std::pair<std::string, std::optional<std::string>>> texts;
    double bytes = 0;
    for (const auto& article : data["data"])
      for (const auto& paragraph : article["paragraphs"]) {
        texts.emplace_back(paragraph["context"].get<std::string>(), std::nullopt);
        bytes += static_cast<double>(texts.back().first.size());
      }
    const auto tok = cased_tokenizer(vocab);
    fmt::print(
        "\n== tokenizer: SQuAD v1.1 dev contexts ({:.1f} MB), bert-base-cased vocab ==\n{:<12} "
        "{:>9} {:>8} {:>11}\n",
        bytes / 1e6, "threads", "seconds", "MB/s", "Mtokens/s");
    for (const int t : {1, threads}) {
      size_t n = 0;
      const double s = best_time(iters, [&] {
        n = 0;
        for (const auto& e : tok->encode_batch(texts, {}, t)) n += e.size();
      });
      fmt::print("{:<12} {:>9.3f} {:>8.1f} {:>11.2f}\n", t, s, bytes / s / 1e6,
                 static_cast<double>(n) / s / 1e6);
      results["tokenizer"][fmt::format("threads_{}", t)] = {{"mb_per_s", bytes / s / 1e6},
                                                            {"tokens_per_s", n / s}};
    }
  }

  void load(const fs::path& tmp) {
    fmt::print("\n== load: bert-base BertForPreTraining model.safetensors ==\n");
    const auto config = base_config();
    {
      torch::manual_seed(0);
      bert::BertForPreTraining model(config);
      auto tensors = bert::state_dict(*model);
      bert::save_weights(tmp / "load", tensors);
    }
    const auto file = tmp / "load" / "model.safetensors";
    bert::BertForPreTraining target(config);
    reset_peak_rss();
    const double before = peak_rss_mib();
    const auto t = Clock::now();
    const auto weights = bert::read_weights(file);
    const double read_s = since(t);
    bert::LoadOptions options;
    options.tied_aliases = bert::BertForPreTrainingImpl::tied_aliases();
    bert::load_state_dict(*target, weights, file.string(), options);
    const double total_s = since(t);
    const double mib = static_cast<double>(fs::file_size(file)) / (1 << 20);
    fmt::print(
        "{:.0f} MiB file: read {:.3f} s, read + load_state_dict {:.3f} s ({:.0f} MiB/s); peak RSS "
        "+{:.0f} MiB "
        "over the model\n",
        mib, read_s, total_s, mib / total_s, peak_rss_mib() - before);
    results["load"] = {{"file_mib", mib},
                       {"read_s", read_s},
                       {"total_s", total_s},
                       {"peak_rss_extra_mib", peak_rss_mib() - before}};
  }

  void sweep(const fs::path& shared, const fs::path& tmp, const fs::path& bertft) {
    const auto mrpc = shared / "data" / "glue" / "MRPC";
    const auto vocab = shared / "data" / "bert-vocab" / "bert-base-cased-vocab.txt";
    if (!fs::exists(mrpc / "train.tsv") || !fs::exists(bertft)) {
      fmt::print("\n(sweep skipped: MRPC or the bertft binary missing)\n");
      return;
    }
    write_small_model(vocab, tmp / "sweep_model", 64);
    const auto recipe = tmp / "sweep.yaml";
    std::ofstream(recipe)
        << "model: {pretrained: " << (tmp / "sweep_model").string() << "}\n"
        << "task: {type: sequence_classification, max_seq_length: 128}\n"
        << "data: {train: " << (mrpc / "train.tsv").string()
        << ", dev: " << (mrpc / "dev.tsv").string() << "}\n"
        << "training: {epochs: 1, batch_size: 32, learning_rate: 1.0e-3, log_every: 1000}\n"
        << "sweep: {seeds: [1, 2]}\n";  // two trials: one each for 2 jobs (4 took 100 s on AVX2)
    fmt::print(
        "\n== sweep: MRPC (3668 train / 408 dev), tiny BERT, 2 trials of 1 epoch ==\n{:<34} "
        "{:>9}\n",
        "setting", "seconds");
    for (const auto& [name, flags] : std::vector<std::pair<std::string, std::string>>{
             {"1 job, no feature cache", "--jobs 1 --no-cache"},
             {"1 job, feature cache", "--jobs 1"},
             {"2 jobs, feature cache", "--jobs 2"}}) {
      const auto out = tmp / ("sweep_" + std::to_string(results["sweep"].size()));
      const auto command =
          fmt::format("{} --threads {} sweep {} --set output.dir={} {} > {} 2>&1", bertft.string(),
                      threads, recipe.string(), out.string(), flags, (tmp / "sweep.log").string());
      const auto t = Clock::now();
      const int rc = std::system(command.c_str());
      const double s = since(t);
      fmt::print("{:<34} {:>9.1f}{}\n", name, s,
                 rc == 0 ? "" : "  (failed: see " + (tmp / "sweep.log").string() + ")");
      results["sweep"][name] = s;
    }
  }

  /// bertft against Hugging Face transformers on the same workloads, same threads: HF's own
  /// perf_bert.py (../shared/tools/hf-reference; needs its setup.sh run into build/hf-reference,
  /// or BERTFT_HF_PYTHON) with OpenMP's default wait policy and with PASSIVE, and bertft's twin
  /// (hf_twin_worker), each a fresh process, interleaved A B C A B C for `rounds` rounds; the
  /// best median (of 2 steps: their mean) of each, and bertft's speed-up over the better HF and its
  /// peak RSS against HF's. The warm-up is perf_bert.py's own: 1 inference step, 2 training
  /// steps, as a training process's second step still first-touches memory (AdamW's state, made
  /// in the first step, then holds what the activations had): at 8x128 fp32 66 000 page faults
  /// in bertft's, 288 000 in HF's, whose second step took 4.3-4.6 s against 3.2-3.6 s later.
  void vs_hf(const fs::path& shared, const fs::path& tmp) {
    const auto script = shared / "tools" / "hf-reference" / "perf_bert.py";
    // perf_bert.py through a shim that lets it run on transformers after 4.31 too (bench/).
    const auto compat = fs::path(BERTFT_SOURCE_DIR) / "bench" / "hf_perf_compat.py";
    const fs::path python = hf_python_path();
    if (!fs::exists(script) || !fs::exists(python)) {
      fmt::print(
          "\n(vs_hf skipped: run ../shared/tools/hf-reference/setup.sh build/hf-reference, or set "
          "BERTFT_HF_PYTHON)\n");
      return;
    }
    fmt::print(
        "\n== vs_hf: HF transformers (perf_bert.py) vs bertft, bert-base, {} threads, "
        "interleaved, {} rounds, best mean of 2 steps after perf_bert.py's warm-up ==\n{:<20} "
        "{:>10} {:>10} {:>10} {:>8} {:>10} {:>10}\n",
        threads, rounds, "workload", "HF s", "HF pass s", "bertft s", "speedup", "HF MiB",
        "bertft MiB");
    const auto executable = self_executable();
    const auto run = [&](const std::string& command) {
      return run_for_json(command, tmp, "vs_hf");
    };
    for (const auto& [mode, batch] :
         std::vector<std::pair<std::string, int>>{{"train", 8}, {"infer", 32}})
      for (const bool bf16 : precisions()) {
        const std::string precision = bf16 ? "bf16" : "fp32";
        const int warmup = mode == "train" ? 2 : 1;
        const std::string hf_args =
            fmt::format("{} {} {} {} {} --batch {} --seq 128 --warmup {} --steps 2 --threads {}",
                        python.string(), compat.string(), script.string(), mode, precision, batch,
                        warmup, threads);
        const std::string twin = fmt::format(
            "{} --hf-twin {} --bf16 {} --batch {} --seq 128 --warmup {} --steps 2 "
            "--threads {} --json /dev/stdout",
            executable, mode, bf16 ? 1 : 0, batch, warmup, threads);
        // best median and its peak RSS, for HF default, HF passive, bertft
        std::array<std::pair<double, double>, 3> best;
        best.fill({1e30, 0});
        double adjacent = 0;  // the ceiling product run for as long as bertft's step, right after
        bool failed = false;
        for (int round = 0; round < rounds && !failed; ++round) {
          const std::array<json, 3> r = {run("env -u OMP_WAIT_POLICY " + hf_args),
                                         run("env OMP_WAIT_POLICY=PASSIVE " + hf_args), run(twin)};
          for (size_t k = 0; k < 3; ++k) {
            if (!r[k].contains("median_s")) {
              failed = true;
              break;
            }
            const double median = r[k]["median_s"];
            if (median < best[k].first) best[k] = {median, r[k]["peak_rss_mib"].get<double>()};
          }
          if (!failed) adjacent = std::max(adjacent, ceiling_over(bf16, r[2]["median_s"]));
        }
        const std::string name = fmt::format("{} {}x128 {}", mode, batch, precision);
        if (failed) {
          fmt::print("{:<20} failed: {}\n", name, bert::read_file(tmp / "vs_hf.log"));
          continue;
        }
        const auto better = std::min(best[0], best[1]);
        const double speedup = better.first / best[2].first;
        fmt::print("{:<20} {:>10.3f} {:>10.3f} {:>10.3f} {:>7.2f}x {:>10.0f} {:>10.0f}\n", name,
                   best[0].first, best[1].first, best[2].first, speedup, better.second,
                   best[2].second);
        results["vs_hf"][name] = {
            {"hf_default_s", best[0].first},    {"hf_passive_s", best[1].first},
            {"bertft_s", best[2].first},        {"speedup_vs_better_hf", speedup},
            {"hf_peak_rss_mib", better.second}, {"bertft_peak_rss_mib", best[2].second}};
        if (ceiling.count(precision) && ceiling[precision] > 0) {
          const double flops = (mode == "train" ? 3 : 1) *
                               forward_flops(base_config(), batch, 128) / best[2].first / 1e12;
          results["vs_hf"][name]["bertft_mfu"] = flops / ceiling[precision];
          results["vs_hf"][name]["bertft_mfu_adjacent"] = flops / adjacent;
          fmt::print(
              "{:<20} bertft at {:.2f} of the {} GEMM ceiling measured above, {:.2f} of the "
              "ceiling product run for as long right after its runs\n",
              "", flops / ceiling[precision], precision, flops / adjacent);
        }
      }
    if (!bf16_fast) fmt::print("(bf16 not compared: {})\n", bf16_reason);
  }

  /// Real data, end to end (issue 16): training steps over the first `real_limit` examples of
  /// MRPC and STS-B train (GLUE pairs; RTE is not in ../shared/data) at bert-base shape, batch 8,
  /// max 128 tokens. HF transformers 4.31 (bench/hf_glue_epoch.py) with run_glue's defaults (every
  /// sequence padded to 128) and with dynamic padding; bertft (real_data_worker) with its dynamic
  /// padding, and with dynamic padding plus group_by_length. Every run is a fresh process (peak
  /// RSS its own); one warm-up step each, then the timed pass: the time per example is an
  /// epoch's. Not in the default set (about 12 minutes at 256 examples).
  void real_data(const fs::path& shared, const fs::path& tmp) {
    const auto script = fs::path(BERTFT_SOURCE_DIR) / "bench" / "hf_glue_epoch.py";
    const auto vocab = shared / "data" / "bert-vocab" / "bert-base-cased-vocab.txt";
    const fs::path python = hf_python_path();
    fmt::print(
        "\n== real_data: one pass over {} train examples, bert-base fp32, batch 8, max "
        "128 tokens, {} threads ==\n{:<8} {:<26} {:>9} {:>10} {:>9} {:>9}\n",
        real_limit > 0 ? fmt::format("the first {}", real_limit) : std::string("all (an epoch of)"),
        threads, "task", "run", "seconds", "tokens", "vs HF128", "peak MiB");
    for (const auto& [task, dir] :
         std::vector<std::pair<std::string, std::string>>{{"mrpc", "MRPC"}, {"stsb", "STS-B"}}) {
      if (std::find(real_tasks.begin(), real_tasks.end(), task) == real_tasks.end()) continue;
      const auto train = shared / "data" / "glue" / dir / "train.tsv";
      if (!fs::exists(train) || !fs::exists(vocab)) {
        fmt::print("{:<8} skipped: {} not found\n", task, train.string());
        continue;
      }
      json& out = results["real_data"][task];
      double hf_padded = 0;
      // Each run a fresh process (bertft's too), so its peak RSS is its own.
      const auto measure = [&](const std::string& run, const std::string& command) {
        const auto r = run_for_json(command, tmp, "real_data");
        if (!r.contains("seconds")) {
          fmt::print("{:<8} {:<26} failed: {}\n", task, run,
                     bert::read_file(tmp / "real_data.log"));
          return;
        }
        const double seconds = r["seconds"];
        if (run == "HF run_glue (pad 128)") hf_padded = seconds;
        const std::string ratio = hf_padded > 0 ? fmt::format("{:.2f}x", hf_padded / seconds) : "";
        fmt::print("{:<8} {:<26} {:>9.1f} {:>10} {:>9} {:>9.0f}\n", task, run, seconds,
                   r["padded_tokens"].get<int64_t>(), ratio, r["peak_rss_mib"].get<double>());
        out[run] = {{"seconds", seconds},
                    {"padded_tokens", r["padded_tokens"]},
                    {"peak_rss_mib", r["peak_rss_mib"]}};
      };
      if (fs::exists(python) && fs::exists(script)) {
        for (const auto& [run, padding] : std::vector<std::pair<std::string, std::string>>{
                 {"HF run_glue (pad 128)", "max_length"}, {"HF dynamic padding", "longest"}})
          measure(run, fmt::format("env OMP_WAIT_POLICY=PASSIVE {} {} --data {} --task {} --vocab "
                                   "{} --limit {} --padding {} --threads {}",
                                   python.string(), script.string(), train.string(), task,
                                   vocab.string(), real_limit, padding, threads));
      } else {
        fmt::print("{:<8} HF rows skipped: set up build/hf-reference (or BERTFT_HF_PYTHON)\n",
                   task);
      }
      const auto executable = self_executable();
      for (const bool grouped : {false, true})
        measure(grouped ? "bertft dynamic + grouped" : "bertft dynamic padding",
                fmt::format("{} --real-data-worker {} --grouped {} --real-limit {} --threads {} "
                            "--json /dev/stdout",
                            executable, task, grouped ? 1 : 0, real_limit, threads));
    }
  }

  /// The numerics check that goes with the bf16 speed: a real small task (GLUE SST-2, 67 349 train
  /// / 872 dev sentences) fine-tuned in fp32 and in bf16, three seeds each, through `bertft sweep`;
  /// the dev accuracies' means must agree within seed noise. The model is a small BERT from random
  /// initialisation (no pretrained checkpoint can be had here), one epoch.
  void precision(const fs::path& shared, const fs::path& tmp, const fs::path& bertft) {
    const auto sst2 = shared / "data" / "glue" / "SST-2";
    const auto vocab = shared / "data" / "bert-vocab" / "bert-base-cased-vocab.txt";
    if (!fs::exists(sst2 / "train.tsv") || !fs::exists(bertft)) {
      fmt::print("\n(precision skipped: SST-2 or the bertft binary missing)\n");
      return;
    }
    if (!bf16_fast) {
      fmt::print("\n(precision skipped: no fast bf16 here, {})\n", bf16_reason);
      return;
    }
    write_small_model(vocab, tmp / "precision_model", 128);
    const auto recipe = tmp / "precision.yaml";
    std::ofstream(recipe)
        << "model: {pretrained: " << (tmp / "precision_model").string() << "}\n"
        << "task: {type: sequence_classification, max_seq_length: 64}\n"
        << "data: {train: {path: " << (sst2 / "train.tsv").string()
        << ", format: glue, glue_task: sst2}, "
        << "dev: {path: " << (sst2 / "dev.tsv").string() << ", format: glue, glue_task: sst2}}\n"
        << "training: {epochs: 1, batch_size: 32, learning_rate: 1.0e-3, warmup_ratio: 0.1, "
        << "weight_decay: 0.01, group_by_length: true, log_every: 100000}\n"
        << "sweep: {grid: {precision: [fp32, bf16]}, seeds: [1, 2, 3]}\n"
        << "output: {export: false}\n";
    const auto out = tmp / "precision_run";
    const auto log = tmp / "precision.log";
    fmt::print(
        "\n== precision: SST-2 dev accuracy, small BERT (hidden 128, 2 layers) from random init, 1 "
        "epoch, "
        "seeds 1-3 ==\n");
    const auto t = Clock::now();
    const int rc = std::system(
        fmt::format("{} --threads {} sweep {} --set output.dir={} --jobs {} > {} 2>&1",
                    bertft.string(), threads, recipe.string(), out.string(), threads, log.string())
            .c_str());
    const double seconds = since(t);
    if (rc != 0 || !fs::exists(out / "leaderboard.json")) {
      fmt::print("(failed:\n{})\n", bert::read_file(log));
      return;
    }
    const auto board = json::parse(bert::read_file(out / "leaderboard.json"));
    if (!board.value("complete", false) || board.value("done", 0) != 6) {
      fmt::print("(trials failed:\n{})\n", bert::read_file(out / "leaderboard.md"));
      return;
    }
    std::map<std::string, std::pair<double, double>> by;  // precision -> (mean, std)
    for (const auto& setting : board["settings"])
      by[setting["hyperparameters"].dump().find("bf16") != std::string::npos ? "bf16" : "fp32"] = {
          setting["mean"].get<double>(), setting["std"].get<double>()};
    // Seed noise of the difference of two means of 3: sqrt(s1^2/3 + s2^2/3).
    const double noise = std::sqrt(
        (by["fp32"].second * by["fp32"].second + by["bf16"].second * by["bf16"].second) / 3);
    const double diff = by["bf16"].first - by["fp32"].first;
    for (const auto& [name, ms] : by)
      fmt::print("{:<6} accuracy {:.4f} ± {:.4f}\n", name, ms.first, ms.second);
    fmt::print("bf16 - fp32 = {:+.4f}, {:.1f} standard errors ({}); 6 trials in {:.0f} s\n", diff,
               noise > 0 ? std::abs(diff) / noise : 0.0,
               std::abs(diff) <= 2 * noise ? "within seed noise" : "NOT within seed noise",
               seconds);
    results["precision"] = {{"fp32_mean", by["fp32"].first},
                            {"fp32_std", by["fp32"].second},
                            {"bf16_mean", by["bf16"].first},
                            {"bf16_std", by["bf16"].second},
                            {"difference", diff},
                            {"standard_error", noise},
                            {"seconds", seconds}};
  }

  /// Activation checkpointing (training.activation_checkpointing): a bert-base train step at
  /// 4x512 with and without, each a fresh process (peak RSS is per process), A then B; the step
  /// time after a warm-up and the peak RSS of each, and their ratios. One round: a second took
  /// 60 s of the 15 minutes on an AVX2 CPU, and peak RSS, the point, does not move between rounds.
  void checkpointing(const fs::path& tmp) {
    const auto executable = self_executable();
    const std::string precision = bf16_fast ? "bf16" : "fp32";
    fmt::print(
        "\n== checkpointing: bert-base train step 4x512 {}, fresh processes ==\n{:<26} "
        "{:>9} {:>11}\n",
        precision, "run", "step s", "peak MiB");
    std::array<std::pair<double, double>, 2> run;  // (step s, peak MiB): plain, checkpointed
    for (int checkpoint = 0; checkpoint < 2; ++checkpoint) {
      const auto r = run_for_json(
          fmt::format("{} --hf-twin train --bf16 {} --batch 4 --seq 512 --warmup 1 --steps 1 "
                      "--threads {} --checkpoint {} --json /dev/stdout",
                      executable, bf16_fast ? 1 : 0, threads, checkpoint),
          tmp, "checkpointing");
      if (!r.contains("median_s")) {
        fmt::print("(failed: {})\n", bert::read_file(tmp / "checkpointing.log"));
        return;
      }
      run[checkpoint] = {r["median_s"].get<double>(), r["peak_rss_mib"].get<double>()};
    }
    const char* names[] = {"every activation kept", "layers recomputed"};
    for (int c = 0; c < 2; ++c) {
      fmt::print("{:<26} {:>9.3f} {:>11.0f}\n", names[c], run[c].first, run[c].second);
      results["checkpointing"][c ? "checkpointed" : "plain"] = {{"step_s", run[c].first},
                                                                {"peak_rss_mib", run[c].second}};
    }
    const double memory = run[1].second / run[0].second, time = run[1].first / run[0].first;
    fmt::print("checkpointed / plain: peak RSS {:.2f}x, step time {:.2f}x\n", memory, time);
    results["checkpointing"]["rss_ratio"] = memory;
    results["checkpointing"]["time_ratio"] = time;
  }

  /// Dynamic int8 (`predict` / `embed --precision int8`): bert-base inference 32x128 in fp32, int8
  /// (and bf16 where fast), interleaved in one process, with the int8 output's distance from fp32;
  /// then its accuracy cost on a real dev set: a small BERT fine-tuned on SST-2's first
  /// 20 000 training sentences for one epoch (fp32), evaluated on the 872 dev sentences in fp32 and
  /// in int8.
  void int8(const fs::path& shared, const fs::path& tmp, const fs::path& bertft) {
    const std::string engine = bert::int8_engine();
    if (engine.empty()) {
      fmt::print("\n(int8 skipped: this LibTorch has no quantized engine)\n");
      return;
    }
    fmt::print(
        "\n== int8: bert-base seq classification 32x128, eval, engine {} ==\n{:<8} {:>9} {:>9} "
        "{:>14}\n",
        engine, "", "seconds", "vs fp32", "max |dlogit|");
    const auto config = base_config();
    const auto a = adapter();
    torch::manual_seed(0);
    auto plain = a->build_model(config);
    auto quantized = a->build_model(config);
    {
      torch::NoGradGuard no_grad;
      const auto from = plain->named_parameters();
      for (auto& p : quantized->named_parameters()) p.value().copy_(from[p.key()]);
    }
    plain->eval();
    quantized->eval();
    bert::quantize_dynamic_int8(*quantized);
    const auto b = random_batch(32, 128, config.vocab_size());
    const c10::InferenceMode inference;
    std::vector<std::string> names = {"fp32", "int8"};
    if (bf16_fast) names.push_back("bf16");
    std::map<std::string, double> best;
    std::map<std::string, torch::Tensor> logits;
    for (const auto& n : names) best[n] = 1e30;
    for (int round = 0; round < std::max(iters, 2); ++round)
      for (const auto& n : names) {
        const bert::tasks::AutocastScope autocast(n == "bf16" ? Precision::kBf16 : Precision::kFp32,
                                                  torch::kCPU);
        auto& model = n == "int8" ? quantized : plain;
        const auto t = Clock::now();
        logits[n] = model->forward(b).to(torch::kFloat);
        best[n] = std::min(best[n], since(t));
      }
    for (const auto& n : names) {
      const double diff = (logits[n] - logits["fp32"]).abs().max().item<double>();
      fmt::print("{:<8} {:>9.3f} {:>8.2f}x {:>14.2e}\n", n, best[n], best["fp32"] / best[n], diff);
      results["int8"]["speed"][n] = {{"seconds", best[n]},
                                     {"speedup_vs_fp32", best["fp32"] / best[n]},
                                     {"max_abs_logit_diff", diff}};
    }

    const auto sst2 = shared / "data" / "glue" / "SST-2";
    const auto vocab = shared / "data" / "bert-vocab" / "bert-base-cased-vocab.txt";
    if (!fs::exists(sst2 / "train.tsv") || !fs::exists(bertft)) {
      fmt::print("(int8 accuracy skipped: SST-2 or the bertft binary missing)\n");
      return;
    }
    write_small_model(vocab, tmp / "int8_model", 128);
    // The first kInt8TrainSentences training sentences (the whole 67 349 took two minutes of the
    // 15 on an AVX2 CPU): enough for a model well above chance, whose int8 copy is then judged.
    constexpr int kInt8TrainSentences = 20000;
    const auto train = tmp / "sst2_train.tsv";
    {
      std::ifstream in(sst2 / "train.tsv");
      std::ofstream cut(train);
      std::string line;
      for (int n = 0; n <= kInt8TrainSentences && std::getline(in, line); ++n) cut << line << "\n";
    }
    const auto recipe = tmp / "int8.yaml";
    const auto out = tmp / "int8_run";
    std::ofstream(recipe)
        << "model: {pretrained: " << (tmp / "int8_model").string() << "}\n"
        << "task: {type: sequence_classification, max_seq_length: 64}\n"
        << "data: {train: {path: " << train.string() << ", format: glue, glue_task: sst2}, "
        << "dev: {path: " << (sst2 / "dev.tsv").string() << ", format: glue, glue_task: sst2}}\n"
        << "training: {epochs: 1, batch_size: 32, learning_rate: 1.0e-3, warmup_ratio: 0.1, "
        << "weight_decay: 0.01, group_by_length: true, log_every: 100000, precision: fp32, "
        << "seed: 1}\n"
        << "sweep: {seeds: [1]}\n"
        << "output: {export: true}\n";
    const auto log = tmp / "int8.log";
    const auto t = Clock::now();
    const int rc = std::system(fmt::format("{} --threads {} sweep {} --set output.dir={} > {} 2>&1",
                                           bertft.string(), threads, recipe.string(), out.string(),
                                           log.string())
                                   .c_str());
    if (rc != 0 || !fs::exists(out / "best_model")) {
      fmt::print("(int8 accuracy: training failed:\n{})\n", bert::read_file(log));
      return;
    }
    auto m = bert::recipes::load_finetuned(out / "best_model");
    bert::data::DataSpec dev;
    dev.path = sst2 / "dev.tsv";
    dev.format = bert::data::DataFormat::kGlue;
    dev.glue_task = "sst2";
    const auto features = m.adapter->featurize(m.adapter->read(dev), *m.tokenizer, false);
    bert::tasks::TrainerOptions options;
    options.precision = Precision::kFp32;
    const bert::tasks::Trainer trainer(options);
    const auto fp32 = trainer.evaluate(*m.adapter, m.model, *features);
    bert::quantize_dynamic_int8(*m.model);
    const auto q = trainer.evaluate(*m.adapter, m.model, *features);
    const double a32 = fp32.metrics.at("accuracy"), a8 = q.metrics.at("accuracy");
    fmt::print(
        "SST-2 dev ({} sentences), small BERT fine-tuned 1 epoch on {} training sentences ({:.0f} "
        "s): accuracy fp32 {:.4f}, int8 {:.4f} ({:+.4f})\n",
        features->size(), kInt8TrainSentences, since(t), a32, a8, a8 - a32);
    results["int8"]["sst2_dev"] = {{"fp32_accuracy", a32},
                                   {"int8_accuracy", a8},
                                   {"difference", a8 - a32},
                                   {"train_sentences", kInt8TrainSentences}};
  }
};

constexpr const char* kUsage =
    "usage: bench_suite [--only SECTION,...] [--iters N] [--rounds N] [--threads N] [--json FILE]\n"
    "  sections (default all but the last eight): gemm, train_step, infer, seq_scaling, "
    "attention,\n"
    "  tokenizer, load, sweep, data_parallel, vs_hf, checkpointing, int8; precision, profile\n"
    "  [--profile-precision fp32|bf16] [--profile-workload train|infer], pretrain_step, "
    "bf16_shadows, clip_norm,\n"
    "  real_data [--real-limit N (0: all)] [--real-tasks mrpc,stsb], similar,\n"
    "  retrieval [--retrieval-models DIR,...]\n"
    "  one workload in this process: --hf-twin train|infer [--bf16 0|1] [--batch N] [--seq N]\n"
    "  [--warmup N] [--steps N] [--checkpoint 0|1]\n";

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      fmt::print("{}", kUsage);
      return 0;
    }
  if (argc % 2 == 0) {  // every option takes one value
    fmt::print(stderr, "bench_suite: {} needs a value\n{}", argv[argc - 1], kUsage);
    return 2;
  }
  // Measure under the OpenMP and OpenBLAS settings bertft itself runs with (HF's runs in vs_hf and
  // real_data inherit them: where OpenBLAS fell back to old kernels, HF gets the better ones too).
  bert::apply_load_time_settings(argv);
  bert::keep_freed_memory();
  std::string only =
                  "gemm,train_step,infer,seq_scaling,attention,tokenizer,load,sweep,data_parallel,"
                  "vs_hf,checkpointing,int8",
              json_out, twin, real_worker, profile_workload = "train", retrieval_models,
              real_tasks = "mrpc,stsb";
  int iters = 2, rounds = 0, worker = -1, port = 0, overlap = 1, threads = 0, bf16 = 0, batch = 8,
      seq = 128, warmup = 1, steps = 3, real_limit = 256, grouped = 0, checkpoint = 0;
  std::optional<Precision> profile_precision;
  for (int i = 1; i + 1 < argc; i += 2) {
    const auto number = [&](const char* flag, int& value) {
      if (std::strcmp(argv[i], flag)) return false;
      value = std::atoi(argv[i + 1]);
      return true;
    };
    if (number("--rounds", rounds) || number("--threads", threads) || number("--bf16", bf16) ||
        number("--batch", batch) || number("--seq", seq) || number("--warmup", warmup) ||
        number("--steps", steps) || number("--real-limit", real_limit) ||
        number("--grouped", grouped) || number("--checkpoint", checkpoint))
      continue;
    if (!std::strcmp(argv[i], "--hf-twin"))
      twin = argv[i + 1];
    else if (!std::strcmp(argv[i], "--real-data-worker"))
      real_worker = argv[i + 1];
    else if (!std::strcmp(argv[i], "--data-parallel-worker"))
      worker = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--port"))
      port = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--overlap"))
      overlap = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json"))
      json_out = argv[i + 1];
    else if (!std::strcmp(argv[i], "--profile-precision")) {
      const std::string value = argv[i + 1];
      if (value != "fp32" && value != "bf16") {
        fmt::print(stderr, "bench_suite: --profile-precision: '{}' is not fp32 or bf16\n{}", value,
                   kUsage);
        return 2;
      }
      profile_precision = value == "bf16" ? Precision::kBf16 : Precision::kFp32;
    } else if (!std::strcmp(argv[i], "--profile-workload")) {
      profile_workload = argv[i + 1];
      if (profile_workload != "train" && profile_workload != "infer") {
        fmt::print(stderr, "bench_suite: --profile-workload: '{}' is not train or infer\n{}",
                   profile_workload, kUsage);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--real-tasks"))
      real_tasks = argv[i + 1];
    else if (!std::strcmp(argv[i], "--retrieval-models"))
      retrieval_models = argv[i + 1];
    else {
      fmt::print(stderr, "bench_suite: unknown option {}\n{}", argv[i], kUsage);
      return 2;
    }
  }
  std::vector<std::string> real_task_list;  // the tasks real_data knows
  std::stringstream task_list(real_tasks);
  for (std::string task; std::getline(task_list, task, ',');) {
    if (task != "mrpc" && task != "stsb") {
      fmt::print(stderr, "bench_suite: --real-tasks: '{}' is not mrpc or stsb\n{}", task, kUsage);
      return 2;
    }
    real_task_list.push_back(task);
  }
  if (worker >= 0) {
    bert::configure_threads(1);
    return data_parallel_worker(worker, 2, port, iters, overlap != 0, json_out);
  }
  if (!real_worker.empty()) {
    bert::configure_threads(threads);
    return real_data_worker(real_worker, grouped != 0, real_limit, json_out);
  }
  if (!twin.empty()) {
    bert::configure_threads(threads);
    return hf_twin_worker(twin, bf16 != 0, batch, seq, warmup, steps, checkpoint != 0, json_out);
  }
  const auto wants = [&](const std::string& name) {
    return ("," + only + ",").find("," + name + ",") != std::string::npos;
  };
  Suite suite;
  suite.iters = iters;
  suite.real_limit = real_limit;
  suite.real_tasks = real_task_list;
  suite.profile_precision = profile_precision;
  suite.profile_workload = profile_workload;
  suite.threads = bert::configure_threads(threads);
  const auto choice = bert::tasks::resolve_precision(Precision::kAuto, torch::kCPU);
  suite.bf16_fast = choice.precision == Precision::kBf16;
  suite.bf16_reason = choice.reason;
  // Interleaved rounds of vs_hf's fresh processes: 2, or 1 where bf16 doubles its workloads, so
  // that the suite stays within 15 minutes.
  suite.rounds = rounds > 0 ? rounds : suite.bf16_fast ? 1 : 2;
  const fs::path shared = shared_dir();
  const fs::path tmp = fs::temp_directory_path() / fmt::format("bertft-bench-{}", ::getpid());
  fs::create_directories(tmp);
  const auto start = Clock::now();
  fmt::print("bertft benchmark suite | {} threads | LibTorch {} | OMP_WAIT_POLICY={}\n",
             suite.threads, TORCH_VERSION,
             std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(default)");
  fmt::print("precision: {}\n", choice.reason);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  fmt::print(
      "OpenBLAS core: {}{}\n",
      bert::openblas_core().empty() ? "(not OpenBLAS)" : bert::openblas_core(),
      coretype != nullptr ? fmt::format(" (OPENBLAS_CORETYPE={}, HF's runs too)", coretype) : "");
  suite.results["openblas_core"] = bert::openblas_core();
  suite.results["threads"] = suite.threads;
  suite.results["bf16_fast"] = suite.bf16_fast;
  suite.results["precision_probe"] = choice.reason;
  const fs::path bertft = fs::path(BERTFT_BINARY_DIR) / "bertft";
  // Each section's wall time, printed and kept in the JSON (what to cut when the suite is slow).
  const auto section = [&](const std::string& name, const std::function<void()>& run) {
    const auto t = Clock::now();
    run();
    suite.results["section_seconds"][name] = since(t);
    fmt::print("({} took {:.0f} s)\n", name, since(t));
    std::fflush(stdout);
  };
  if (wants("gemm") || wants("train_step") || wants("infer") || wants("vs_hf") || wants("similar"))
    section("gemm", [&] { suite.gemm(); });
  if (wants("train_step")) section("train_step", [&] { suite.train_step(); });
  if (wants("pretrain_step")) section("pretrain_step", [&] { suite.pretrain_step(); });
  if (wants("infer")) section("infer", [&] { suite.infer(); });
  if (wants("seq_scaling")) section("seq_scaling", [&] { suite.seq_scaling(); });
  if (wants("attention")) section("attention", [&] { suite.attention(); });
  if (wants("profile")) section("profile", [&] { suite.profile(); });
  if (wants("bf16_shadows")) section("bf16_shadows", [&] { suite.bf16_shadows(); });
  if (wants("clip_norm")) section("clip_norm", [&] { suite.clip_norm(); });
  if (wants("data_parallel")) section("data_parallel", [&] { suite.data_parallel(tmp); });
  if (wants("tokenizer")) section("tokenizer", [&] { suite.tokenizer(shared); });
  if (wants("load")) section("load", [&] { suite.load(tmp); });
  if (wants("sweep")) section("sweep", [&] { suite.sweep(shared, tmp, bertft); });
  if (wants("precision")) section("precision", [&] { suite.precision(shared, tmp, bertft); });
  if (wants("vs_hf")) section("vs_hf", [&] { suite.vs_hf(shared, tmp); });
  if (wants("real_data")) section("real_data", [&] { suite.real_data(shared, tmp); });
  if (wants("similar")) section("similar", [&] { suite.similar(); });
  if (wants("retrieval")) section("retrieval", [&] { suite.retrieval(shared, retrieval_models); });
  if (wants("checkpointing")) section("checkpointing", [&] { suite.checkpointing(tmp); });
  if (wants("int8")) section("int8", [&] { suite.int8(shared, tmp, bertft); });
  bert::remove_tree(tmp);
  suite.results["seconds"] = since(start);
  fmt::print("\nsuite time {:.0f} s\n", since(start));
  if (!json_out.empty()) std::ofstream(json_out) << suite.results.dump(2) << "\n";
  fmt::print("{}\n", suite.results.dump());
  return 0;
}
