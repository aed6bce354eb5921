#include "recipes/runner/embed.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bert/checkpoint/safetensors.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/model/linear.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// tests/fixtures/hf_embed: a tiny BERT (head size 64), texts written for it, and what HF's
/// BertTokenizer + AutoModel + pooling give for them (make_fixture.py beside it).
fs::path fixture_dir() {
  return fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_embed";
}

struct Fixture {
  std::vector<std::string> texts;
  int64_t max_length = 0;
  TensorMap expected;
};
Fixture load_fixture() {
  Fixture f;
  const auto j = json::parse(read_file(fixture_dir() / "texts.json"));
  f.texts = j["texts"].get<std::vector<std::string>>();
  f.max_length = j["max_length"];
  f.expected = SafetensorsReader(fixture_dir() / "expected.safetensors").read_all();
  return f;
}

class EmbedTest : public testing::SeededTest {
 protected:
  /// `bertft embed` of the fixture's texts, one per line (ids = line numbers), mean pooling,
  /// normalised, into index.safetensors; `extra` options are added.
  testing::BertftRun embed_fixture_texts(const Fixture& f, const std::string& extra = "") {
    std::string lines;
    for (const auto& t : f.texts) lines += t + "\n";
    testing::write_bytes(dir_.path() / "texts.txt", lines);
    return testing::run_bertft(
        "embed --model " + fixture_dir().string() + " --data " +
            (dir_.path() / "texts.txt").string() + " --pooling mean --normalize --max-seq-length " +
            std::to_string(f.max_length) + " " + extra + " --out " + index().string(),
        dir_.path() / "embed.log");
  }
  std::filesystem::path index() const { return dir_.path() / "index.safetensors"; }

  testing::TempDir dir_;
};

TEST_F(EmbedTest, TokenIdsEqualHfs) {
  const auto f = load_fixture();
  const SentenceEncoder encoder(fixture_dir());
  const auto ids = f.expected.at("input_ids");
  const auto mask = f.expected.at("attention_mask");
  for (size_t i = 0; i < f.texts.size(); ++i) {
    tok::EncodeOptions options;
    options.max_length = f.max_length;
    const auto e = encoder.tokenizer().encode(f.texts[i], std::nullopt, options);
    const auto row = static_cast<int64_t>(i);
    const auto n = mask[row].sum().item<int64_t>();
    EXPECT_TRUE(torch::equal(torch::tensor(e.ids, torch::kLong), ids[row].slice(0, 0, n)))
        << f.texts[i];
  }
}

TEST_F(EmbedTest, VectorsEqualHfsForEveryPooling) {
  const auto f = load_fixture();
  const SentenceEncoder encoder(fixture_dir());
  for (const auto pooling : {Pooling::kCls, Pooling::kMean, Pooling::kMax})
    for (const bool normalize : {false, true}) {
      EmbedOptions options;
      options.pooling = pooling;
      options.normalize = normalize;
      options.max_seq_length = f.max_length;
      options.batch_size = 3;  // several batches, each padded to its own longest text
      const auto key = std::string(enum_name(pooling)) + (normalize ? "_normalized" : "");
      const auto& expected = f.expected.at(key);
      const auto from_text = encoder.encode(f.texts, options);
      EXPECT_LT(testing::max_abs_diff(from_text, expected), 1e-5) << key << " from text";
      if (pooling == Pooling::kCls && !normalize) {  // longer than the model's 64 positions: cut
        auto longer = f.texts;
        longer.push_back(std::string(200, 'a'));
        for (int i = 0; i < 70; ++i) longer.back() += " blue";
        options.max_seq_length = 512;
        EXPECT_EQ(encoder.encode(longer, options).size(0), static_cast<int64_t>(longer.size()));
      }
      const auto from_ids =
          encoder.encode_ids(f.expected.at("input_ids"), f.expected.at("attention_mask"), options);
      EXPECT_LT(testing::max_abs_diff(from_ids, expected), 1e-5) << key << " from HF's ids";
    }
}

TEST_F(EmbedTest, FilesRoundTripWithTheirIds) {
  EmbeddingFile file;
  file.vectors = torch::randn({5, 7});
  file.ids = {"a", "b", "c/1", "d e", "\"q\""};
  file.info = {{"pooling", "mean"}, {"model", "/m"}};
  write_embeddings(dir_.path() / "e.safetensors", file);
  const auto st = read_embeddings(dir_.path() / "e.safetensors");
  EXPECT_TRUE(torch::equal(st.vectors, file.vectors));
  EXPECT_EQ(st.ids, file.ids);
  EXPECT_EQ(st.info, file.info);
  write_embeddings(dir_.path() / "e.npy", file);
  const auto npy = read_embeddings(dir_.path() / "e.npy");
  EXPECT_TRUE(torch::equal(npy.vectors, file.vectors));
  EXPECT_EQ(npy.ids, file.ids);
  EXPECT_EQ(npy.info, file.info);  // from e.npy.info.json
  // A record of other vectors (the .npy rewritten by another program) is refused, naming both.
  EmbeddingFile other = file;
  other.vectors = torch::randn({6, 7});
  other.ids.push_back("f");
  const auto info = read_file(dir_.path() / "e.npy.info.json");
  write_embeddings(dir_.path() / "e.npy", other);
  testing::write_bytes(dir_.path() / "e.npy.info.json", info);
  const auto stale = testing::error_message([&] { read_embeddings(dir_.path() / "e.npy"); });
  EXPECT_NE(stale.find("e.npy.info.json: records 5 x 7 vectors but " +
                       (dir_.path() / "e.npy").string() + " holds 6 x 7"),
            std::string::npos)
      << stale;
  // One written by hand for a .npy from elsewhere may give the pooling alone.
  testing::write_bytes(dir_.path() / "e.npy.info.json", R"({"pooling": "mean"})");
  EXPECT_EQ(read_embeddings(dir_.path() / "e.npy").info, json({{"pooling", "mean"}}));
  write_embeddings(dir_.path() / "e.npy", file);
  EXPECT_EQ(read_file(dir_.path() / "e.npy").substr(0, 6), "\x93NUMPY");
  EXPECT_EQ((read_file(dir_.path() / "e.npy").size() - 5 * 7 * 4) % 64, 0u);  // header aligned
  write_embeddings(dir_.path() / "e.jsonl", file);
  std::ifstream in(dir_.path() / "e.jsonl");
  std::string line;
  std::getline(in, line);
  const auto first = json::parse(line);
  EXPECT_EQ(first["id"], "a");
  EXPECT_NEAR(first["embedding"][6].get<double>(), file.vectors[0][6].item<double>(), 1e-6);
  EXPECT_THROW(write_embeddings(dir_.path() / "e.csv", file), DataError);
  // The .jsonl is not read back as an index: an error naming it, not a misread header.
  const auto jsonl = testing::error_message([&] { read_embeddings(dir_.path() / "e.jsonl"); });
  EXPECT_NE(jsonl.find("e.jsonl: embeddings are read from a .safetensors or .npy file"),
            std::string::npos)
      << jsonl;
}

TEST_F(EmbedTest, MalformedFilesAreNamed) {
  EmbeddingFile file;
  file.vectors = torch::randn({3, 4});
  file.ids = {"1", "2", "3"};
  write_embeddings(dir_.path() / "e.npy", file);
  const auto bytes = read_file(dir_.path() / "e.npy");
  testing::write_bytes(dir_.path() / "cut.npy", bytes.substr(0, bytes.size() - 4));
  const auto message = testing::error_message([&] { read_embeddings(dir_.path() / "cut.npy"); });
  EXPECT_NE(message.find("cut.npy"), std::string::npos) << message;
  EXPECT_NE(message.find("data bytes"), std::string::npos) << message;
  save_safetensors(dir_.path() / "other.safetensors", {{"weights", torch::ones({2})}});
  EXPECT_THROW(read_embeddings(dir_.path() / "other.safetensors"), CheckpointError);

  // A shape whose byte size wraps around 64 bits is refused by name, not allocated.
  std::string huge = bytes;
  const auto at = huge.find("'shape': (3, 4)");
  ASSERT_NE(at, std::string::npos);
  huge.replace(at, 15, "'shape': (4611686018427387904, 4)");
  testing::write_bytes(dir_.path() / "huge.npy", huge);
  const auto too_large = testing::error_message([&] { read_npy(dir_.path() / "huge.npy"); });
  EXPECT_NE(too_large.find("too large"), std::string::npos) << too_large;
  // An empty index (0 rows) reads back empty.
  file.vectors = torch::zeros({0, 4});
  file.ids.clear();
  write_embeddings(dir_.path() / "empty.npy", file);
  EXPECT_EQ(read_npy(dir_.path() / "empty.npy").sizes(), torch::IntArrayRef({0, 4}));
}

TEST_F(EmbedTest, TopKEqualsAFullSort) {
  const auto index = torch::randn({1000, 16});
  const auto queries = torch::randn({7, 16});
  const auto [scores, rows] = cosine_top_k(index, queries, 10, /*unit_index=*/false, /*block=*/64);
  namespace F = torch::nn::functional;
  const auto unit = [](const torch::Tensor& x) {
    return F::normalize(x, F::NormalizeFuncOptions().dim(1));
  };
  const auto all = torch::matmul(unit(queries), unit(index).t());
  const auto [want_scores, want_rows] = all.topk(10, 1);
  EXPECT_TRUE(torch::equal(rows, want_rows));
  EXPECT_LT(testing::max_abs_diff(scores, want_scores), 1e-6);
  const auto [unit_scores, unit_rows] = cosine_top_k(unit(index), queries, 10, true, 100);
  EXPECT_TRUE(torch::equal(unit_rows, want_rows));
  // k larger than the index: every row, best first.
  const auto [s, r] = cosine_top_k(index.slice(0, 0, 3), queries, 10);
  EXPECT_EQ(r.size(1), 3);
  // Blocks large enough for oneDNN's GEMM where bert::Linear's fp32 GEMMs go (8 x 4096 x 256).
  const auto wide = torch::randn({4096, 256}), wide_queries = torch::randn({8, 256});
  const auto [wide_scores, wide_rows] = cosine_top_k(wide, wide_queries, 10, false, 4096);
  const auto [want_wide, want_wide_rows] =
      torch::matmul(unit(wide_queries), unit(wide).t()).topk(10, 1);
  EXPECT_TRUE(torch::equal(wide_rows, want_wide_rows));
  EXPECT_LT(testing::max_abs_diff(wide_scores, want_wide), 1e-5);
}

TEST_F(EmbedTest, ReadsLinesAndSquadParagraphs) {
  testing::write_bytes(dir_.path() / "t.txt", "first\n\n  \nsecond line\nthird");
  data::DataSpec spec;
  spec.path = dir_.path() / "t.txt";
  const auto lines = read_texts(spec);
  EXPECT_EQ(lines.texts, (std::vector<std::string>{"first", "second line", "third"}));
  EXPECT_EQ(lines.ids, (std::vector<std::string>{"1", "4", "5"}));
  spec.limit = 2;  // the first two texts; blank lines do not count
  EXPECT_EQ(read_texts(spec).ids, (std::vector<std::string>{"1", "4"}));
  spec.limit = 0;
  // A table's text pair is embedded as one text, the two joined by a space.
  testing::write_bytes(dir_.path() / "pairs.tsv", "sentence1\tsentence2\nA cat.\tA dog.\n");
  spec.path = dir_.path() / "pairs.tsv";
  EXPECT_EQ(read_texts(spec).texts, (std::vector<std::string>{"A cat. A dog."}));
  const json squad = {{"version", "1.1"},
                      {"data",
                       {{{"title", "T"},
                         {"paragraphs",
                          {{{"context", "Alpha beta."},
                            {"qas",
                             {{{"id", "q1"},
                               {"question", "Which?"},
                               {"answers", {{{"text", "beta"}, {"answer_start", 6}}}}},
                              {{"id", "q2"},
                               {"question", "What?"},
                               {"answers", {{{"text", "Alpha"}, {"answer_start", 0}}}}}}}},
                           {{"context", "Gamma."},
                            {"qas",
                             {{{"id", "q3"},
                               {"question", "Who?"},
                               {"answers", {{{"text", "Gamma"}, {"answer_start", 0}}}}}}}}}}}}}};
  testing::write_bytes(dir_.path() / "s.json", squad.dump());
  spec.path = dir_.path() / "s.json";
  const auto contexts = read_texts(spec, "context");
  EXPECT_EQ(contexts.texts, (std::vector<std::string>{"Alpha beta.", "Gamma."}));
  EXPECT_EQ(contexts.ids, (std::vector<std::string>{"T/0", "T/1"}));
  const auto questions = read_texts(spec, "question");
  EXPECT_EQ(questions.ids, (std::vector<std::string>{"q1", "q2", "q3"}));
  EXPECT_THROW(read_texts(spec, "answer"), ConfigError);
}

TEST_F(EmbedTest, CommandLineEmbedsAndFindsEachTextFirst) {
  const auto f = load_fixture();
  const auto embed = embed_fixture_texts(f);
  ASSERT_EQ(embed.code, 0) << embed.output;
  const auto index = this->index();
  const auto file = read_embeddings(index);
  EXPECT_LT(testing::max_abs_diff(file.vectors, f.expected.at("mean_normalized")), 1e-5);
  // A blank line of the queries file, or one of spaces, is no query.
  testing::write_bytes(dir_.path() / "queries.txt", f.texts[1] + "\n\n \t\n" + f.texts[4] + "\n");
  const auto similar =
      testing::run_bertft("similar --index " + index.string() + " --queries " +
                              (dir_.path() / "queries.txt").string() + " --top-k 3",
                          dir_.path() / "similar.log");
  ASSERT_EQ(similar.code, 0) << similar.output;
  const auto hits = testing::json_lines(similar.output);
  ASSERT_EQ(hits.size(), 2u) << similar.output;
  EXPECT_EQ(hits[0]["hits"][0]["id"], "2");  // line numbers are the ids
  EXPECT_EQ(hits[1]["hits"][0]["id"], "5");
  EXPECT_NEAR(hits[0]["hits"][0]["score"].get<double>(), 1.0, 1e-5);
  EXPECT_EQ(hits[0]["hits"].size(), 3u);
  const auto bad =
      testing::run_bertft("similar --index " + index.string(), dir_.path() / "bad.log");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--query"), std::string::npos) << bad.output;
  // Queries that are not UTF-8: the option, the file's line and column, or stdin's line.
  const auto not_utf8 = [&](const std::string& args, const std::string& message,
                            const fs::path& input) {
    const auto run = testing::run_bertft("similar --index " + index.string() + " " + args,
                                         dir_.path() / "utf8.log", "", input);
    EXPECT_EQ(run.code, 1) << args << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << args << "\n" << run.output;
  };
  not_utf8("--query 'ab\xFF'", "--query: invalid UTF-8 at byte 2 (0xFF)", "/dev/null");
  const auto bad_queries = dir_.path() / "bad_queries.txt";
  testing::write_bytes(bad_queries, f.texts[1] + "\nx\xFF\n");
  not_utf8("--queries " + bad_queries.string(),
           bad_queries.string() + ":2:2: invalid UTF-8 (byte 0xFF)", "/dev/null");
  not_utf8("--queries -", "<stdin>:2: invalid UTF-8 at byte 1 (0xFF)", bad_queries);
  // A data file without a text is a data error, and nothing is written.
  testing::write_bytes(dir_.path() / "blank.txt", "\n\n");
  const auto empty = testing::run_bertft("embed --model " + fixture_dir().string() + " --data " +
                                             (dir_.path() / "blank.txt").string() + " --out " +
                                             (dir_.path() / "empty.npy").string(),
                                         dir_.path() / "empty.log");
  EXPECT_EQ(empty.code, 1) << empty.output;
  EXPECT_NE(empty.output.find("blank.txt: no texts to embed"), std::string::npos) << empty.output;
  EXPECT_FALSE(fs::exists(dir_.path() / "empty.npy"));
  // Texts that are not UTF-8: the file, line and column.
  testing::write_bytes(dir_.path() / "bad.txt", "fine\nx\xFF\n");
  const auto bad_texts = testing::run_bertft("embed --model " + fixture_dir().string() +
                                                 " --data " + (dir_.path() / "bad.txt").string() +
                                                 " --out " + (dir_.path() / "bad.npy").string(),
                                             dir_.path() / "bad_texts.log");
  EXPECT_EQ(bad_texts.code, 1) << bad_texts.output;
  EXPECT_NE(bad_texts.output.find("bad.txt:2:2: invalid UTF-8 (byte 0xFF)"), std::string::npos)
      << bad_texts.output;
  // Queries by another --model must be as wide as the index's vectors (RoBERTa's 16 against 128).
  const auto roberta =
      fs::path(BERTFT_SOURCE_DIR) / "tests/fixtures/hf_families/roberta/models/base";
  const auto narrow = testing::run_bertft(
      "similar --index " + index.string() + " --query x --model " + roberta.string(),
      dir_.path() / "narrow.log");
  EXPECT_EQ(narrow.code, 2) << narrow.output;
  EXPECT_NE(narrow.output.find(index.string() + ": vectors of width 128 but " + roberta.string() +
                               " encodes 16"),
            std::string::npos)
      << narrow.output;
}

// A .npy index is searched with queries pooled as its vectors were: its .info.json says how, and
// without it (a .npy from elsewhere) --pooling must. Before, such an index's queries were
// cls-pooled whatever its vectors were, and a text did not find itself first.
TEST_F(EmbedTest, NpyIndexesPoolTheirQueriesAsTheirVectors) {
  const auto f = load_fixture();
  const auto npy = dir_.path() / "index.npy";
  std::string lines;
  for (const auto& t : f.texts) lines += t + "\n";
  testing::write_bytes(dir_.path() / "texts.txt", lines);
  const auto embed = testing::run_bertft("embed --model " + fixture_dir().string() + " --data " +
                                             (dir_.path() / "texts.txt").string() +
                                             " --pooling mean --out " + npy.string(),
                                         dir_.path() / "embed.log");
  ASSERT_EQ(embed.code, 0) << embed.output;
  EXPECT_EQ(read_embeddings(npy).info.value("pooling", ""), "mean");
  const auto search = [&](const std::string& extra, const fs::path& index) {
    return testing::run_bertft("similar --index " + index.string() + " --model " +
                                   fixture_dir().string() + " --query '" + f.texts[3] + "' " +
                                   extra,
                               dir_.path() / "similar.log");
  };
  const auto expect_first = [&](const testing::BertftRun& run) {
    ASSERT_EQ(run.code, 0) << run.output;
    const auto hits = testing::json_lines(run.output);
    ASSERT_EQ(hits.size(), 1u) << run.output;
    EXPECT_EQ(hits[0]["hits"][0]["id"], "4") << run.output;  // the query's own line
    EXPECT_NEAR(hits[0]["hits"][0]["score"].get<double>(), 1.0, 1e-5) << run.output;
  };
  expect_first(search("", npy));
  const auto other = search("--pooling cls", npy);
  EXPECT_EQ(other.code, 2) << other.output;
  EXPECT_NE(other.output.find("--pooling cls: " + npy.string() +
                              " holds mean-pooled vectors, and queries are pooled as its "
                              "vectors were"),
            std::string::npos)
      << other.output;
  fs::remove(npy.string() + ".info.json");
  const auto unknown = search("", npy);
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find(npy.string() +
                                ": does not record how its vectors were pooled (a .npy without "
                                "the .info.json bertft embed writes beside it): pass --pooling"),
            std::string::npos)
      << unknown.output;
  expect_first(search("--pooling mean", npy));
  // Nor its length: queries are cut at --max-seq-length (default 128) as its texts were.
  const auto cut =
      testing::run_bertft("embed --model " + fixture_dir().string() + " --data " +
                              (dir_.path() / "texts.txt").string() +
                              " --pooling mean --max-seq-length 4 --out " + npy.string(),
                          dir_.path() / "embed.log");
  ASSERT_EQ(cut.code, 0) << cut.output;
  expect_first(search("", npy));  // the record says 4
  fs::remove(npy.string() + ".info.json");
  const auto longer = search("--pooling mean", npy);
  ASSERT_EQ(longer.code, 0) << longer.output;
  EXPECT_LT(testing::json_lines(longer.output)[0]["hits"][0]["score"].get<double>(), 1 - 1e-3)
      << longer.output;
  expect_first(search("--pooling mean --max-seq-length 4", npy));
}

// Encoders without a pooler (ELECTRA, DistilBERT) embed too: a pooler is built only where the
// weights hold one (the family fixtures' base models, with a made-up 64-entry vocab.txt).
TEST_F(EmbedTest, EncodersWithoutAPoolerEmbed) {
  for (const char* family : {"electra", "distilbert"}) {
    const auto model = dir_.path() / family;
    fs::copy(fs::path(BERTFT_SOURCE_DIR) / "tests/fixtures/hf_families" / family / "models/base",
             model);
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 64; ++i) vocab += "w" + std::to_string(i) + "\n";
    testing::write_bytes(model / "vocab.txt", vocab);
    const SentenceEncoder encoder(model);
    const auto vectors = encoder.encode({"w7 w9 w12", "w5"}, EmbedOptions{});
    EXPECT_EQ(vectors.sizes(), torch::IntArrayRef({2, 16})) << family;
    EXPECT_TRUE(torch::isfinite(vectors).all().item<bool>()) << family;
  }
}

// --out never replaces --data (a .jsonl of texts and its embeddings look alike), nor does the
// ids file beside a .npy; refused before the model or the texts are read.
TEST_F(EmbedTest, TheOutputNeverReplacesTheInput) {
  const auto texts = dir_.path() / "texts.jsonl";
  const std::string content = "{\"text\": \"a text\"}\n";
  testing::write_bytes(texts, content);
  const auto run = [&](const std::string& data, const std::string& out) {
    return testing::run_bertft(
        "embed --model " + dir_.path().string() + " --data " + data + " --out " + out,
        dir_.path() / "same.log");
  };
  const auto same = run(texts.string(), (dir_.path() / "." / "texts.jsonl").string());
  EXPECT_EQ(same.code, 2) << same.output;
  EXPECT_NE(same.output.find("texts.jsonl: is the input --data (" + texts.string() +
                             "); writing there would replace it"),
            std::string::npos)
      << same.output;
  const auto ids = dir_.path() / "vectors.npy.ids.txt";
  testing::write_bytes(ids, "a text\n");
  const auto beside = run(ids.string(), (dir_.path() / "vectors.npy").string());
  EXPECT_EQ(beside.code, 2) << beside.output;
  EXPECT_NE(beside.output.find("--out's ids"), std::string::npos) << beside.output;
  EXPECT_EQ(read_file(texts), content);
  EXPECT_EQ(read_file(ids), "a text\n");
}

// --precision int8 (dynamic int8 projections) and bf16: close to the fp32 vectors, and an index
// made in int8 has its queries encoded in int8 too (the precision is kept in the file).
TEST_F(EmbedTest, Int8AndBf16VectorsStayCloseAndSimilarUsesTheIndexPrecision) {
  const auto f = load_fixture();
  EmbedOptions options;
  options.pooling = Pooling::kMean;
  options.normalize = true;
  options.max_seq_length = f.max_length;
  const auto& fp32 = f.expected.at("mean_normalized");
  for (const std::string precision : {"bf16", "int8"}) {
    if (precision == "int8" && int8_engine().empty()) continue;
    const SentenceEncoder encoder(fixture_dir(), torch::kCPU, precision);
    const auto vectors = encoder.encode(f.texts, options);
    const auto cosine = (vectors * fp32).sum(1);  // unit vectors
    EXPECT_GT(cosine.min().item<double>(), 0.99) << precision;
    EXPECT_GT(testing::max_abs_diff(vectors, fp32), 1e-7) << precision << " ran as fp32";
  }
  EXPECT_THROW(SentenceEncoder(fixture_dir(), torch::kCPU, "int4"), ConfigError);
  if (int8_engine().empty()) GTEST_SKIP() << "no quantized engine in this LibTorch";
  const auto embed = embed_fixture_texts(f, "--precision int8");
  ASSERT_EQ(embed.code, 0) << embed.output;
  const auto index = this->index();
  EXPECT_EQ(read_embeddings(index).info.value("precision", ""), "int8");
  testing::write_bytes(dir_.path() / "queries.txt", f.texts[2] + "\n");
  const auto similar =
      testing::run_bertft("similar --device cpu --index " + index.string() + " --queries " +
                              (dir_.path() / "queries.txt").string(),  // int8 runs on the CPU only
                          dir_.path() / "similar.log");
  ASSERT_EQ(similar.code, 0) << similar.output;
  const auto hits = testing::json_lines(similar.output);
  ASSERT_EQ(hits.size(), 1u) << similar.output;
  EXPECT_EQ(hits[0]["hits"][0]["id"], "3");
  // Int8 on both sides (activation scales are per batch, so not bit for bit): near cosine 1.
  EXPECT_GT(hits[0]["hits"][0]["score"].get<double>(), 0.99);
  if (torch::cuda::is_available()) {  // the index's precision is why CUDA cannot encode them
    const auto on_gpu = testing::run_bertft(
        "similar --device cuda --index " + index.string() + " --query x", dir_.path() / "gpu.log");
    EXPECT_EQ(on_gpu.code, 2) << on_gpu.output;  // a configuration error
    EXPECT_NE(on_gpu.output.find(index.string() + ": made with --precision int8"),
              std::string::npos)
        << on_gpu.output;
  }
}

}  // namespace
}  // namespace bert::recipes
