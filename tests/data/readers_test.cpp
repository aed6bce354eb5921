// Readers parse the real datasets in ../shared/data with the published counts, and stop on
// malformed input with file:line and what was expected.
#include "data/readers.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "data/table.h"
#include "data/text_file.h"
#include "tasks/metrics/span_f1.h"
#include "tests/support/test_support.h"

namespace bert::data {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
  return testing::shared_dir() / "data";
}

DataSpec spec_of(const fs::path& path) {
  DataSpec s;
  s.path = path;
  return s;
}

std::map<std::string, int> label_counts(const std::vector<TextExample>& examples) {
  std::map<std::string, int> counts;
  for (const auto& e : examples)
    if (e.label) ++counts[*e.label];
  return counts;
}

struct GlueCase {
  const char* dir;
  size_t train, dev, test;
  bool pair;
  const char* label;  // a label with its train count
  int label_count;
};

class GlueReaderTest : public ::testing::TestWithParam<GlueCase> {};

TEST_P(GlueReaderTest, ReadsEverySplitWithOfficialCounts) {
  const auto& c = GetParam();
  const auto dir = data_dir() / "glue" / c.dir;
  BERTFT_REQUIRE_PATH(dir / "train.tsv");
  const auto train = read_text_examples(spec_of(dir / "train.tsv"));
  const auto dev = read_text_examples(spec_of(dir / "dev.tsv"));
  const auto test = read_text_examples(spec_of(dir / "test.tsv"));
  EXPECT_EQ(train.size(), c.train);
  EXPECT_EQ(dev.size(), c.dev);
  EXPECT_EQ(test.size(), c.test);
  for (const auto* split : {&train, &dev}) {
    for (const auto& e : *split) {
      ASSERT_TRUE(e.label.has_value()) << e.where;
      ASSERT_FALSE(e.text_a.empty()) << e.where;
      ASSERT_EQ(e.text_b.has_value(), c.pair) << e.where;
    }
  }
  for (const auto& e : test) ASSERT_FALSE(e.label.has_value()) << e.where;
  if (c.label_count >= 0) {
    EXPECT_EQ(label_counts(train)[c.label], c.label_count);
  }
}

INSTANTIATE_TEST_SUITE_P(Glue,
                         GlueReaderTest,
                         ::testing::Values(GlueCase{"CoLA", 8551, 1043, 1063, false, "1", 6023},
                                           GlueCase{"SST-2", 67349, 872, 1821, false, "1", 37569},
                                           GlueCase{"MRPC", 3668, 408, 1725, true, "1", 2474},
                                           GlueCase{"STS-B", 5749, 1500, 1379, true, "5.000", -1}),
                         [](const auto& info) {
                           return std::string(info.param.dir == std::string("SST-2") ? "SST2"
                                              : info.param.dir == std::string("STS-B")
                                                  ? "STSB"
                                                  : info.param.dir);
                         });

TEST(GlueReader, KeepsQuotesAndFirstRowsExactly) {
  const auto dir = data_dir() / "glue";
  BERTFT_REQUIRE_PATH(dir / "MRPC" / "train.tsv");
  const auto mrpc = read_text_examples(spec_of(dir / "MRPC" / "dev.tsv"));
  // GLUE TSVs have no quoting: a leading '"' is text (the BOM of the header is stripped).
  EXPECT_EQ(mrpc[0].text_b.value().substr(0, 5), "\" The");
  EXPECT_EQ(mrpc[0].label.value(), "1");
  EXPECT_EQ(mrpc[0].where, (dir / "MRPC" / "dev.tsv").string() + ":2");
  const auto cola = read_text_examples(spec_of(dir / "CoLA" / "dev.tsv"));
  EXPECT_EQ(cola[0].text_a, "The sailors rode the breeze clear of the rocks.");
  const auto stsb = read_text_examples(spec_of(dir / "STS-B" / "dev.tsv"));
  EXPECT_EQ(stsb[1].label.value(), "4.750");
}

TEST(GlueReader, PresetsForTheTasksNotInSharedData) {
  // Header layouts of the GLUE files for QQP, MNLI (train and dev differ), QNLI and RTE.
  testing::TempDir dir;
  const auto write = [&](const std::string& task, const std::string& text) {
    fs::create_directories(dir.path() / task);
    testing::write_bytes(dir.path() / task / "dev.tsv", text);
    return dir.path() / task / "dev.tsv";
  };
  const auto qqp =
      read_text_examples(spec_of(write("QQP",
                                       "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                                       "7\t1\t2\tHow?\tWhy?\t0\n")));
  EXPECT_EQ(qqp[0].id, "7");
  EXPECT_EQ(qqp[0].text_b.value(), "Why?");
  EXPECT_EQ(qqp[0].label.value(), "0");
  const auto mnli = read_text_examples(spec_of(write(
      "MNLI",
      "index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2\tlabel1\tlabel2\t"
      "label3\tlabel4\tlabel5\tgold_label\n"
      "0\t1\t1e\tfiction\tx\tx\tx\tx\tA man sleeps.\tA man rests.\tentailment\tentailment\t"
      "neutral\tentailment\tentailment\tentailment\n")));
  EXPECT_EQ(mnli[0].text_a, "A man sleeps.");
  EXPECT_EQ(mnli[0].label.value(), "entailment");
  const auto qnli = read_text_examples(
      spec_of(write("QNLI", "index\tquestion\tsentence\tlabel\n0\tQ?\tS.\tnot_entailment\n")));
  EXPECT_EQ(qnli[0].label.value(), "not_entailment");
  const auto rte = read_text_examples(
      spec_of(write("RTE", "index\tsentence1\tsentence2\tlabel\n3\tA.\tB.\tentailment\n")));
  EXPECT_EQ(rte[0].id, "3");
  DataSpec named =
      spec_of(write("renamed", "index\tsentence1\tsentence2\tlabel\n3\tA.\tB.\tentailment\n"));
  named.format = DataFormat::kGlue;
  EXPECT_NE(testing::error_message([&] {
              read_text_examples(named);
            }).find("'renamed' is not a GLUE task"),
            std::string::npos);
  named.glue_task = "wnli";
  EXPECT_EQ(read_text_examples(named).size(), 1u);
}

TEST(SquadReader, ReadsV11AndV20WithOfficialCounts) {
  const auto dir = data_dir() / "squad";
  BERTFT_REQUIRE_PATH(dir / "dev-v1.1.json");
  std::string version;
  const auto v1 = read_squad(spec_of(dir / "dev-v1.1.json"), &version);
  EXPECT_EQ(version, "1.1");
  EXPECT_EQ(v1.size(), 10570u);
  size_t answers = 0;
  for (const auto& e : v1) {
    answers += e.answers.size();
    EXPECT_FALSE(e.is_impossible);
    for (const auto& a : e.answers)  // byte offsets agree with the character offsets
      ASSERT_EQ(e.context.compare(static_cast<size_t>(a.byte_start), a.text.size(), a.text), 0)
          << e.where;
  }
  EXPECT_EQ(answers, 34726u);
  const auto v2 = read_squad(spec_of(dir / "dev-v2.0.json"), &version);
  EXPECT_EQ(version, "v2.0");
  EXPECT_EQ(v2.size(), 11873u);
  size_t impossible = 0, answers2 = 0;
  for (const auto& e : v2) {
    impossible += e.is_impossible;
    answers2 += e.answers.size();
  }
  EXPECT_EQ(impossible, 5945u);
  EXPECT_EQ(answers2, 20302u);
}

TEST(ConllReader, ReadsCoNLL2003WithPublishedCounts) {
  const auto dir = data_dir() / "conll2003";
  BERTFT_REQUIRE_PATH(dir / "train.txt");
  struct Split {
    const char* file;
    size_t sentences, tokens, documents, entities;
  };
  for (const auto& s :
       {Split{"train.txt", 14041, 203621, 946, 23499}, Split{"valid.txt", 3250, 51362, 216, 5942},
        Split{"test.txt", 3453, 46435, 231, 5648}}) {
    const auto sentences = read_conll(spec_of(dir / s.file));
    size_t tokens = 0;
    std::vector<std::vector<std::string>> tags;
    for (const auto& sentence : sentences) {
      tokens += sentence.words.size();
      ASSERT_EQ(sentence.words.size(), sentence.tags.size());
      tags.push_back(sentence.tags);
    }
    EXPECT_EQ(sentences.size(), s.sentences) << s.file;
    EXPECT_EQ(tokens, s.tokens) << s.file;
    EXPECT_EQ(static_cast<size_t>(sentences.back().document + 1), s.documents) << s.file;
    EXPECT_EQ(tasks::metrics::lenient_entities(tags).size(), s.entities) << s.file;
  }
}

class MalformedInputTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& text) {
    const auto path = dir_.path() / name;
    testing::write_bytes(path, text);
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(MalformedInputTest, TsvRowWithWrongFieldCountNamesLine) {
  const auto path = write("bad.tsv", "sentence\tlabel\nfine\t1\nmissing label\n");
  const auto message = testing::error_message([&] { read_text_examples(spec_of(path)); });
  EXPECT_NE(message.find(path.string() + ":3: expected 2 fields (as the header), got 1"),
            std::string::npos)
      << message;
  DataSpec lenient = spec_of(path);
  lenient.skip_malformed = true;
  EXPECT_EQ(read_text_examples(lenient).size(), 1u);
}

TEST_F(MalformedInputTest, InvalidUtf8IsReportedNotReplaced) {
  const auto path = write("bad.tsv", "sentence\tlabel\nab\xC3(\t1\n");
  const auto message = testing::error_message([&] { read_text_examples(spec_of(path)); });
  EXPECT_NE(message.find(path.string() + ":2:3: invalid UTF-8 (byte 0xC3)"), std::string::npos)
      << message;
}

// Lines from stdin (predict --text -, similar --queries -): a Windows line end is not part of the
// text, blank lines are skipped, and a line that is not UTF-8 is named by its number.
TEST(StdinLines, DropCarriageReturnsAndBlankLinesAndNameBadOnes) {
  std::istringstream in("first\r\n\r\n\nsecond \nthird");
  const auto lines = read_stdin_lines(in);
  std::vector<std::string> texts;
  std::vector<int64_t> numbers;  // stdin's own: the skipped lines count
  for (const auto& line : lines) {
    texts.push_back(line.text);
    numbers.push_back(line.number);
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"first", "second ", "third"}));
  EXPECT_EQ(numbers, (std::vector<int64_t>{1, 4, 5}));
  std::istringstream bad("ok\n\nc\xFF\n");
  EXPECT_NE(testing::error_message([&] {
              read_stdin_lines(bad);
            }).find("<stdin>:3: invalid UTF-8 at byte 1 (0xFF)"),
            std::string::npos);
}

// A directory given as a data file is named as one (an ifstream would read it as empty).
TEST_F(MalformedInputTest, DirectoryIsNotReadAsAnEmptyFile) {
  const auto path = dir_.path() / "glue";
  fs::create_directories(path);
  const std::string expected = path.string() + ": is a directory, not a file";
  for (const auto format : {DataFormat::kAuto, DataFormat::kTsv, DataFormat::kJsonl}) {
    auto spec = spec_of(path);
    spec.format = format;
    const auto message = testing::error_message([&] { read_text_examples(spec); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
  for (const auto& message : {testing::error_message([&] { read_squad(spec_of(path)); }),
                              testing::error_message([&] { read_conll(spec_of(path)); })})
    EXPECT_NE(message.find(expected), std::string::npos) << message;
}

TEST_F(MalformedInputTest, MissingColumnListsTheColumns) {
  DataSpec spec = spec_of(write("x.tsv", "review\tstars\ngood\t5\n"));
  spec.columns = {{"text_a", "text"}};
  const auto message = testing::error_message([&] { read_text_examples(spec); });
  EXPECT_NE(message.find("no column 'text' (columns: 'review', 'stars')"), std::string::npos)
      << message;
  spec.columns = {{"txet_a", "review"}};
  EXPECT_NE(testing::error_message([&] { read_text_examples(spec); }).find("unknown role 'txet_a'"),
            std::string::npos);
  spec.columns = {{"text_a", "review"}, {"label", "stars"}};
  const auto examples = read_text_examples(spec);
  ASSERT_EQ(examples.size(), 1u);
  EXPECT_EQ(examples[0].label.value(), "5");
  // A column by its index: within the header, digits only (a number past int is no index).
  spec.columns = {{"text_a", "0"}, {"label", "1"}};
  EXPECT_EQ(read_text_examples(spec)[0].text_a, "good");
  for (const std::string index : {"2", "99999999999", "4294967296", "+1"}) {
    spec.columns = {{"text_a", "0"}, {"label", index}};
    const auto past = testing::error_message([&] { read_text_examples(spec); });
    EXPECT_NE(past.find("no column '" + index + "' (columns: 'review', 'stars')"),
              std::string::npos)
        << past;
  }
}

TEST_F(MalformedInputTest, CsvQuotingAndJsonl) {
  const auto csv =
      write("x.csv", "id,text,label\n7,\"a, \"\"quoted\"\"\nline\",pos\r\n8,plain,neg\n");
  const auto rows = read_text_examples(spec_of(csv));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "7");
  EXPECT_EQ(rows[0].text_a, "a, \"quoted\"\nline");
  EXPECT_EQ(rows[0].label.value(), "pos");  // the CR of CRLF is not part of the last field
  EXPECT_EQ(rows[1].where, csv.string() + ":4");
  // Windows line ends throughout, blank lines between and after the records (skipped).
  const auto crlf = write("crlf.csv", "text,label\r\none,pos\r\n\r\ntwo,neg\r\n\r\n");
  const auto windows = read_text_examples(spec_of(crlf));
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].label.value(), "pos");
  EXPECT_EQ(windows[1].text_a, "two");
  EXPECT_EQ(windows[1].label.value(), "neg");
  EXPECT_EQ(windows[1].where, crlf.string() + ":4");
  const auto tsv = read_text_examples(spec_of(write("crlf.tsv", "text\tlabel\r\none\tpos\r\n")));
  ASSERT_EQ(tsv.size(), 1u);
  EXPECT_EQ(tsv[0].label.value(), "pos");
  const auto jsonl = write("x.jsonl",
                           "{\"text\": \"one\", \"label\": 1}\n\n{\"text\": \"two\", \"text_b\": "
                           "\"b\", \"label\": 0}\n");
  const auto j = read_text_examples(spec_of(jsonl));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].label.value(), "1");
  EXPECT_FALSE(j[0].text_b.has_value());
  EXPECT_EQ(j[1].text_b.value(), "b");
  EXPECT_EQ(j[1].id, "1");  // no id field: the row's number
  // An "id" field is the example's id, not an unknown field.
  const auto with_ids = read_text_examples(
      spec_of(write("ids.jsonl", "{\"id\": \"q7\", \"text\": \"one\", \"label\": 1}\n")));
  ASSERT_EQ(with_ids.size(), 1u);
  EXPECT_EQ(with_ids[0].id, "q7");
  // null is no value (a test split's "label": null), not the text "null".
  const auto nulls = read_text_examples(
      spec_of(write("null.jsonl", "{\"text\": \"one\", \"text_b\": null, \"label\": null}\n")));
  ASSERT_EQ(nulls.size(), 1u);
  EXPECT_FALSE(nulls[0].label.has_value());
  EXPECT_FALSE(nulls[0].text_b.has_value());
  const auto bad = write("bad.jsonl", "{\"text\": \"one\"}\n{\"text\": \n");
  EXPECT_NE(testing::error_message([&] {
              read_text_examples(spec_of(bad));
            }).find(bad.string() + ":2: not valid JSON"),
            std::string::npos);
}

// Multi-label sets: a list under "label" or "labels" (kept as its JSON text), or one 0/1 column
// per label (role labels, as the columns of HF's multi-label tutorial data): the names of the
// columns set.
TEST_F(MalformedInputTest, MultiLabelListsAndOneColumnPerLabel) {
  const auto lists =
      read_text_examples(spec_of(write("l.jsonl", R"({"text": "a", "labels": ["x", "y"]})"
                                                  "\n"
                                                  R"({"text": "b", "labels": [3]})"
                                                  "\n")));
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].label.value(), R"(["x","y"])");
  EXPECT_EQ(lists[1].label.value(), "[3]");
  DataSpec csv =
      spec_of(write("h.csv", "Tweet,anger,joy,fear\ngrr,1,0,1\nyay,0,1.0,0\nmeh,0,0,0\n"));
  csv.columns = {{"text_a", "Tweet"}, {"labels", "anger,joy,fear"}};
  const auto hot = read_text_examples(csv);
  ASSERT_EQ(hot.size(), 3u);
  EXPECT_EQ(hot[0].label.value(), R"(["anger","fear"])");
  EXPECT_EQ(hot[1].label.value(), R"(["joy"])");
  EXPECT_EQ(hot[2].label.value(), "[]");
  // JSON lines with booleans; the label columns are not unknown fields, another one is.
  DataSpec json = spec_of(write("h.jsonl", R"({"ID": "t1", "Tweet": "grr", "anger": true, )"
                                           R"("joy": false})"
                                           "\n"));
  json.columns = {{"text_a", "Tweet"}, {"id", "ID"}, {"labels", "anger,joy"}};
  const auto booleans = read_text_examples(json);
  ASSERT_EQ(booleans.size(), 1u);
  EXPECT_EQ(booleans[0].id, "t1");
  EXPECT_EQ(booleans[0].label.value(), R"(["anger"])");
  json.columns["labels"] = "anger";
  EXPECT_NE(testing::error_message([&] { read_text_examples(json); }).find("unknown field 'joy'"),
            std::string::npos);
  // A cell that is not 0 or 1, a column the file lacks, and both roles at once.
  csv.path = write("bad.csv", "Tweet,anger,joy,fear\ngrr,1,0,1\nyay,0,2,0\n");
  EXPECT_NE(testing::error_message([&] { read_text_examples(csv); })
                .find(csv.path.string() +
                      ":3: column 'joy' holds '2'; a label column holds 0 or 1 (true or false)"),
            std::string::npos);
  csv.columns["labels"] = "anger,surprise";
  EXPECT_NE(testing::error_message([&] { read_text_examples(csv); }).find("no column 'surprise'"),
            std::string::npos);
  csv.columns["label"] = "anger";
  EXPECT_NE(testing::error_message([&] { read_text_examples(csv); })
                .find("columns: label names the label column, labels the 0/1 columns of a "
                      "multi-label set; give one"),
            std::string::npos);
}

TEST_F(MalformedInputTest, SwagCsvBuildsChoicesLikeRunSwag) {
  const auto path = write(
      "val.csv",
      ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,"
      "label\n"
      "0,v1,5,\"The cook stirs.\",The cook stirs.,He,gold,adds salt.,sleeps.,flies away.,sings.,0\n"
      "1,v2,6,x,A dog runs.,It,gold,barks.,\"reads, slowly.\",swims.,cooks.,3\n");
  const auto examples = read_choice_examples(spec_of(path));
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].id, "v1/5");
  EXPECT_EQ(examples[0].context, "The cook stirs.");
  EXPECT_EQ(examples[0].choices, (std::vector<std::string>{"He adds salt.", "He sleeps.",
                                                           "He flies away.", "He sings."}));
  EXPECT_EQ(examples[1].choices[1], "It reads, slowly.");
  EXPECT_EQ(examples[1].label.value(), 3);
  const auto bad = write("bad.csv", "sent1,sent2,ending0,ending1,label\nA,B,c,d,2\n");
  EXPECT_NE(testing::error_message([&] {
              read_choice_examples(spec_of(bad));
            }).find(bad.string() + ":2: label '2' is not a choice index 0..1"),
            std::string::npos);
}

TEST_F(MalformedInputTest, ConllColumnsAndDocuments) {
  const auto path = write(
      "x.conll",
      "-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n\n-DOCSTART- -X- O\n\nPeter NNP B-PER\n");
  const auto sentences = read_conll(spec_of(path));
  ASSERT_EQ(sentences.size(), 2u);
  EXPECT_EQ(sentences[0].words, (std::vector<std::string>{"EU", "rejects"}));
  EXPECT_EQ(sentences[0].tags, (std::vector<std::string>{"B-ORG", "O"}));
  EXPECT_EQ(sentences[0].document, 0);
  EXPECT_EQ(sentences[1].document, 1);
  EXPECT_EQ(sentences[1].where, path.string() + ":8");
  DataSpec pos = spec_of(path);
  pos.columns = {{"tag", "1"}};
  EXPECT_EQ(read_conll(pos)[0].tags, (std::vector<std::string>{"NNP", "VBZ"}));
  const auto bad = write("bad.conll", "EU NNP B-ORG\nrejects O\n");
  EXPECT_NE(testing::error_message([&] {
              read_conll(spec_of(bad));
            }).find(bad.string() + ":2: expected 3 columns (as the first line), got 2"),
            std::string::npos);
  const auto longer = write("longer.conll", "EU NNP B-ORG\nrejects VBZ O extra\n");
  EXPECT_NE(testing::error_message([&] {
              read_conll(spec_of(longer));
            }).find(longer.string() + ":2: expected 3 columns (as the first line), got 4"),
            std::string::npos);
}

// Token classification's JSON lines, as HF's run_ner.py takes them (and HF datasets' export of
// CoNLL-2003 writes them: ids for tags, pos_tags and chunk_tags beside): a .jsonl given for NER
// was read as CoNLL columns, each line one garbled word.
TEST_F(MalformedInputTest, TaggedJsonLines) {
  const auto path =
      write("n.jsonl", R"({"id": "a", "tokens": ["EU", "rejects"], "ner_tags": ["B-ORG", "O"],)"
                       R"( "pos_tags": [22, 42], "chunk_tags": [11, 21]})"
                       "\n\n"
                       R"({"words": ["Peter"], "tags": [3], "id": 7})"
                       "\n"
                       R"({"tokens": []})"
                       "\n");
  const auto sentences = read_tagged(spec_of(path));
  ASSERT_EQ(sentences.size(), 2u);
  EXPECT_EQ(sentences[0].id, "a");
  EXPECT_EQ(sentences[0].words, (std::vector<std::string>{"EU", "rejects"}));
  EXPECT_EQ(sentences[0].tags, (std::vector<std::string>{"B-ORG", "O"}));
  EXPECT_EQ(sentences[1].id, "7");
  EXPECT_EQ(sentences[1].tags, (std::vector<std::string>{"3"}));  // an id: the adapter maps it
  EXPECT_EQ(sentences[1].where, path.string() + ":3");
  EXPECT_EQ(sentences[1].document, 0);
  // Untagged text, to predict: no line has tags (null is none).
  const auto untagged = read_tagged(spec_of(write("u.jsonl", R"({"tokens": ["raw"]})"
                                                             "\n"
                                                             R"({"tokens": ["x"], "tags": null})"
                                                             "\n")));
  ASSERT_EQ(untagged.size(), 2u);
  EXPECT_TRUE(untagged[0].tags.empty() && untagged[1].tags.empty());
  // .json too (HF's datasets reads JSON lines there); format jsonl for any name; CoNLL for
  // format conll or tsv; another format is refused.
  const auto json_name = write("n.json", read_file(path));
  EXPECT_EQ(read_tagged(spec_of(json_name)).size(), 2u);
  auto as_jsonl = spec_of(write("n.txt", read_file(path)));
  as_jsonl.format = DataFormat::kJsonl;
  EXPECT_EQ(read_tagged(as_jsonl).size(), 2u);
  auto conll = spec_of(write("c.tsv", "EU\tB-ORG\n"));
  EXPECT_EQ(read_tagged(conll)[0].tags, (std::vector<std::string>{"B-ORG"}));
  conll.format = DataFormat::kTsv;  // CoNLL columns with tabs
  EXPECT_EQ(read_tagged(conll)[0].tags, (std::vector<std::string>{"B-ORG"}));
  conll.format = DataFormat::kCsv;
  EXPECT_NE(testing::error_message([&] {
              read_tagged(conll);
            }).find("format csv: token classification reads CoNLL columns (conll) or JSON lines"),
            std::string::npos);
  // Fields by other names through columns.
  auto mapped = spec_of(write("m.jsonl", R"({"w": ["EU"], "t": ["B-ORG"]})"
                                         "\n"));
  mapped.columns = {{"token", "w"}, {"tag", "t"}};
  EXPECT_EQ(read_tagged(mapped)[0].tags, (std::vector<std::string>{"B-ORG"}));
  // Each problem names the file and line.
  const auto bad_name = (dir_.path() / "bad.jsonl").string();
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"tokens": ["EU"], "ner_tags": ["O"], "lemma": ["eu"]})",
            ":1: unknown field 'lemma' (words: tokens | words; tags: ner_tags | tags; id); map it "
            "with columns: {tag: lemma} (on the command line --column tag=lemma)"},
           {R"({"tokens": ["EU", "x"], "ner_tags": ["O"]})", ":1: 2 words but 1 tags"},
           {R"({"tokens": ["EU", 5]})", ":1: word 2 is not a string: 5"},
           {R"({"tokens": ["EU"], "ner_tags": [1.5]})",
            ":1: tag 1 is neither a name nor an integer: 1.5"},
           {R"({"ner_tags": ["O"]})", R"(:1: no words (a list under "tokens" or "words"))"},
           {R"(["EU"])", ":1: expected a JSON object per line"},
           // Tags on some lines only: a dev file would go unscored without a word.
           {"{\"tokens\": [\"EU\"], \"ner_tags\": [\"O\"]}\n\n{\"tokens\": [\"x\"]}",
            ":3: this sentence has no tags but the first one (" + bad_name +
                ":1) has them; every line has tags or none does"},
           {"{\"tokens\": [\"x\"]}\n{\"words\": [\"EU\"], \"tags\": [1]}",
            ":2: this sentence has tags but the first one (" + bad_name + ":1) has none"}}) {
    const auto bad = write("bad.jsonl", text + "\n");
    EXPECT_NE(
        testing::error_message([&] { read_tagged(spec_of(bad)); }).find(bad.string() + message),
        std::string::npos)
        << text;
  }
}

TEST_F(MalformedInputTest, SquadStructureErrorsNameTheJsonPath) {
  const auto path = write("s.json", R"({"version": "1.1", "data": [{"title": "T", "paragraphs": [
    {"context": "abc def", "qas": [{"id": "q1", "question": "?", "answers": [{"text": "def", "answer_start": 4}]},
                                   {"id": "q2", "answers": []}]}]}]})");
  const auto message = testing::error_message([&] { read_squad(spec_of(path)); });
  EXPECT_NE(message.find("data[0].paragraphs[0].qas[1]: missing string 'question'"),
            std::string::npos)
      << message;
  const auto out_of_range = write("r.json", R"({"data": [{"paragraphs": [{"context": "é", "qas": [
    {"id": "q", "question": "?", "answers": [{"text": "x", "answer_start": 9}]}]}]}]})");
  EXPECT_NE(testing::error_message([&] {
              read_squad(spec_of(out_of_range));
            }).find("answer_start 9 outside the context (1 characters)"),
            std::string::npos);
  const auto syntax = write("j.json", "{\"data\": [\n  {\"paragraphs\": ]\n}");
  EXPECT_NE(
      testing::error_message([&] { read_squad(spec_of(syntax)); }).find(syntax.string() + ":2"),
      std::string::npos);
  // A column mapping (a recipe's columns:, predict's --column) would be ignored: refused.
  auto mapped = spec_of(path);
  mapped.columns = {{"context", "passage"}};
  EXPECT_NE(testing::error_message([&] {
              read_squad(mapped);
            }).find(path.string() + ": columns: SQuAD JSON has no columns"),
            std::string::npos);
  auto headerless = spec_of(path);  // embed --no-header, a recipe's header: false
  headerless.header = false;
  EXPECT_NE(testing::error_message([&] {
              read_squad(headerless);
            }).find(path.string() + ": header: SQuAD JSON has no columns"),
            std::string::npos);
}

}  // namespace
}  // namespace bert::data
