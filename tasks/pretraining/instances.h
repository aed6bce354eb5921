#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bert/common/yaml.h"
#include "bert/tokenizer/tokenizer.h"
#include "data/corpus.h"

namespace bert::tasks {

/// How pre-training instances are made (Google's create_pretraining_data.py flags).
struct PretrainingDataOptions {
  int64_t max_seq_length = 128;
  int64_t max_predictions_per_seq = 20;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;    ///< share of instances with a shorter random target length
  double random_next_prob = 0.5;  ///< share of NotNext pairs (B from another document)
  int64_t dupe_factor = 10;       ///< passes over the corpus, each with fresh pairs and masks
  bool whole_word_mask = false;   ///< mask every piece of a word together
  bool static_masking = true;     ///< false: store unmasked instances; the trainer masks on the fly
  int64_t seed = 12345;
  int64_t instances_per_shard = 100000;
  /// "pairs": Google's sentence pairs with NSP labels; "full_sentences": RoBERTa's packing
  /// (whole sentences in order, across documents with a [SEP] between them, no NSP label).
  std::string packing = "pairs";

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length, "Tokens per instance, [CLS] and [SEP]s included");
    field("max_predictions_per_seq", self.max_predictions_per_seq,
          "Most masked positions per instance");
    field("masked_lm_prob", self.masked_lm_prob, "Share of tokens chosen for prediction");
    field("short_seq_prob", self.short_seq_prob, "Share of instances with a random shorter length");
    field("random_next_prob", self.random_next_prob, "Share of NotNext (random segment B) pairs");
    field("dupe_factor", self.dupe_factor, "Passes over the corpus with fresh pairs and masks");
    field("whole_word_mask", self.whole_word_mask, "Mask all pieces of a word together");
    field("static_masking", self.static_masking,
          "Mask when writing (false: the trainer masks on the fly)");
    field("seed", self.seed, "Random seed");
    field("instances_per_shard", self.instances_per_shard, "Instances per shard file");
    field("packing", self.packing,
          "pairs (BERT: sentence pairs, NSP labels) or full_sentences (RoBERTa: packed, no NSP)");
  }
  /// Throws ConfigError listing every impossible value.
  void validate() const;
};

/// One sentence as token ids, with a flag per piece that starts a pre-tokenized word.
struct TokenizedSentence {
  std::vector<int32_t> ids;
  std::vector<uint8_t> word_start;
};
using TokenizedDocument = std::vector<TokenizedSentence>;

/// Tokenizes every sentence (pieces only, no special tokens) on `threads` threads (0 = all
/// cores); sentences without pieces and then empty documents are dropped.
std::vector<TokenizedDocument> tokenize_corpus(const std::vector<data::RawDocument>& documents,
                                               const tok::Tokenizer& tokenizer,
                                               int threads = 0);

/// "[CLS] A [SEP] B [SEP]" with its NSP label and (after masking) its MLM targets; or, packed
/// (full_sentences), "[CLS] sentences [SEP] next document's sentences [SEP]": one segment and
/// no NSP label.
struct PretrainingInstance {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> word_start;        ///< per token; 1 for special tokens
  int32_t segment_a_length = 0;           ///< tokens with segment id 0: [CLS] A [SEP] (packed: all)
  bool is_random_next = false;            ///< NSP label 1 (NotNext) as HF's next_sentence_label
  bool packed = false;                    ///< full_sentences: no NSP label
  std::vector<int32_t> masked_positions;  ///< ascending
  std::vector<int32_t> masked_labels;     ///< the original ids at those positions
};

/// Google's create_instances_from_document over every document, `dupe_factor` times (masked
/// when options.static_masking), then shuffled. Chunks of whole sentences fill a target length
/// (max_seq_length - 3, or with short_seq_prob a random shorter one); A is a random prefix of the
/// chunk's sentences, B the rest (IsNext) or, with random_next_prob, text from a random other
/// document (NotNext, the unused sentences going back to the pool); the longer side is trimmed
/// at a random end until the pair fits. One difference from Google's script: a chunk of a single
/// sentence is split inside the sentence instead of always taking a random B, so that the
/// IsNext share really is 1 - random_next_prob.
/// With options.packing "full_sentences" (RoBERTa's FULL-SENTENCES): each pass takes the documents
/// in a fresh random order and packs whole sentences contiguously into instances of at most
/// max_seq_length tokens, crossing document boundaries with an extra [SEP] between documents; a
/// sentence that does not fit starts the next instance, one longer than an instance is cut into
/// instance-sized pieces. short_seq_prob and random_next_prob are not used.
std::vector<PretrainingInstance> create_instances(const std::vector<TokenizedDocument>& documents,
                                                  const PretrainingDataOptions& options,
                                                  const tok::SpecialTokens& special,
                                                  int64_t vocab_size);

/// Chooses masked_lm_prob of the tokens (never [CLS]/[SEP]; whole words together with
/// whole_word_mask; at most max_predictions_per_seq; the count rounded up or down at random so
/// that its expectation is exact) and replaces 80% of them by [MASK], 10% by a random non-special
/// token and keeps 10%. Records positions and original ids.
void mask_instance(PretrainingInstance& instance,
                   const PretrainingDataOptions& options,
                   const tok::SpecialTokens& special,
                   int64_t vocab_size,
                   std::mt19937_64& rng);

/// What a set of instances holds, to check it against the specification.
struct InstanceStats {
  int64_t instances = 0, random_next = 0, packed = 0, tokens = 0, maskable = 0;
  int64_t masked = 0, replaced_by_mask = 0, replaced_by_random = 0, kept = 0;
  void add(const PretrainingInstance& instance, int64_t mask_id);
  nlohmann::json to_json() const;
};

/// Instance shard files ("BFTPRE01", then per instance: uint16 token count, uint16 segment A
/// length, uint8 NotNext (0 IsNext, 1 NotNext, 2 packed: no NSP label), uint16 masked count, int32
/// tokens, uint8 word starts, uint16 masked positions, int32 masked labels; host byte order). The
/// writer writes a temporary file and renames it on close(); the reader streams one instance at a
/// time.
class InstanceWriter {
 public:
  explicit InstanceWriter(std::filesystem::path path);
  ~InstanceWriter();
  void write(const PretrainingInstance& instance);
  /// Finishes the file (count in the header, rename). Throws DataError on an I/O error.
  void close();
  int64_t count() const { return count_; }

 private:
  std::filesystem::path path_, tmp_;
  std::ofstream out_;
  int64_t count_ = 0;
  bool closed_ = false;
};

/// Bytes of a shard's header (magic + count).
constexpr size_t kShardHeaderBytes = 16;
/// The instance count of a shard whose first bytes are `header` (`size` of them); DataError
/// naming `path` if they are not a shard header.
int64_t shard_instance_count(const char* header, size_t size, const std::filesystem::path& path);
/// Decodes the instance at `data` (at most `available` bytes) into `out` (may be null: only
/// measure). Returns the bytes it takes, 0 when they are cut short or inconsistent.
size_t decode_instance(const char* data, size_t available, PretrainingInstance* out);

class InstanceReader {
 public:
  /// Throws DataError naming the file if it is not an instance shard.
  explicit InstanceReader(const std::filesystem::path& path);
  int64_t count() const { return count_; }
  /// The next instance into `out`; false at the end. Throws DataError on a damaged file.
  bool next(PretrainingInstance& out);
  /// Back to the first instance.
  void rewind();

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  int64_t count_ = 0, read_ = 0;
};

/// Writes instances to `dir`/instances-NNNNN.bin shards plus stats.json (instance statistics
/// and the options); returns the statistics.
InstanceStats write_instance_shards(const std::vector<PretrainingInstance>& instances,
                                    const std::filesystem::path& dir,
                                    const PretrainingDataOptions& options,
                                    int64_t mask_id);

}  // namespace bert::tasks
