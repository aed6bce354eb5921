// Vocabulary training: WordPiece merges as HF's trainer makes them, a vocabulary that covers its
// corpus, and SentencePiece models from libsentencepiece's trainer with BERT's special tokens.
#include "bert/tokenizer/vocab_trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "bert/common/error.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/wordpiece.h"
#include "tests/support/test_support.h"

namespace bert::tok {
namespace {

namespace fs = std::filesystem;

WordPieceOptions cased() {
  WordPieceOptions o;
  o.normalizer.lowercase = false;
  o.normalizer.strip_accents = false;
  o.check_casing = CasingCheck::kOff;
  return o;
}

std::vector<std::string> pieces(const Tokenizer& t, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& p : t.tokenize(text)) out.push_back(p.token);
  return out;
}

TEST(WordPieceTrainer, MergesTheMostFrequentPairsFirst) {
  const std::vector<std::string> texts = {"low low low low lower lower newest newest newest widest",
                                          "low, newest!"};
  WordPieceTrainerOptions options;
  options.vocab_size = 26;
  const auto vocab = train_wordpiece(texts, options);
  ASSERT_EQ(vocab.size(), 26u);
  EXPECT_EQ(std::vector<std::string>(vocab.begin(), vocab.begin() + 5),
            (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}));
  // Alphabet: word-initial characters plain, the others with "##", punctuation as words.
  for (const auto* symbol : {"l", "n", "w", "##o", "##w", "##e", "##s", "##t", "!", ","})
    EXPECT_NE(std::find(vocab.begin(), vocab.end(), symbol), vocab.end()) << symbol;
  // 13 alphabet symbols follow the specials. "l ##o" and "##o ##w" are the most frequent pairs
  // (7 each: low x5, lower x2); the tie goes to the smaller text, "##ow"; then "l ##ow" (7);
  // then "##e ##s" and "##s ##t" (5 each: newest x4, widest) -> "##es", then "##es ##t".
  EXPECT_EQ(vocab[17], "w");
  EXPECT_EQ(std::vector<std::string>(vocab.begin() + 18, vocab.begin() + 22),
            (std::vector<std::string>{"##ow", "low", "##es", "##est"}));
  const WordPieceTokenizer tokenizer(vocab, cased());
  EXPECT_EQ(pieces(tokenizer, "low"), std::vector<std::string>{"low"});
  EXPECT_EQ(pieces(tokenizer, "newest"), std::vector<std::string>{"newest"});
  EXPECT_EQ(pieces(tokenizer, "widest"), (std::vector<std::string>{"w", "##i", "##d", "##est"}));
  // The same corpus gives the same vocabulary.
  EXPECT_EQ(train_wordpiece(texts, options), vocab);
  // min_frequency stops merging pairs seen too rarely.
  options.vocab_size = 1000;
  options.min_frequency = 100;
  EXPECT_EQ(train_wordpiece(texts, options).size(), 5u + 13u);  // specials + alphabet only
}

// An uncased vocabulary is trained on text normalised as its tokenizer will normalise it: lower
// case, accents stripped.
TEST(WordPieceTrainer, UncasedTrainingLowersAndStripsAccents) {
  WordPieceTrainerOptions options;
  options.vocab_size = 40;
  options.min_frequency = 1;
  options.lowercase = true;
  const auto vocab = train_wordpiece({"Caf\xC3\xA9 CAF\xC3\x89 caf\xC3\xA9 Na\xC3\xAFve"}, options);
  const std::set<std::string> entries(vocab.begin() + 5, vocab.end());
  for (const auto& entry : entries)
    for (const char c : entry) {
      EXPECT_FALSE(c >= 'A' && c <= 'Z') << entry;
      EXPECT_EQ(static_cast<unsigned char>(c) & 0x80, 0) << entry;  // no accented letter
    }
  EXPECT_EQ(entries.count("cafe"), 1u);
  EXPECT_EQ(entries.count("##i"), 1u);
  options.lowercase = false;
  const auto cased = train_wordpiece({"Caf\xC3\xA9 CAF\xC3\x89"}, options);
  EXPECT_NE(std::find(cased.begin(), cased.end(), "##\xC3\x89"), cased.end());
  EXPECT_NE(std::find(cased.begin(), cased.end(), "C"), cased.end());
}

// A special token that the alphabet or a merge would also give is in the vocabulary once, as
// HF's trainer keeps it (an entry is added only where the vocabulary lacks it).
TEST(WordPieceTrainer, ASpecialTokenTheCorpusAlsoGivesIsListedOnce) {
  WordPieceTrainerOptions options;
  options.vocab_size = 30;
  options.special_tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!", "low"};
  const auto vocab = train_wordpiece({"low low low lower lower!", "low!"}, options);
  EXPECT_EQ(std::set<std::string>(vocab.begin(), vocab.end()).size(), vocab.size());
  EXPECT_EQ(std::count(vocab.begin(), vocab.end(), "!"), 1);
  EXPECT_EQ(std::count(vocab.begin(), vocab.end(), "low"), 1);
  EXPECT_EQ(vocab[5], "!");
  EXPECT_EQ(vocab[6], "low");
}

TEST(WordPieceTrainer, TrainedVocabularyCoversItsCorpus) {
  const auto squad = testing::shared_dir() / "data" / "squad" / "dev-v1.1.json";
  BERTFT_REQUIRE_PATH(squad);
  std::vector<std::string> texts;
  const auto json = nlohmann::json::parse(std::ifstream(squad));
  for (const auto& article : json["data"])
    for (const auto& paragraph : article["paragraphs"]) texts.push_back(paragraph["context"]);
  WordPieceTrainerOptions options;
  options.vocab_size = 3000;
  const auto vocab = train_wordpiece(texts, options);
  ASSERT_EQ(vocab.size(), 3000u);
  // Each token once.
  EXPECT_EQ(std::set<std::string>(vocab.begin(), vocab.end()).size(), vocab.size());
  const WordPieceTokenizer tokenizer(vocab, cased());
  int64_t unknown = 0, total = 0;
  for (size_t i = 0; i < texts.size(); i += 10)
    for (const auto& p : tokenizer.tokenize(texts[i])) {
      unknown += p.id == tokenizer.special_tokens().unk_id;
      ++total;
    }
  EXPECT_EQ(unknown, 0);
  EXPECT_EQ(pieces(tokenizer, "the"), std::vector<std::string>{"the"});
  EXPECT_EQ(pieces(tokenizer, "The"), std::vector<std::string>{"The"});
  EXPECT_GT(total, 0);
}

TEST(SentencePieceTrainer, UnigramAndBpeModelsWithBertSpecialTokens) {
  testing::TempDir dir;
  std::string corpus;
  const char* words[] = {"alpha", "beta",  "gamma", "delta",  "epsilon",
                         "zeta",  "theta", "kappa", "lambda", "sigma"};
  for (int i = 0; i < 2000; ++i)
    corpus += std::string(words[i % 10]) + " " + words[(i * 7) % 10] + " " +
              words[(i * 3 + 1) % 10] + ".\n";
  testing::write_bytes(dir.path() / "corpus.txt", corpus);
  for (const auto* type : {"unigram", "bpe"}) {
    const auto prefix = (dir.path() / type).string();
    train_sentencepiece({dir.path() / "corpus.txt"}, prefix, 60, type);
    const SentencePieceTokenizer tokenizer(prefix + ".model");
    const auto& s = tokenizer.special_tokens();
    EXPECT_EQ(s.pad_id, 0) << type;
    EXPECT_EQ(s.unk_id, 1) << type;
    EXPECT_EQ(s.cls_id, 2) << type;
    EXPECT_EQ(s.sep_id, 3) << type;
    EXPECT_EQ(s.mask_id, 4) << type;
    const auto e = tokenizer.encode("gamma delta.");
    EXPECT_EQ(e.ids.front(), 2);
    EXPECT_EQ(e.ids.back(), 3);
    for (const auto id : e.ids) EXPECT_NE(id, 1) << type;  // no [UNK]
  }
  const std::vector<fs::path> inputs = {dir.path() / "corpus.txt"};
  // libsentencepiece's other types (char, word) are not what a BERT vocabulary is made with.
  for (const auto* type : {"word2vec", "char", "word"})
    EXPECT_THROW(train_sentencepiece(inputs, (dir.path() / "x").string(), 60, type), TokenizerError)
        << type;
  EXPECT_FALSE(fs::exists(dir.path() / "x.model"));
}

// Each argument reaches the trainer whole: a corpus and a prefix with spaces in their paths
// train (the trainer's one-string form split them at the spaces), the trainer logs nothing at
// --minloglevel=1 (that form logged its command line first), and a comma in an input's path,
// where the trainer splits its inputs, is refused naming the file.
TEST(SentencePieceTrainer, PathsWithSpacesTrainQuietlyAndACommaIsRefused) {
  testing::TempDir dir;
  const auto spaced = dir.path() / "my corpora";
  fs::create_directories(spaced);
  std::string corpus;
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
  for (int i = 0; i < 500; ++i)
    corpus += std::string(words[i % 5]) + " " + words[(i * 3) % 5] + "\n";
  testing::write_bytes(spaced / "first part.txt", corpus);
  const auto prefix = (spaced / "my model").string();
  ::testing::internal::CaptureStderr();
  train_sentencepiece({spaced / "first part.txt"}, prefix, 40, "unigram");
  const auto logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(logged, "");
  const SentencePieceTokenizer tokenizer(prefix + ".model");
  EXPECT_EQ(tokenizer.special_tokens().mask_id, 4);
  EXPECT_NE(tokenizer.encode("gamma delta").ids.at(1), 1);  // not [UNK]

  testing::write_bytes(dir.path() / "a,b.txt", corpus);
  try {
    train_sentencepiece({dir.path() / "a,b.txt"}, (dir.path() / "y").string(), 40, "unigram");
    ADD_FAILURE() << "a comma in a path was taken";
  } catch (const TokenizerError& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir.path() / "a,b.txt").string() +
                  ": the sentencepiece trainer cannot read a file whose path has a comma; rename "
                  "it");
  }
  EXPECT_FALSE(fs::exists(dir.path() / "y.model"));
}

}  // namespace
}  // namespace bert::tok
