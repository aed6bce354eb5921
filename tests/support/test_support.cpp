#include "tests/support/test_support.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bert/common/file_util.h"

namespace bert::testing {

std::filesystem::path hf_fixture_dir() {
  if (const char* env = std::getenv("BERTFT_HF_FIXTURE")) return env;
  return shared_dir() / "fixtures" / "hf-tiny-bert-a";
}

size_t fixture_model_keys(const std::string& name, const std::string& prefix) {
  const auto manifest = nlohmann::json::parse(read_file(hf_fixture_dir() / "manifest.json"));
  const auto models = manifest.value("models", nlohmann::json::object());
  if (!models.contains(name)) return 0;
  size_t count = 0;
  for (const auto& [key, value] : models[name]["state_dict_keys"].items())
    count += key.rfind(prefix, 0) == 0;
  return count;
}

std::filesystem::path bertft_binary() {
  return std::filesystem::path(BERTFT_BINARY_DIR) / "bertft";
}

std::string on_test_device(const std::string& args) {
  const auto device = test_device();
  if (device == "cpu" || args.find("--device") != std::string::npos ||
      args.find("--precision int8") != std::string::npos)
    return args;
  // The command's name follows bertft's own options (--threads N, -v / --verbose).
  size_t at = 0;
  while (args.compare(at, 1, "-") == 0) {
    const bool takes_value = args.compare(at, 10, "--threads ") == 0;
    at = args.find(' ', at);
    if (at != std::string::npos && takes_value) at = args.find(' ', at + 1);
    if (at == std::string::npos) return args;
    ++at;
  }
  for (const std::string command : {"predict ", "embed ", "similar "})
    if (args.compare(at, command.size(), command) == 0)
      return args.substr(0, at + command.size()) + "--device " + device + " " +
             args.substr(at + command.size());
  return args;
}

BertftRun run_bertft(const std::string& args,
                     const std::filesystem::path& log,
                     const std::string& env,
                     const std::filesystem::path& input) {
  const std::string command = env + " " + bertft_binary().string() + " " + on_test_device(args) +
                              " < " + input.string() + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  BertftRun run;
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.output = read_file(log);
  return run;
}

std::optional<std::filesystem::path> hf_python() {
  const auto python = hf_python_path();
  if (!std::filesystem::exists(python)) return std::nullopt;
  return python;
}

std::optional<std::string> hf_export_check_command() {
  const auto python = hf_python();
  const auto script = shared_dir() / "tools" / "hf-reference" / "hf_export_check.py";
  if (!python || !std::filesystem::exists(script)) return std::nullopt;
  return python->string() + " " + script.string();
}

namespace {

/// Runs `command` with stdout to `dir`/`name`.json and stderr to `dir`/`name`.log and parses
/// the JSON; a failure is a test failure and returns an empty object.
nlohmann::json run_json_command(const std::string& command,
                                const std::filesystem::path& dir,
                                const std::string& name) {
  const auto out = dir / (name + ".json"), err = dir / (name + ".log");
  const int status = std::system((command + " > " + out.string() + " 2> " + err.string()).c_str());
  EXPECT_EQ(status, 0) << command << "\n" << read_file(err);
  try {
    return nlohmann::json::parse(read_file(out));
  } catch (const std::exception& e) {
    ADD_FAILURE() << command << ": " << e.what() << "\n" << read_file(err);
    return nlohmann::json::object();
  }
}

}  // namespace

nlohmann::json run_hf_export_check(const std::string& args, const std::filesystem::path& dir) {
  const auto checker = hf_export_check_command();
  if (!checker) {
    ADD_FAILURE() << "no HF reference kit";
    return nlohmann::json::object();
  }
  return run_json_command(*checker + " " + args, dir, "hf_check");
}

nlohmann::json run_hf_script(const std::string& script,
                             const std::string& args,
                             const std::filesystem::path& dir) {
  const auto python = hf_python();
  if (!python) {
    ADD_FAILURE() << "no HF reference kit";
    return nlohmann::json::object();
  }
  const auto path = std::filesystem::path(BERTFT_SOURCE_DIR) / "tests" / "support" / script;
  return run_json_command(python->string() + " " + path.string() + " " + args, dir, script);
}

nlohmann::json run_hf_fill_mask(const std::filesystem::path& model,
                                const std::filesystem::path& inputs,
                                int k,
                                const std::filesystem::path& dir) {
  const auto tokens = dir / "hf_fill_mask_tokens.jsonl";
  write_bertft_tokens("--model " + model.string(), inputs, tokens);
  return run_hf_script(
      "hf_fill_mask.py",
      model.string() + " " + inputs.string() + " " + std::to_string(k) + " " + tokens.string(),
      dir);
}

void write_bertft_tokens(const std::string& args,
                         const std::filesystem::path& texts,
                         const std::filesystem::path& out) {
  const auto run = run_bertft("tokenize " + args, out.string() + ".log", "", texts);
  EXPECT_EQ(run.code, 0) << run.output;
  std::string lines;
  for (const auto& line : json_lines(run.output)) lines += line.dump() + "\n";
  write_bytes(out, lines);
}

void expect_hf_agrees(const nlohmann::json& report,
                      const std::string& architecture,
                      int n,
                      bool with_tokens) {
  ASSERT_TRUE(report.contains("n")) << report.dump(1);
  for (const auto* key : {"missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"})
    EXPECT_TRUE(report["loading_info"][key].empty()) << key << ": " << report.dump(1);
  EXPECT_EQ(report["model_class"], architecture);
  EXPECT_EQ(report["n"], n);
  const auto all = std::to_string(n) + "/" + std::to_string(n);
  EXPECT_EQ(report["prediction_agreement"], all) << report.dump(1);
  if (report.contains("max_abs_diff_probability")) {
    EXPECT_LT(report["max_abs_diff_probability"].get<double>(), 1e-5) << report.dump(1);
  }
  if (with_tokens) {
    EXPECT_EQ(report["tokenization_mismatch_vs_bertft_tokenize"], "0/" + std::to_string(n))
        << report.dump(1);
  }
  if (report.contains("word_tag_agreement")) {
    const auto agreement = report["word_tag_agreement"].get<std::string>();
    const auto slash = agreement.find('/');
    EXPECT_EQ(agreement.substr(0, slash), agreement.substr(slash + 1)) << report.dump(1);
  }
}

std::vector<nlohmann::json> json_lines(const std::string& output) {
  std::vector<nlohmann::json> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string test_device() {
  const char* device = std::getenv("BERTFT_TEST_DEVICE");
  return device != nullptr && *device != '\0' ? device : "cpu";
}

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size(99)
      .hidden_size(32)
      .num_hidden_layers(2)
      .num_attention_heads(4)
      .intermediate_size(37)
      .max_position_embeddings(64)
      .initializer_range(0.08);
  return c;
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("bertft-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  if (std::getenv("BERTFT_KEEP_TMP")) return;  // debugging: keep the files
  std::error_code ec;
  remove_tree(path_, ec);
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble))
      .abs()
      .max()
      .item<double>();
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void expect_fill_mask_agrees(const nlohmann::json& hf,
                             const std::vector<nlohmann::json>& ours,
                             const std::string& model_class,
                             bool same_ids) {
  ASSERT_TRUE(hf.contains("results")) << hf.dump(1);
  EXPECT_EQ(hf["model_class"], model_class);
  for (const auto* key : {"missing_keys", "unexpected_keys", "mismatched_keys"})
    EXPECT_TRUE(hf["loading_info"].value(key, nlohmann::json::array()).empty())
        << key << ": " << hf["loading_info"].dump();
  ASSERT_EQ(hf["results"].size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const auto& h = hf["results"][i];
    const auto& b = ours[i];
    const auto where = "input " + std::to_string(i) + " " + b["text"].dump();
    if (same_ids) {
      EXPECT_EQ(h["hf_ids"], h["ids"]) << where;
    }
    const auto masks = b.value("masks", nlohmann::json::array());
    ASSERT_EQ(h["masks"].size(), masks.size()) << where;
    for (size_t m = 0; m < masks.size(); ++m) {
      const auto &hc = h["masks"][m], &bc = masks[m];
      ASSERT_EQ(hc.size(), bc.size()) << where;
      for (size_t r = 0; r < bc.size(); ++r) {
        const double score = bc[r]["score"];
        EXPECT_NEAR(score, hc[r]["score"].get<double>(), 1e-5) << where << " rank " << r;
        // Candidates whose scores tie within 1e-6 may come in either order.
        size_t same = r;
        for (size_t q = 0; q < hc.size(); ++q)
          if (hc[q]["token"] == bc[r]["token"] &&
              std::abs(hc[q]["score"].get<double>() - score) < 1e-6)
            same = q;
        if (hc[same]["token"] != bc[r]["token"]) {
          ADD_FAILURE() << where << " mask " << m << " rank " << r << ": HF " << hc[r].dump()
                        << ", bertft " << bc[r].dump();
          continue;
        }
        if (hc[same]["token_str"].is_null()) continue;  // HF had no tokenizer to decode with
        EXPECT_EQ(bc[r]["token_str"], hc[same]["token_str"]) << where;
        EXPECT_EQ(bc[r]["sequence"], hc[same]["sequence"]) << where;
      }
    }
    if (h.contains("next_sentence") && b.contains("text_pair")) {
      ASSERT_TRUE(b.contains("next_sentence")) << where << " " << b.dump();
      const bool is_next = b["next_sentence"]["label"] == "IsNext";
      EXPECT_NEAR(b["next_sentence"]["score"].get<double>(),
                  h["next_sentence"][is_next ? 0 : 1].get<double>(), 1e-5)
          << where;
      EXPECT_GE(b["next_sentence"]["score"].get<double>(), 0.5) << where;
    } else {
      EXPECT_FALSE(b.contains("next_sentence")) << where << " " << b.dump();
    }
  }
}

}  // namespace bert::testing
