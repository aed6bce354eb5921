#include "tasks/pretraining/instances.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "tasks/common/sequence.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kMagic[8] = {'B', 'F', 'T', 'P', 'R', 'E', '0', '1'};

double uniform(std::mt19937_64& rng) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

/// Uniform integer in [lo, hi].
int64_t randint(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

struct Segment {
  std::vector<int32_t> ids;
  std::vector<uint8_t> word_start;
  void append(const TokenizedSentence& s) {
    ids.insert(ids.end(), s.ids.begin(), s.ids.end());
    word_start.insert(word_start.end(), s.word_start.begin(), s.word_start.end());
  }
  size_t size() const { return ids.size(); }
};

/// Google's truncate_seq_pair: trims the longer segment at a random end until both fit.
void truncate_pair(Segment& a, Segment& b, size_t max_tokens, std::mt19937_64& rng) {
  while (a.size() + b.size() > max_tokens) {
    Segment& longer = a.size() > b.size() ? a : b;
    if (uniform(rng) < 0.5) {
      longer.ids.erase(longer.ids.begin());
      longer.word_start.erase(longer.word_start.begin());
    } else {
      longer.ids.pop_back();
      longer.word_start.pop_back();
    }
  }
  if (!a.word_start.empty()) a.word_start.front() = 1;
  if (!b.word_start.empty()) b.word_start.front() = 1;
}

PretrainingInstance assemble(const Segment& a,
                             const Segment& b,
                             bool random_next,
                             const tok::SpecialTokens& special) {
  PretrainingInstance instance;
  instance.tokens.push_back(static_cast<int32_t>(special.cls_id));
  instance.tokens.insert(instance.tokens.end(), a.ids.begin(), a.ids.end());
  instance.tokens.push_back(static_cast<int32_t>(special.sep_id));
  instance.segment_a_length = static_cast<int32_t>(instance.tokens.size());
  instance.tokens.insert(instance.tokens.end(), b.ids.begin(), b.ids.end());
  instance.tokens.push_back(static_cast<int32_t>(special.sep_id));
  instance.word_start.push_back(1);
  instance.word_start.insert(instance.word_start.end(), a.word_start.begin(), a.word_start.end());
  instance.word_start.push_back(1);
  instance.word_start.insert(instance.word_start.end(), b.word_start.begin(), b.word_start.end());
  instance.word_start.push_back(1);
  instance.is_random_next = random_next;
  return instance;
}

void instances_from_document(const std::vector<TokenizedDocument>& documents,
                             size_t index,
                             const PretrainingDataOptions& o,
                             const tok::SpecialTokens& special,
                             std::mt19937_64& rng,
                             std::vector<PretrainingInstance>& out) {
  const auto& document = documents[index];
  const auto max_tokens = static_cast<size_t>(o.max_seq_length - 3);
  size_t target = max_tokens;
  if (uniform(rng) < o.short_seq_prob)
    target = static_cast<size_t>(randint(rng, 2, static_cast<int64_t>(max_tokens)));
  std::vector<const TokenizedSentence*> chunk;
  size_t chunk_length = 0;
  for (size_t i = 0; i < document.size(); ++i) {
    chunk.push_back(&document[i]);
    chunk_length += document[i].ids.size();
    if (i + 1 != document.size() && chunk_length < target) continue;
    const bool random_next = uniform(rng) < o.random_next_prob;
    Segment a, b;
    if (chunk.size() == 1 && !random_next && chunk[0]->ids.size() >= 2) {
      // One sentence: split it, so that IsNext stays possible.
      const auto& s = *chunk[0];
      const auto cut = static_cast<size_t>(randint(rng, 1, static_cast<int64_t>(s.ids.size()) - 1));
      a.ids.assign(s.ids.begin(), s.ids.begin() + static_cast<long>(cut));
      a.word_start.assign(s.word_start.begin(), s.word_start.begin() + static_cast<long>(cut));
      b.ids.assign(s.ids.begin() + static_cast<long>(cut), s.ids.end());
      b.word_start.assign(s.word_start.begin() + static_cast<long>(cut), s.word_start.end());
      truncate_pair(a, b, max_tokens, rng);
      out.push_back(assemble(a, b, false, special));
    } else {
      const size_t a_end =
          chunk.size() >= 2
              ? static_cast<size_t>(randint(rng, 1, static_cast<int64_t>(chunk.size()) - 1))
              : 1;
      for (size_t k = 0; k < a_end; ++k) a.append(*chunk[k]);
      const bool take_random = random_next || chunk.size() == 1;
      if (take_random) {
        const size_t target_b = target > a.size() ? target - a.size() : 1;
        size_t other = index;
        for (int tries = 0; tries < 10 && documents.size() > 1; ++tries) {
          other = static_cast<size_t>(randint(rng, 0, static_cast<int64_t>(documents.size()) - 1));
          if (other != index) break;
        }
        const auto& random_document = documents[other];
        const auto start =
            static_cast<size_t>(randint(rng, 0, static_cast<int64_t>(random_document.size()) - 1));
        for (size_t j = start; j < random_document.size(); ++j) {
          b.append(random_document[j]);
          if (b.size() >= target_b) break;
        }
        i -= chunk.size() - a_end;  // the unused sentences start the next chunk
      } else {
        for (size_t k = a_end; k < chunk.size(); ++k) b.append(*chunk[k]);
      }
      truncate_pair(a, b, max_tokens, rng);
      if (!a.ids.empty() && !b.ids.empty()) out.push_back(assemble(a, b, take_random, special));
    }
    chunk.clear();
    chunk_length = 0;
  }
}

/// RoBERTa's FULL-SENTENCES packing of one pass: the documents in `order`, whole sentences
/// appended while they fit, an extra [SEP] before each new document's first sentence.
void packed_instances(const std::vector<TokenizedDocument>& documents,
                      const std::vector<size_t>& order,
                      const PretrainingDataOptions& o,
                      const tok::SpecialTokens& special,
                      std::vector<PretrainingInstance>& out) {
  const auto room = static_cast<size_t>(o.max_seq_length - 2);  // [CLS] ... [SEP]
  const auto sep = static_cast<int32_t>(special.sep_id);
  Segment content;
  const auto flush = [&] {
    if (content.ids.empty()) return;
    PretrainingInstance instance;
    instance.tokens.push_back(static_cast<int32_t>(special.cls_id));
    instance.tokens.insert(instance.tokens.end(), content.ids.begin(), content.ids.end());
    instance.tokens.push_back(sep);
    instance.word_start.push_back(1);
    instance.word_start.insert(instance.word_start.end(), content.word_start.begin(),
                               content.word_start.end());
    instance.word_start.push_back(1);
    instance.segment_a_length = static_cast<int32_t>(instance.tokens.size());
    instance.packed = true;
    out.push_back(std::move(instance));
    content = Segment();
  };
  for (const size_t d : order) {
    bool first = true;  // a document boundary inside an instance gets a [SEP]
    for (const auto& sentence : documents[d]) {
      const bool separate = first && !content.ids.empty();
      first = false;
      if (content.size() + (separate ? 1 : 0) + sentence.ids.size() <= room) {
        if (separate) {
          content.ids.push_back(sep);
          content.word_start.push_back(1);
        }
        content.append(sentence);
        continue;
      }
      flush();
      // A sentence longer than an instance: instance-sized pieces, the rest goes on.
      size_t start = 0;
      while (sentence.ids.size() - start > room) {
        content.ids.assign(sentence.ids.begin() + static_cast<long>(start),
                           sentence.ids.begin() + static_cast<long>(start + room));
        content.word_start.assign(sentence.word_start.begin() + static_cast<long>(start),
                                  sentence.word_start.begin() + static_cast<long>(start + room));
        flush();
        start += room;
      }
      content.ids.assign(sentence.ids.begin() + static_cast<long>(start), sentence.ids.end());
      content.word_start.assign(sentence.word_start.begin() + static_cast<long>(start),
                                sentence.word_start.end());
    }
  }
  flush();
}

template <class T>
void put(std::ostream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

void PretrainingDataOptions::validate() const {
  std::vector<std::string> problems;
  if (max_seq_length < kMinSeqLength || max_seq_length > kMaxSeqLength)
    problems.push_back(
        fmt::format("max_seq_length must be in [{}, {}]", kMinSeqLength, kMaxSeqLength));
  if (max_predictions_per_seq < 1) problems.push_back("max_predictions_per_seq must be >= 1");
  if (masked_lm_prob <= 0 || masked_lm_prob >= 1)
    problems.push_back("masked_lm_prob must be in (0, 1)");
  if (short_seq_prob < 0 || short_seq_prob > 1)
    problems.push_back("short_seq_prob must be in [0, 1]");
  if (random_next_prob < 0 || random_next_prob > 1)
    problems.push_back("random_next_prob must be in [0, 1]");
  if (dupe_factor < 1) problems.push_back("dupe_factor must be >= 1");
  if (instances_per_shard < 1) problems.push_back("instances_per_shard must be >= 1");
  if (packing != "pairs" && packing != "full_sentences")
    problems.push_back(fmt::format("packing must be pairs or full_sentences, got '{}'", packing));
  if (!problems.empty()) throw ConfigError(problems);
}

std::vector<TokenizedDocument> tokenize_corpus(const std::vector<data::RawDocument>& documents,
                                               const tok::Tokenizer& tokenizer,
                                               int threads) {
  std::vector<TokenizedDocument> out(documents.size());
  const int n =
      std::max(1, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  std::exception_ptr error;
  std::mutex error_mutex;
  for (int w = 0; w < n; ++w) {
    workers.emplace_back([&, w] {
      try {
        for (size_t d = static_cast<size_t>(w); d < documents.size(); d += static_cast<size_t>(n)) {
          for (const auto& text : documents[d].sentences) {
            TokenizedSentence s;
            int32_t previous_word = -1;
            for (const auto& piece : tokenizer.tokenize(text)) {
              s.ids.push_back(static_cast<int32_t>(piece.id));
              s.word_start.push_back(piece.word != previous_word ? 1 : 0);
              previous_word = piece.word;
            }
            if (!s.ids.empty()) out[d].push_back(std::move(s));
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& t : workers) t.join();
  if (error) std::rethrow_exception(error);
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const TokenizedDocument& d) { return d.empty(); }),
      out.end());
  return out;
}

std::vector<PretrainingInstance> create_instances(const std::vector<TokenizedDocument>& documents,
                                                  const PretrainingDataOptions& options,
                                                  const tok::SpecialTokens& special,
                                                  int64_t vocab_size) {
  options.validate();
  if (special.cls_id < 0 || special.sep_id < 0 || special.mask_id < 0)
    throw ConfigError("pre-training needs [CLS], [SEP] and [MASK] in the vocabulary");
  std::mt19937_64 rng(static_cast<uint64_t>(options.seed));
  std::vector<PretrainingInstance> instances;
  const bool packed = options.packing == "full_sentences";
  std::vector<size_t> order(documents.size());
  for (int64_t pass = 0; pass < options.dupe_factor; ++pass) {
    if (packed) {
      std::iota(order.begin(), order.end(), size_t{0});
      std::shuffle(order.begin(), order.end(), rng);
      packed_instances(documents, order, options, special, instances);
      continue;
    }
    for (size_t d = 0; d < documents.size(); ++d)
      instances_from_document(documents, d, options, special, rng, instances);
  }
  if (options.static_masking)
    for (auto& instance : instances) mask_instance(instance, options, special, vocab_size, rng);
  std::shuffle(instances.begin(), instances.end(), rng);
  return instances;
}

void mask_instance(PretrainingInstance& instance,
                   const PretrainingDataOptions& o,
                   const tok::SpecialTokens& special,
                   int64_t vocab_size,
                   std::mt19937_64& rng) {
  const auto n = instance.tokens.size();
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < n; ++i) {
    const auto id = instance.tokens[i];
    if (id == special.cls_id || id == special.sep_id) continue;
    if (o.whole_word_mask && !instance.word_start[i] && !groups.empty() &&
        groups.back().back() + 1 == i)
      groups.back().push_back(i);
    else
      groups.push_back({i});
  }
  std::shuffle(groups.begin(), groups.end(), rng);
  const double expected = static_cast<double>(n) * o.masked_lm_prob;
  const auto rounded = static_cast<int64_t>(std::floor(expected + uniform(rng)));
  const auto to_predict = static_cast<size_t>(
      std::min<int64_t>(o.max_predictions_per_seq, std::max<int64_t>(1, rounded)));
  std::vector<std::pair<int32_t, int32_t>> chosen;  // (position, original id)
  std::vector<int64_t> specials = {special.pad_id, special.unk_id, special.cls_id, special.sep_id,
                                   special.mask_id};
  for (const auto& group : groups) {
    if (chosen.size() >= to_predict) break;
    if (chosen.size() + group.size() > to_predict) continue;
    for (const auto i : group) {
      const auto original = instance.tokens[i];
      chosen.emplace_back(static_cast<int32_t>(i), original);
      if (uniform(rng) < 0.8) {
        instance.tokens[i] = static_cast<int32_t>(special.mask_id);
      } else if (uniform(rng) >= 0.5) {
        int64_t id;
        do {
          id = randint(rng, 0, vocab_size - 1);
        } while (std::find(specials.begin(), specials.end(), id) != specials.end());
        instance.tokens[i] = static_cast<int32_t>(id);
      }  // else: kept
    }
  }
  std::sort(chosen.begin(), chosen.end());
  instance.masked_positions.clear();
  instance.masked_labels.clear();
  for (const auto& [position, id] : chosen) {
    instance.masked_positions.push_back(position);
    instance.masked_labels.push_back(id);
  }
}

void InstanceStats::add(const PretrainingInstance& instance, int64_t mask_id) {
  ++instances;
  random_next += instance.is_random_next;
  packed += instance.packed;
  tokens += static_cast<int64_t>(instance.tokens.size());
  maskable += static_cast<int64_t>(instance.tokens.size()) - 3;
  masked += static_cast<int64_t>(instance.masked_positions.size());
  for (size_t k = 0; k < instance.masked_positions.size(); ++k) {
    const auto now = instance.tokens[static_cast<size_t>(instance.masked_positions[k])];
    if (now == mask_id)
      ++replaced_by_mask;
    else if (now == instance.masked_labels[k])
      ++kept;
    else
      ++replaced_by_random;
  }
}

json InstanceStats::to_json() const {
  const auto share = [](int64_t a, int64_t b) {
    return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  json out = {{"instances", instances},
              {"tokens", tokens},
              {"mean_length", share(tokens, instances)},
              {"packed_instances", packed},
              {"masked", masked},
              {"masked_share_of_tokens", share(masked, tokens)},
              {"mask_share", share(replaced_by_mask, masked)},
              {"random_share", share(replaced_by_random, masked)},
              {"kept_share", share(kept, masked)}};
  // Over the sentence pairs only: packed instances have no NSP label.
  if (instances > packed)
    out["is_next_share"] = share(instances - packed - random_next, instances - packed);
  return out;
}

InstanceWriter::InstanceWriter(fs::path path)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  if (!path_.parent_path().empty()) fs::create_directories(path_.parent_path());
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw DataError(tmp_.string() + ": cannot open for writing");
  out_.write(kMagic, sizeof(kMagic));
  put<int64_t>(out_, 0);
}

InstanceWriter::~InstanceWriter() {
  if (!closed_) {
    out_.close();
    std::error_code ec;
    fs::remove(tmp_, ec);  // an unfinished shard is not left behind under its real name
  }
}

void InstanceWriter::write(const PretrainingInstance& instance) {
  const auto n = instance.tokens.size(), m = instance.masked_positions.size();
  TORCH_CHECK(n <= 65535 && m <= 65535 && instance.word_start.size() == n,
              "instance too long for the shard format");
  put<uint16_t>(out_, static_cast<uint16_t>(n));
  put<uint16_t>(out_, static_cast<uint16_t>(instance.segment_a_length));
  put<uint8_t>(out_, instance.packed ? 2 : instance.is_random_next ? 1 : 0);
  put<uint16_t>(out_, static_cast<uint16_t>(m));
  out_.write(reinterpret_cast<const char*>(instance.tokens.data()),
             static_cast<std::streamsize>(n * sizeof(int32_t)));
  out_.write(reinterpret_cast<const char*>(instance.word_start.data()),
             static_cast<std::streamsize>(n));
  for (const auto p : instance.masked_positions) put<uint16_t>(out_, static_cast<uint16_t>(p));
  out_.write(reinterpret_cast<const char*>(instance.masked_labels.data()),
             static_cast<std::streamsize>(m * sizeof(int32_t)));
  ++count_;
}

void InstanceWriter::close() {
  if (closed_) return;
  out_.seekp(sizeof(kMagic));
  put<int64_t>(out_, count_);
  out_.close();
  if (!out_) throw DataError(tmp_.string() + ": write failed");
  fs::rename(tmp_, path_);
  closed_ = true;
}

/// Bytes of an instance record: the fixed fields, then tokens, word starts, masked positions
/// and masked labels.
constexpr size_t kRecordFixedBytes = 2 + 2 + 1 + 2;
size_t record_bytes(uint16_t n, uint16_t m) {
  return kRecordFixedBytes + n * 4 + n + m * 2 + m * 4;
}

size_t decode_instance(const char* data, size_t available, PretrainingInstance* out) {
  constexpr size_t kFixed = kRecordFixedBytes;
  if (available < kFixed) return 0;
  uint16_t n = 0, a = 0, m = 0;
  std::memcpy(&n, data, 2);
  std::memcpy(&a, data + 2, 2);
  const auto random_next = static_cast<uint8_t>(data[4]);
  std::memcpy(&m, data + 5, 2);
  const size_t total = record_bytes(n, m);
  const bool packed = random_next == 2;  // one segment: [CLS] ... [SEP]
  if (available < total || random_next > 2 || a < 2 || (packed ? a != n : a >= n) || m > n)
    return 0;
  if (out == nullptr) return total;
  const char* p = data + kFixed;
  out->tokens.resize(n);
  std::memcpy(out->tokens.data(), p, n * 4);
  p += n * 4;
  out->word_start.assign(p, p + n);
  p += n;
  out->masked_positions.resize(m);
  for (auto& position : out->masked_positions) {
    uint16_t v = 0;
    std::memcpy(&v, p, 2);
    p += 2;
    if (v >= n) return 0;
    position = v;
  }
  out->masked_labels.resize(m);
  if (m > 0)
    std::memcpy(out->masked_labels.data(), p, m * 4);  // an empty vector's data() may be null
  out->segment_a_length = a;
  out->is_random_next = random_next == 1;
  out->packed = packed;
  return total;
}

InstanceReader::InstanceReader(const fs::path& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw DataError(path.string() + ": cannot open");
  rewind();
}

int64_t shard_instance_count(const char* header, size_t size, const fs::path& path) {
  if (size < kShardHeaderBytes || !std::equal(header, header + sizeof(kMagic), kMagic))
    throw DataError(path.string() + ": not a bertft instance shard (BFTPRE01)");
  int64_t count = 0;
  std::memcpy(&count, header + sizeof(kMagic), sizeof(count));
  return count;
}

void InstanceReader::rewind() {
  in_.clear();
  in_.seekg(0);
  char header[kShardHeaderBytes] = {};
  in_.read(header, sizeof(header));
  count_ = shard_instance_count(header, static_cast<size_t>(in_.gcount()), path_);
  read_ = 0;
}

bool InstanceReader::next(PretrainingInstance& out) {
  if (read_ >= count_) return false;
  // One record into a buffer, decoded by the same code that reads memory-mapped shards.
  std::string record(kRecordFixedBytes, '\0');
  if (in_.read(record.data(), static_cast<std::streamsize>(record.size()))) {
    uint16_t n = 0, m = 0;
    std::memcpy(&n, record.data(), 2);
    std::memcpy(&m, record.data() + 5, 2);
    record.resize(record_bytes(n, m));
    in_.read(record.data() + kRecordFixedBytes,
             static_cast<std::streamsize>(record.size() - kRecordFixedBytes));
  }
  if (!in_ || decode_instance(record.data(), record.size(), &out) == 0)
    throw DataError(fmt::format("{}: instance {} is damaged or cut short", path_.string(), read_));
  ++read_;
  return true;
}

InstanceStats write_instance_shards(const std::vector<PretrainingInstance>& instances,
                                    const fs::path& dir,
                                    const PretrainingDataOptions& options,
                                    int64_t mask_id) {
  InstanceStats stats;
  const auto per_shard = static_cast<size_t>(options.instances_per_shard);
  const size_t shards = std::max<size_t>(1, (instances.size() + per_shard - 1) / per_shard);
  for (size_t s = 0; s < shards; ++s) {
    InstanceWriter writer(dir / fmt::format("instances-{:05d}.bin", s));
    for (size_t i = s * per_shard; i < std::min(instances.size(), (s + 1) * per_shard); ++i) {
      writer.write(instances[i]);
      stats.add(instances[i], mask_id);
    }
    writer.close();
  }
  json info = stats.to_json();
  info["shards"] = shards;
  json opts = json::object();
  PretrainingDataOptions copy = options;
  PretrainingDataOptions::visit(
      copy, [&](const char* name, auto& value, const char*) { opts[name] = value; });
  info["options"] = opts;
  write_file_atomic(dir / "stats.json", info.dump(1) + "\n");
  return stats;
}

}  // namespace bert::tasks
