#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bert/common/autocast.h"
#include "bert/model/bert_config.h"
#include "tests/support/dev_paths.h"

namespace bert::testing {

/// The HF golden fixture: $BERTFT_HF_FIXTURE, default shared_dir()/fixtures/hf-tiny-bert-a.
std::filesystem::path hf_fixture_dir();

/// The number of state-dict keys of the fixture's model `name` (its manifest.json) that start
/// with `prefix`; 0 when the manifest does not list the model.
size_t fixture_model_keys(const std::string& name, const std::string& prefix = "");

/// Skips the calling test, naming the model, when the fixture has no model `name`.
#define BERTFT_REQUIRE_FIXTURE_MODEL(name)                                               \
  do {                                                                                   \
    if (!std::filesystem::exists(::bert::testing::hf_fixture_dir() / "models" / (name))) \
      GTEST_SKIP() << "the fixture has no model " << (name);                             \
  } while (0)

/// Skips the calling test cleanly when `path` does not exist.
#define BERTFT_REQUIRE_PATH(path)                                                \
  do {                                                                           \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "not found: " << (path); \
  } while (0)

/// Runs LibTorch (and the kernels that follow its thread count) on two threads while it lives,
/// so that work split across threads is split in a test too; restores the count before.
class TwoThreads {
 public:
  TwoThreads() : before_(torch::get_num_threads()) { torch::set_num_threads(2); }
  ~TwoThreads() { torch::set_num_threads(before_); }
  TwoThreads(const TwoThreads&) = delete;
  TwoThreads& operator=(const TwoThreads&) = delete;

 private:
  int before_;
};

/// Seeds torch in the constructor so every test starts from the same random state.
class SeededTest : public ::testing::Test {
 protected:
  SeededTest() { torch::manual_seed(0); }
};

/// CPU autocast to bf16 for a scope, where `on` (what the Trainer's AutocastScope does on the
/// CPU): off again, and its cast cache cleared, however the scope is left, so that a failed
/// assertion or a throw does not leave autocast on for the tests after it.
class CpuBf16Autocast {
 public:
  explicit CpuBf16Autocast(bool on = true) : on_(on) {
    if (!on_) return;
    autocast::set_dtype(c10::kCPU, at::kBFloat16);
    autocast::set_enabled(c10::kCPU, true);
  }
  ~CpuBf16Autocast() {
    if (!on_) return;
    autocast::set_enabled(c10::kCPU, false);
    at::autocast::clear_cache();
  }
  CpuBf16Autocast(const CpuBf16Autocast&) = delete;
  CpuBf16Autocast& operator=(const CpuBf16Autocast&) = delete;

 private:
  bool on_;
};

/// The device the training and inference tests run on: $BERTFT_TEST_DEVICE ("cuda" on a GPU
/// machine, scripts/device_check.sh), else "cpu".
std::string test_device();

/// 2 layers, hidden 32, 4 heads, intermediate 37, vocab 99, 64 positions (fixture config A).
BertConfig tiny_config();

/// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Max |a - b| over all elements (as double).
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

/// The message of the bert::Error `fn` throws, or "(no error)".
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

/// The bertft binary of this build.
std::filesystem::path bertft_binary();

/// What `run_bertft` saw: the exit code (-1 when killed by a signal) and stdout + stderr.
struct BertftRun {
  int code = -1;
  std::string output;
};
/// `args` with `--device <test_device()>` after an inference command's name (predict, embed,
/// similar; after bertft's own options) where the test device is not the CPU and `args` name no
/// device and no int8 (CPU only): on a GPU machine the inference tests run there.
std::string on_test_device(const std::string& args);

/// Runs `bertft <on_test_device(args)>` through the shell with `env` ("VAR=value ...") in front,
/// stdin from `input`, stdout and stderr together in `log`.
BertftRun run_bertft(const std::string& args,
                     const std::filesystem::path& log,
                     const std::string& env = "",
                     const std::filesystem::path& input = "/dev/null");

/// The lines of `output` that are JSON objects (a command's JSON-lines output among its log
/// lines), parsed.
std::vector<nlohmann::json> json_lines(const std::string& output);

/// The HF reference kit's interpreter ($BERTFT_HF_PYTHON, else build/hf-reference/python, as
/// ../shared/tools/hf-reference/setup.sh makes it) and ../shared's hf_export_check.py; nullopt
/// where either is absent (the caller skips).
std::optional<std::string> hf_export_check_command();

/// hf_python_path() where it exists; nullopt where the kit is not set up.
std::optional<std::filesystem::path> hf_python();

/// Runs tests/support/`script` `args` with hf_python() and returns the JSON it prints (stderr in
/// `dir`/<script>.log); a failure to run or parse is a test failure and returns an empty object.
nlohmann::json run_hf_script(const std::string& script,
                             const std::string& args,
                             const std::filesystem::path& dir);

/// Runs tests/support/hf_fill_mask.py (HF transformers' fill-mask on `model`, `k` candidates,
/// for the JSON lines {"text", "text_pair"?} of `inputs`, run on bertft's ids: `bertft tokenize
/// --model model` of them, written to `dir`) and returns its report; a failure to run or parse
/// is a test failure and returns an empty object.
nlohmann::json run_hf_fill_mask(const std::filesystem::path& model,
                                const std::filesystem::path& inputs,
                                int k,
                                const std::filesystem::path& dir);

/// What `bertft predict --text` of a pre-training model printed (`ours`, a JSON line per input)
/// must share with run_hf_fill_mask's report on the same inputs: HF built `model_class` with no
/// missing or unexpected key, and for every input the same mask count, at each mask the same
/// candidates in order (a swap only between scores within 1e-6), token_str and sequence equal,
/// scores within 1e-5, and the next-sentence probability within 1e-5 where HF has an NSP head;
/// with `same_ids`, HF's own (slow) tokenizer gave bertft's ids. Where HF had no tokenizer for
/// the model (XLM-R's needs Python's sentencepiece), token_str and sequence go unchecked.
void expect_fill_mask_agrees(const nlohmann::json& hf,
                             const std::vector<nlohmann::json>& ours,
                             const std::string& model_class,
                             bool same_ids);

/// Runs `hf_export_check.py <args>` (HF transformers loads a bertft export and predicts on the
/// same inputs as `bertft predict`) and returns its report; a failure to run or parse is a test
/// failure and returns an empty object. stdout/stderr go to `dir`/hf_check.{json,log}.
nlohmann::json run_hf_export_check(const std::string& args, const std::filesystem::path& dir);

/// `bertft tokenize <args>` of the lines in `texts`: its JSON lines written to `out` (for
/// hf_export_check.py's --bertft-tok); a failure is a test failure.
void write_bertft_tokens(const std::string& args,
                         const std::filesystem::path& texts,
                         const std::filesystem::path& out);

/// What a report of run_hf_export_check must say: HF built `architecture` with no missing,
/// unexpected or mismatched key, compared `n` inputs and agreed on every prediction,
/// probabilities within 1e-5 where it compares them, and (`with_tokens`) its tokenizer gave
/// bertft's ids on every input.
void expect_hf_agrees(const nlohmann::json& report,
                      const std::string& architecture,
                      int n,
                      bool with_tokens);

/// Writes `bytes` to `path` (test helper, not atomic).
void write_bytes(const std::filesystem::path& path, const std::string& bytes);

}  // namespace bert::testing
