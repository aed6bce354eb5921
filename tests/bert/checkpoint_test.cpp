#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/resize_vocab.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/checkpoint/torch_pickle.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/json_util.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/wordpiece.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::tiny_config;

class CheckpointTest : public testing::SeededTest {};

TEST_F(CheckpointTest, SaveThenLoadIsBitExact) {
  BertForPreTraining model(tiny_config());
  TempDir dir;
  save_weights(dir.path(), state_dict(*model));
  save_config(dir.path(), tiny_config(), "BertForPreTraining");
  const auto found = PretrainedDir::find(dir.path());
  EXPECT_EQ(found.format, WeightsFormat::kSafetensors);
  const auto config = BertConfig::from_file(found.config);
  EXPECT_EQ(config.to_json()["architectures"], nlohmann::json({"BertForPreTraining"}));

  torch::manual_seed(99);  // different init, so equality below proves the load
  BertForPreTraining reloaded(config);
  LoadOptions options;
  options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  const auto report = load_state_dict(*reloaded, read_weights(found.weights), "saved", options);
  EXPECT_TRUE(report.clean()) << report.summary();
  const auto a = state_dict(*model), b = state_dict(*reloaded);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
}

// config.json's torch_dtype names the weights' floating type, as HF's save_pretrained writes
// it: what `torch_dtype="auto"` loads them as.
TEST(SaveConfigTest, TorchDtypeNamesTheWeightsFloatingType) {
  const auto ids = torch::arange(4);  // an integer buffer first (names sort): not its type
  for (const auto& [type, name] :
       {std::pair{torch::kFloat32, "float32"}, std::pair{torch::kFloat16, "float16"},
        std::pair{torch::kBFloat16, "bfloat16"}, std::pair{torch::kFloat64, "float64"}}) {
    const TensorMap tensors = {{"a.position_ids", ids}, {"b.weight", torch::zeros({2}, type)}};
    EXPECT_EQ(torch_dtype_name(tensors), name);
    TempDir dir;
    save_config(dir.path(), tiny_config(), "BertModel", torch_dtype_name(tensors));
    EXPECT_EQ(nlohmann::json::parse(read_file(dir.path() / "config.json"))["torch_dtype"], name);
  }
  EXPECT_EQ(torch_dtype_name({{"a.position_ids", ids}}), "float32");
  TempDir dir;
  save_config(dir.path(), tiny_config(), "BertModel");
  EXPECT_EQ(nlohmann::json::parse(read_file(dir.path() / "config.json"))["torch_dtype"], "float32");
}

TEST_F(CheckpointTest, ShardedSafetensorsRoundTrip) {
  BertModel model(tiny_config());
  TempDir dir;
  const auto tensors = state_dict(*model);
  save_weights(dir.path(), tensors, /*max_shard_bytes=*/20000);
  ASSERT_TRUE(fs::exists(dir.path() / "model.safetensors.index.json"));
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(dir.path()))
    shards += entry.path().extension() == ".safetensors";
  EXPECT_GE(shards, 2);
  save_config(dir.path(), tiny_config(), "BertModel");
  const auto found = PretrainedDir::find(dir.path());
  EXPECT_EQ(found.format, WeightsFormat::kSafetensorsSharded);
  const auto back = read_weights(found.weights);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
}

TEST_F(CheckpointTest, ShardIndexNamingAMissingShardIsAnError) {
  TempDir dir;
  testing::write_bytes(dir.path() / "model.safetensors.index.json",
                       R"({"weight_map": {"a": "model-00001-of-00002.safetensors"}})");
  try {
    read_weights(dir.path() / "model.safetensors.index.json");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos);
  }
}

// A sharded index that is not one, names a shard outside its directory (a path, or ".."), or puts
// a tensor in a shard that lacks it: each a CheckpointError naming the index and what is wrong,
// before anything outside the directory is read.
TEST_F(CheckpointTest, ShardIndexRefusesWhatItCannotHold) {
  TempDir dir;
  const auto index = dir.path() / "model.safetensors.index.json";
  save_safetensors(dir.path() / "s.safetensors", {{"b", torch::zeros({2})}});
  fs::create_directories(dir.path() / "sub");
  save_safetensors(dir.path() / "sub" / "t.safetensors", {{"a", torch::zeros({2})}});
  const auto refusal = [&](const std::string& text) {
    testing::write_bytes(index, text);
    try {
      read_weights(index);
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("(no CheckpointError)");
  };
  const auto expect = [&](const std::string& text, const std::string& message) {
    const auto got = refusal(text);
    EXPECT_NE(got.find(index.string() + ": " + message), std::string::npos) << text << "\n" << got;
  };
  expect(R"({"weight_map": )", "invalid JSON");
  expect(R"([1, 2])", "expected an object with a 'weight_map'");
  expect(R"({"metadata": {}})", "expected an object with a 'weight_map'");
  expect(R"({"weight_map": ["s.safetensors"]})", "expected an object with a 'weight_map'");
  expect(R"({"weight_map": {"a": 3}})", "weight_map['a'] must be a file name");
  expect(R"({"weight_map": {"a": "sub/t.safetensors"}})",
         "shard 'sub/t.safetensors' must be a file in the same directory");
  expect(R"({"weight_map": {"a": ".."}})", "shard '..' must be a file in the same directory");
  expect(R"({"weight_map": {"a": "s.safetensors"}})",
         "the index puts 'a' in " + (dir.path() / "s.safetensors").string() + ", which lacks it");
  testing::write_bytes(index, R"({"weight_map": {"b": "s.safetensors"}})");
  EXPECT_EQ(read_weights(index).size(), 1u);
}

TEST_F(CheckpointTest, StrictLoadingListsEveryProblem) {
  BertModel model(tiny_config());
  auto tensors = state_dict(*model);
  tensors.erase("pooler.dense.bias");
  tensors["encoder.layer.9.extra"] = torch::zeros({1});
  tensors["embeddings.word_embeddings.weight"] = torch::zeros({98, 32});
  BertModel target(tiny_config());
  try {
    load_state_dict(*target, tensors, "ckpt");
    FAIL();
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("missing key 'pooler.dense.bias'"), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected key 'encoder.layer.9.extra'"), std::string::npos) << message;
    EXPECT_NE(
        message.find("embeddings.word_embeddings.weight: checkpoint [98, 32] vs model [99, 32]"),
        std::string::npos)
        << message;
  }
  LoadOptions lenient;
  lenient.strict = false;
  const auto report = load_state_dict(*target, tensors, "ckpt", lenient);
  EXPECT_EQ(report.missing,
            (std::vector<std::string>{"pooler.dense.bias"}));  // mismatched is not missing
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"encoder.layer.9.extra"}));
  EXPECT_EQ(report.mismatched.size(), 1u);
}

// A checkpoint of the bare encoder (HF's BertModel, keys without "bert.") loads into a model with
// heads: its keys take the model's prefix and only the heads' are missing (the summary names
// five of them and counts the rest).
TEST_F(CheckpointTest, ABareEncoderCheckpointLoadsUnderTheModelsPrefix) {
  BertModel encoder(tiny_config());
  BertForPreTraining target(tiny_config());
  LoadOptions lenient;
  lenient.strict = false;
  const auto report = load_state_dict(*target, state_dict(*encoder), "encoder", lenient);
  EXPECT_TRUE(report.unexpected.empty()) << report.summary();
  EXPECT_EQ(report.missing.size(), 7u) << report.summary();
  for (const auto& key : report.missing) EXPECT_EQ(key.rfind("cls.", 0), 0u) << key;
  for (const auto& [name, t] : state_dict(*encoder))
    EXPECT_TRUE(torch::equal(t, state_dict(*target).at("bert." + name))) << name;
  EXPECT_NE(report.summary().find("7 missing"), std::string::npos) << report.summary();
  EXPECT_NE(report.summary().find(", ... (2 more)"), std::string::npos) << report.summary();
}

TEST_F(CheckpointTest, LegacyNamesAndBuffersAreMappedLikeHf) {
  BertModel model(tiny_config());
  TensorMap legacy;
  for (const auto& [name, t] : state_dict(*model)) {
    std::string key = "bert." + name;
    const auto ln = key.find("LayerNorm.");
    if (ln != std::string::npos) {
      if (key.compare(key.size() - 6, 6, "weight") == 0)
        key = key.substr(0, key.size() - 6) + "gamma";
      else
        key = key.substr(0, key.size() - 4) + "beta";
    }
    legacy[key] = t;
  }
  legacy["bert.embeddings.position_ids"] = torch::arange(64).unsqueeze(0);
  torch::manual_seed(5);
  BertModel target(tiny_config());
  const auto report = load_state_dict(*target, legacy, "legacy");
  EXPECT_TRUE(report.clean()) << report.summary();
  EXPECT_EQ(report.renamed.size(), 10u);  // 5 LayerNorms x (gamma, beta)
  EXPECT_EQ(report.ignored, (std::vector<std::string>{"bert.embeddings.position_ids"}));
  for (const auto& [name, t] : state_dict(*model))
    EXPECT_TRUE(torch::equal(t, state_dict(*target).at(name))) << name;
}

// A tied alias (the MLM decoder's copy of the word embeddings) loads its target only where the
// checkpoint lacks the target; beside it, it must hold the same values, or the load names it.
TEST_F(CheckpointTest, TiedAliasesStandInForAnAbsentTargetAndMustAgreeWithAPresentOne) {
  torch::manual_seed(3);
  BertForPreTraining source(tiny_config());
  TensorMap tensors;
  for (const auto& [name, t] : state_dict(*source)) tensors[name] = t.clone();
  const std::string alias = "cls.predictions.decoder.weight",
                    target = "bert.embeddings.word_embeddings.weight";
  tensors[alias] = tensors.at(target).clone();  // as HF's state dict lists the tied weight
  LoadOptions options;
  options.strict = false;
  options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  const auto load = [&](const TensorMap& checkpoint) {
    torch::manual_seed(4);
    BertForPreTraining model(tiny_config());
    const auto report = load_state_dict(*model, checkpoint, "ckpt", options);
    return std::make_pair(report, state_dict(*model).at(target).clone());
  };
  auto only_alias = tensors;
  only_alias.erase(target);
  const auto [through_alias, embeddings] = load(only_alias);
  EXPECT_TRUE(through_alias.missing.empty()) << through_alias.summary();
  EXPECT_TRUE(torch::equal(embeddings, tensors.at(alias)));
  EXPECT_TRUE(load(tensors).first.mismatched.empty());
  auto disagreeing = tensors;
  disagreeing[alias] = disagreeing[alias] + 1;
  const auto report = load(disagreeing).first;
  ASSERT_EQ(report.mismatched.size(), 1u) << report.summary();
  EXPECT_NE(report.mismatched[0].find(alias + ": tied alias of " + target), std::string::npos);
}

TEST_F(CheckpointTest, CamphrCheckpointFromOlderTransformersLoadsWithReport) {
  const auto path = testing::shared_dir() / "data" / "tiny-bert-camphr-ner";
  BERTFT_REQUIRE_PATH(path);
  const auto dir = PretrainedDir::find(path);
  EXPECT_EQ(dir.format, WeightsFormat::kTorchBin);
  const auto config = BertConfig::from_file(dir.config);
  EXPECT_EQ(config.vocab_size(), 402);
  EXPECT_EQ(config.num_labels(), 9);
  const auto tensors = read_weights(dir.weights);  // torch::pickle_load fails on this file
  EXPECT_EQ(tensors.size(), 24u);
  EXPECT_EQ(tensors.at("bert.embeddings.word_embeddings.weight").sizes(),
            (std::vector<int64_t>{402, 16}));

  BertModel model(config, /*add_pooling_layer=*/false);
  LoadOptions options;
  options.strict = false;
  const auto report = load_state_dict(*model, tensors, dir.weights.string(), options);
  EXPECT_EQ(report.loaded, 21u);
  EXPECT_TRUE(report.missing.empty()) << report.summary();
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"classifier.bias", "classifier.weight"}));
  EXPECT_EQ(report.ignored, (std::vector<std::string>{"bert.embeddings.position_ids"}));
  EXPECT_TRUE(torch::equal(model->embeddings->word_embeddings->weight,
                           tensors.at("bert.embeddings.word_embeddings.weight")));

  // vocab.txt has 405 lines for 402 embeddings: the tokenizer never produces ids >= 402.
  const auto tokenizer = tok::load_tokenizer(dir, config.vocab_size());
  EXPECT_EQ(tokenizer->vocab_size(), 405);
  for (int64_t id = 402; id < 405; ++id) {
    const auto e = tokenizer->encode(tokenizer->id_to_token(id));
    for (const auto x : e.ids) EXPECT_LT(x, 402) << tokenizer->id_to_token(id);
  }
}

/// A zip-format torch.save file at `path`: `pickle` as data.pkl, then `records` (name, bytes).
std::string zip_with_pickle(const fs::path& path,
                            const std::string& pickle,
                            const std::vector<std::pair<std::string, std::string>>& records = {}) {
  caffe2::serialize::PyTorchStreamWriter writer(path.string());
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  for (const auto& [name, bytes] : records) writer.writeRecord(name, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return path.string();
}

TEST_F(CheckpointTest, PickleWithForeignGlobalIsRefused) {
  TempDir dir;
  // PROTO 2, GLOBAL 'os system', string, TUPLE1, REDUCE, STOP
  const std::string pickle =
      std::string("\x80\x02") + "cos\nsystem\n" + "X\x04\0\0\0echo" + "\x85" + "R.";
  const auto path = zip_with_pickle(dir.path() / "evil.bin", pickle);
  try {
    load_torch_state_dict(path);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("refusing pickle global 'os.system'"), std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointTest, TruncatedPickleAndLegacyFormatAreClearErrors) {
  TempDir dir;
  const auto path =
      zip_with_pickle(dir.path() / "cut.bin", std::string("\x80\x02}q\x00(X\x05\0\0\0ab", 14));
  EXPECT_THROW(load_torch_state_dict(path), CheckpointError);
  testing::write_bytes(dir.path() / "other.bin",
                       std::string("\x80\x02\x8a\x0a", 4) + "lots of bytes");
  try {
    load_torch_state_dict(dir.path() / "other.bin");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("other.bin: not a torch.save file"), std::string::npos)
        << e.what();
  }
}

const fs::path kFixtures = fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures";

TEST_F(CheckpointTest, LegacyTorchSaveFormatLoadsLikeTheZipFormat) {
  // The tiny BertForPreTraining of hf_tiny_bert_b, re-saved by torch.save's pre-1.6 writer as
  // older hub checkpoints are (make_fixture.py beside it).
  const auto legacy = load_torch_state_dict(kFixtures / "legacy_torch_save" / "pytorch_model.bin");
  const auto zip = load_torch_state_dict(kFixtures / "hf_tiny_bert_b" / "models" / "pretraining" /
                                         "pytorch_model.bin");
  for (const auto& [key, tensor] : zip) {
    ASSERT_TRUE(legacy.count(key)) << key;
    EXPECT_TRUE(torch::equal(legacy.at(key), tensor)) << key;
  }
  // Tied weights share memory; a transposed view keeps its strides.
  EXPECT_EQ(legacy.at("cls.predictions.decoder.weight").data_ptr(),
            legacy.at("bert.embeddings.word_embeddings.weight").data_ptr());
  EXPECT_TRUE(
      torch::equal(legacy.at("extra.transposed_view"), zip.at("bert.pooler.dense.weight").t()));
}

TEST_F(CheckpointTest, LegacyTorchSaveCutAnywhereIsAClearError) {
  const std::string bytes = read_file(kFixtures / "legacy_torch_save" / "pytorch_model.bin");
  TempDir dir;
  for (const size_t keep :
       {17UL, 30UL, 200UL, 1000UL, bytes.size() / 2, bytes.size() - 100, bytes.size() - 1}) {
    testing::write_bytes(dir.path() / "cut.bin", bytes.substr(0, keep));
    try {
      load_torch_state_dict(dir.path() / "cut.bin");
      ADD_FAILURE() << "loaded a file cut at " << keep;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("cut.bin: "), std::string::npos) << e.what();
    }
  }
}

TEST_F(CheckpointTest, DomainBertLayoutLoadsAsBert) {
  // How BioBERT, SciBERT or ClinicalBERT ship: a config.json converted from Google's
  // bert_config.json (no model_type, no architectures), vocab.txt, and a legacy-format
  // pytorch_model.bin; no tokenizer_config.json, no safetensors.
  const auto source = kFixtures / "hf_tiny_bert_b" / "models" / "pretraining";
  auto config_json = nlohmann::json::parse(read_file(source / "config.json"));
  for (const char* key : {"model_type", "architectures", "transformers_version", "torch_dtype"})
    config_json.erase(key);
  TempDir dir;
  write_file_atomic(dir.path() / "config.json", config_json.dump(2));
  fs::copy_file(kFixtures / "legacy_torch_save" / "pytorch_model.bin",
                dir.path() / "pytorch_model.bin");
  const auto found = PretrainedDir::find(dir.path());
  EXPECT_EQ(found.format, WeightsFormat::kTorchBin);
  const auto config = BertConfig::from_file(found.config);
  EXPECT_EQ(config.family(), ModelFamily::kBert);

  BertForPreTraining model(config), reference(BertConfig::from_file(source / "config.json"));
  LoadOptions options;
  options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  options.strict = false;  // the fixture's extra view is reported, not loaded
  const auto report = load_state_dict(*model, read_weights(found.weights), "legacy", options);
  EXPECT_TRUE(report.missing.empty()) << report.summary();
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"extra.transposed_view"}));
  options.strict = true;
  load_state_dict(*reference, read_weights(source / "model.safetensors"), "safetensors", options);
  model->eval();
  reference->eval();
  const auto ids = torch::randint(5, config.vocab_size(), {2, 9});
  EXPECT_TRUE(torch::equal(model->forward(ids).prediction_logits,
                           reference->forward(ids).prediction_logits));
}

/// A pickle integer: BININT (4 bytes, signed) or LONG1 of 8 bytes.
std::string pickle_int(int64_t v) {
  const bool small = v >= INT32_MIN && v <= INT32_MAX;
  std::string out = small ? "J" : std::string("\x8a\x08", 2);
  for (int k = 0; k < (small ? 4 : 8); ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  return out;
}

/// A zip-format pytorch_model.bin holding {'w': _rebuild_tensor_v2(a float storage of `numel`
/// elements, offset, size, stride, False, None)}; the message of loading it ("(no error)"
/// if it loads).
std::string load_view(const fs::path& dir,
                      int64_t numel,
                      int64_t offset,
                      const std::vector<int64_t>& size,
                      const std::vector<int64_t>& stride) {
  const auto tuple = [](const std::vector<int64_t>& values) {
    std::string out = "(";
    for (const auto v : values) out += pickle_int(v);
    return out + "t";
  };
  const std::string pickle = std::string("\x80\x02}(X\x01\0\0\0w", 10) +
                             "ctorch._utils\n_rebuild_tensor_v2\n(" +
                             std::string("(X\x07\0\0\0storage", 13) + "ctorch\nFloatStorage\n" +
                             std::string(
                                 "X\x01\0\0\0"
                                 "0",
                                 6) +
                             std::string(
                                 "X\x03\0\0\0"
                                 "cpu",
                                 8) +
                             pickle_int(numel) + "tQ" + pickle_int(offset) + tuple(size) +
                             tuple(stride) + "\x89Nt" + "Ru.";
  const std::vector<float> data(static_cast<size_t>(numel), 1.0F);
  const auto path = zip_with_pickle(
      dir / "w.bin", pickle,
      {{"data/0",
        std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float))}});
  return testing::error_message([&] { load_torch_state_dict(path); });
}

// A tensor view must lie inside its storage: the last element it reaches below the storage's
// size, no negative size or stride, strides whose span overflows refused.
TEST_F(CheckpointTest, TensorViewsOutsideTheirStorageAreRefused) {
  TempDir dir;
  EXPECT_EQ(load_view(dir.path(), 4, 0, {2, 2}, {2, 1}), "(no error)");
  EXPECT_EQ(load_view(dir.path(), 4, 1, {3}, {1}), "(no error)");        // elements 1..3
  EXPECT_EQ(load_view(dir.path(), 4, 0, {2, 0}, {1, 1}), "(no error)");  // empty
  EXPECT_NE(
      load_view(dir.path(), 4, 1, {2, 2}, {2, 1}).find("tensor view lies outside its storage"),
      std::string::npos);
  EXPECT_NE(load_view(dir.path(), 4, 0, {5}, {1}).find("outside its storage"), std::string::npos);
  EXPECT_NE(load_view(dir.path(), 4, 3, {2}, {-1}).find("tensor with invalid size or stride"),
            std::string::npos);
  EXPECT_NE(load_view(dir.path(), 4, 0, {-1}, {1}).find("invalid size or stride"),
            std::string::npos);
  const int64_t big = int64_t{1} << 62;
  EXPECT_NE(load_view(dir.path(), 1, 0, {2, 2}, {big, big}).find("invalid size or stride"),
            std::string::npos);
}

// The legacy format's second pickle is its protocol version, 1001, and its third says the
// writer's byte order: another protocol or a big-endian writer is refused.
TEST_F(CheckpointTest, LegacyTorchSaveOfAnotherProtocolOrByteOrderIsRefused) {
  const std::string bytes = read_file(kFixtures / "legacy_torch_save" / "pytorch_model.bin");
  ASSERT_EQ(bytes.substr(15, 6), std::string("\x80\x02M\xe9\x03.", 6));        // BININT2 1001
  ASSERT_EQ(bytes.substr(58, 16), std::string("little_endianq\x02\x88", 16));  // True
  TempDir dir;
  const auto message = [&](size_t at, char value) {
    auto changed = bytes;
    changed[at] = value;
    testing::write_bytes(dir.path() / "old.bin", changed);
    return testing::error_message([&] { load_torch_state_dict(dir.path() / "old.bin"); });
  };
  const auto protocol = message(18, '\xe8');
  EXPECT_NE(protocol.find("legacy torch.save file with protocol 1000 (1001 expected)"),
            std::string::npos)
      << protocol;
  const auto order = message(73, '\x89');  // False
  EXPECT_NE(order.find("old.bin: written on a big-endian machine"), std::string::npos) << order;
}

TEST_F(CheckpointTest, JsonDepthIsCheckedOutsideStringsOnly) {
  EXPECT_EQ(json_depth_violation("[[1]]", 2), std::string_view::npos);
  EXPECT_EQ(json_depth_violation("[[[1]]]", 2), 2u);
  EXPECT_EQ(json_depth_violation(R"(["[[[[", "\"[[["])", 1), std::string_view::npos);
  EXPECT_EQ(json_depth_violation(R"({"a": {"b": [0]}})", 2), 12u);
  try {
    parse_json_limited(std::string(200, '[') + std::string(200, ']'));
    FAIL();
  } catch (const nlohmann::json::parse_error& e) {
    EXPECT_EQ(e.byte, 129u);
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos);
  }
  // A number out of a double's range is a parse error too (found by fuzz_safetensors: it
  // escaped as json::out_of_range and ended the process).
  EXPECT_THROW(parse_json_limited("[1" + std::string(400, '0') + "]"), nlohmann::json::parse_error);
  EXPECT_THROW(parse_json_limited("{\"a\": 1e999}"), nlohmann::json::parse_error);
  EXPECT_EQ(clip(std::string(300, 'x')), std::string(100, 'x') + "... (300 bytes)");
  EXPECT_EQ(clip("\u00e9\u00e9", 3), "\u00e9... (4 bytes)");  // not inside a character
}

TEST_F(CheckpointTest, MissingWeightsNameTheDirectory) {
  TempDir dir;
  testing::write_bytes(dir.path() / "config.json", "{}");
  try {
    PretrainedDir::find(dir.path());
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("no weights (looked for model.safetensors"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace bert

namespace bert {
namespace {

// remove_tree (checkpoint rotation, export): a nested tree goes, what a link in it points to
// stays, a missing path is no error, and an entry it cannot remove is named.
TEST(RemoveTree, RemovesANestedTreeButNotWhatItsLinksPointTo) {
  namespace fs = std::filesystem;
  testing::TempDir dir;
  const auto tree = dir.path() / "checkpoints" / "step-00000016";
  fs::create_directories(tree / "a" / "b");
  testing::write_bytes(tree / "model.safetensors", "x");
  testing::write_bytes(tree / "a" / "b" / "state.json", "{}");
  const auto outside = dir.path() / "kept";
  fs::create_directories(outside);
  testing::write_bytes(outside / "file", "y");
  fs::create_directory_symlink(outside, tree / "a" / "link");
  remove_tree(tree);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_TRUE(fs::exists(outside / "file"));
  EXPECT_TRUE(fs::is_directory(dir.path() / "checkpoints"));
  EXPECT_NO_THROW(remove_tree(tree));  // gone already
  testing::write_bytes(dir.path() / "single", "z");
  remove_tree(dir.path() / "single");
  EXPECT_FALSE(fs::exists(dir.path() / "single"));
  // Nobody removes procfs's entries, root included.
  const auto message = testing::error_message([] { remove_tree("/proc/self/status"); });
  EXPECT_NE(message.find("/proc/self/status: cannot remove"), std::string::npos) << message;
  std::error_code error;
  remove_tree("/proc/self/status", error);
  EXPECT_TRUE(error);
}

// write_file_atomic: the new bytes replace the file whole, no temporary file stays, and the
// file's mode is any new file's, the umask's (mkstemp's temporary file is private).
TEST(WriteFileAtomic, ReplacesTheFileWithTheModeOfANewFile) {
  namespace fs = std::filesystem;
  testing::TempDir dir;
  const auto file = dir.path() / "sub" / "result.json";
  const mode_t before = ::umask(022);
  write_file_atomic(file, "first");
  EXPECT_EQ(fs::status(file).permissions(), static_cast<fs::perms>(0644));
  ::umask(027);
  write_file_atomic(file, "second, longer");
  EXPECT_EQ(fs::status(file).permissions(), static_cast<fs::perms>(0640));
  ::umask(before);
  EXPECT_EQ(read_file(file), "second, longer");
  EXPECT_EQ(std::distance(fs::directory_iterator(file.parent_path()), fs::directory_iterator()), 1);
}

// foreign_entries names the first three entries it is given, sorted, and counts the rest.
TEST(ForeignEntries, NamesThreeSortedAndCountsTheRest) {
  testing::TempDir dir;
  for (const auto* name : {"e.bin", "stats.json", "b.txt", "d", "a.txt", "c.txt"})
    testing::write_bytes(dir.path() / name, "x");
  const auto not_stats = [](const std::string& name) { return name != "stats.json"; };
  EXPECT_EQ(foreign_entries(dir.path(), not_stats), "a.txt, b.txt, c.txt and 2 more");
  EXPECT_EQ(foreign_entries(dir.path(), [](const std::string& name) { return name < "c"; }),
            "a.txt, b.txt");
  EXPECT_EQ(foreign_entries(dir.path(), [](const std::string&) { return false; }), "");
}

TEST(GrowVocabulary, NewRowsAreTheMeanNewBiasZeroOldUnchanged) {
  TensorMap weights;
  weights["bert.embeddings.word_embeddings.weight"] = torch::arange(12, torch::kFloat).view({4, 3});
  weights["cls.predictions.bias"] = torch::ones({4});
  weights["bert.embeddings.position_embeddings.weight"] = torch::zeros({8, 3});
  const auto old_embedding = weights["bert.embeddings.word_embeddings.weight"].clone();
  grow_vocabulary(weights, 4, 6);
  const auto& e = weights["bert.embeddings.word_embeddings.weight"];
  ASSERT_EQ(e.sizes(), torch::IntArrayRef({6, 3}));
  EXPECT_TRUE(torch::equal(e.narrow(0, 0, 4), old_embedding));
  EXPECT_TRUE(torch::allclose(e[4], old_embedding.mean(0)));
  EXPECT_TRUE(torch::allclose(e[5], old_embedding.mean(0)));
  EXPECT_TRUE(
      torch::equal(weights["cls.predictions.bias"], torch::tensor({1.f, 1.f, 1.f, 1.f, 0.f, 0.f})));
  EXPECT_EQ(weights["bert.embeddings.position_embeddings.weight"].size(0),
            8);  // not vocabulary-sized
  EXPECT_THROW(grow_vocabulary(weights, 6, 5), CheckpointError);
  EXPECT_THROW(grow_vocabulary(weights, 4, 8), CheckpointError);  // rows do not match old_size
}

TEST(GrowVocabulary, EveryFamilysMaskedLmHeadGrows) {
  for (const auto& [embedding, biases] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"roberta.embeddings.word_embeddings.weight", {"lm_head.bias", "lm_head.decoder.bias"}},
           {"distilbert.embeddings.word_embeddings.weight", {"vocab_projector.bias"}},
           {"electra.embeddings.word_embeddings.weight", {"generator_lm_head.bias"}}}) {
    TensorMap weights;
    weights[embedding] = torch::ones({4, 3});
    for (const auto& bias : biases) weights[bias] = torch::ones({4});
    grow_vocabulary(weights, 4, 5);
    EXPECT_EQ(weights[embedding].size(0), 5) << embedding;
    for (const auto& bias : biases)
      EXPECT_TRUE(torch::equal(weights[bias], torch::tensor({1.f, 1.f, 1.f, 1.f, 0.f}))) << bias;
  }
}

}  // namespace
}  // namespace bert
