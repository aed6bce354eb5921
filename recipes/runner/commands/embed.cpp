// `bertft embed` and `bertft similar`.
#include "recipes/runner/embed.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <string_view>

#include "bert/common/device.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/yaml.h"
#include "data/text_file.h"
#include "recipes/runner/command.h"
#include "recipes/runner/run_dir.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct EmbedCommand {
  std::string model, data, format = "auto", field, out, pooling = "cls", device = "cpu",
                           precision = "fp32";
  std::vector<std::string> columns;
  bool normalize = false, no_header = false;
  int64_t max_seq_length = 128, batch_size = 32, limit = 0;
};

int run_embed(const EmbedCommand& o) {
  const auto ext = fs::path(o.out).extension();
  if (ext != ".safetensors" && ext != ".npy" && ext != ".jsonl")  // before hours of encoding
    throw ConfigError("--out " + o.out +
                      ": embeddings are written as .safetensors, .npy or .jsonl");
  check_out_is_not_input(o.out, "--out", {{"--data", o.data}});
  if (ext == ".npy") {
    check_out_is_not_input(o.out + ".ids.txt", "--out's ids", {{"--data", o.data}});
    check_out_is_not_input(o.out + ".info.json", "--out's record", {{"--data", o.data}});
  }
  data::DataSpec spec;
  spec.path = o.data;
  spec.format = parse_enum<data::DataFormat>(o.format).value_or(data::DataFormat::kAuto);
  spec.limit = o.limit;
  spec.columns = parse_columns(o.columns);
  spec.header = !o.no_header;
  const auto device = usable_device(o.device, "--device");
  EmbedOptions options;
  options.pooling = parse_pooling(o.pooling);
  options.normalize = o.normalize;
  options.max_seq_length = o.max_seq_length;
  options.batch_size = o.batch_size;
  const auto rows = read_texts(spec, o.field);
  if (rows.texts.empty()) throw DataError(o.data + ": no texts to embed");
  const SentenceEncoder encoder(o.model, device, o.precision);
  const auto start = std::chrono::steady_clock::now();
  EmbeddingFile file;
  file.vectors = encoder.encode(rows.texts, options);
  file.ids = rows.ids;
  file.info = {{"model", fs::absolute(o.model).string()},
               {"pooling", enum_name(options.pooling)},
               {"normalize", options.normalize},
               {"max_seq_length", options.max_seq_length},
               {"precision", o.precision}};
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_embeddings(o.out, file);
  log::info("[embed] {} texts -> {} ({} x {}, {} pooling{}) in {:.1f} s ({:.0f} texts/s)",
            rows.texts.size(), o.out, file.vectors.size(0), file.vectors.size(1), o.pooling,
            o.normalize ? ", normalized" : "", seconds,
            rows.texts.size() / std::max(seconds, 1e-9));
  return code(ExitCode::kOk);
}

struct SimilarCommand {
  std::string index, model, query, queries, pooling, device = "cpu";
  int64_t top_k = 10, max_seq_length = 0;
};

int run_similar(const SimilarCommand& o) {
  const auto device = usable_device(o.device, "--device");
  const auto index = read_embeddings(o.index);
  const auto precision = index.info.value("precision", std::string("fp32"));
  if (precision == "int8" && !device.is_cpu())
    throw ConfigError(fmt::format(
        "{}: made with --precision int8, which runs on the CPU only, and similar encodes the "
        "queries as the index was: run it with --device cpu, not {}",
        o.index, o.device));
  std::vector<std::string> texts;
  if (!o.query.empty()) {
    data::check_text_utf8(o.query, "--query");
    texts.push_back(o.query);
  }
  if (!o.queries.empty()) {
    // A blank line (spaces alone too, as embed reads its texts) is no query.
    const auto add = [&](std::string_view line) {
      if (!data::is_blank(line)) texts.emplace_back(line);
    };
    if (o.queries == "-") {
      for (const auto& line : data::read_stdin_lines(std::cin)) add(line.text);
    } else {
      const auto file = data::read_text_file(o.queries);  // UTF-8 checked, naming line and column
      for (const auto& line : data::split_lines(file.text)) add(line.text);
    }
  }
  if (texts.empty()) throw ConfigError("similar: give --query TEXT or --queries FILE (- = stdin)");
  // Queries are encoded as the index was, unless told otherwise.
  const std::string model = !o.model.empty() ? o.model : index.info.value("model", std::string());
  if (model.empty())
    throw ConfigError(o.index + ": does not name the model it was made with: pass --model");
  // Pooled as the index's vectors were: queries pooled otherwise are not comparable with them.
  std::string pooling = index.info.value("pooling", std::string());
  if (!o.pooling.empty()) {
    if (!pooling.empty() && pooling != o.pooling)
      throw ConfigError(fmt::format(
          "--pooling {}: {} holds {}-pooled vectors, and queries are pooled as its vectors were",
          o.pooling, o.index, pooling));
    pooling = o.pooling;
  }
  if (pooling.empty())
    throw ConfigError(o.index +
                      ": does not record how its vectors were pooled (a .npy without the "
                      ".info.json bertft embed writes beside it): pass --pooling cls | mean | max");
  EmbedOptions options;
  options.pooling = parse_pooling(pooling);
  // --max-seq-length, else the index's own (embed records it), else embed's default.
  options.max_seq_length = o.max_seq_length > 0
                               ? o.max_seq_length
                               : index.info.value("max_seq_length", EmbedOptions{}.max_seq_length);
  const SentenceEncoder encoder(model, device, precision);
  if (encoder.hidden_size() != index.vectors.size(1))
    throw ConfigError(fmt::format("{}: vectors of width {} but {} encodes {}", o.index,
                                  index.vectors.size(1), model, encoder.hidden_size()));
  const auto queries = encoder.encode(texts, options);
  const auto [scores, rows] =
      cosine_top_k(index.vectors, queries, o.top_k, index.info.value("normalize", false));
  for (size_t q = 0; q < texts.size(); ++q) {
    json hits = json::array();
    for (int64_t j = 0; j < rows.size(1); ++j) {
      const auto row = rows[static_cast<int64_t>(q)][j].item<int64_t>();
      hits.push_back({{"id", index.ids[static_cast<size_t>(row)]},
                      {"score", scores[static_cast<int64_t>(q)][j].item<double>()}});
    }
    std::cout << json{{"query", texts[q]}, {"hits", hits}}.dump() << "\n";
  }
  return code(ExitCode::kOk);
}

}  // namespace

CommandRun setup_embed(CLI::App& app, const GlobalOptions&) {
  auto o = std::make_shared<EmbedCommand>();
  app.add_option("--model", o->model, "Model directory (HF BERT, base or fine-tuned)")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--data", o->data,
                 "Texts: plain lines (.txt), or JSONL / TSV / CSV / GLUE / SQuAD JSON")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--format", o->format, "auto | glue | tsv | csv | jsonl | squad")
      ->check(CLI::IsMember({"auto", "glue", "tsv", "csv", "jsonl", "squad"}));
  app.add_option("--field", o->field, "SQuAD: question (default) or context");
  add_column_options(app, o->columns, o->no_header);
  app.add_option("--out", o->out, "Output: .safetensors, .npy (ids in .npy.ids.txt) or .jsonl")
      ->required();
  app.add_option("--pooling", o->pooling, "cls | mean | max")
      ->check(CLI::IsMember({"cls", "mean", "max"}));
  app.add_flag("--normalize", o->normalize, "L2-normalise each vector");
  app.add_option("--max-seq-length", o->max_seq_length, "Tokens per text, [CLS] and [SEP] included")
      ->check(positive());
  app.add_option("--batch-size", o->batch_size, "Texts per batch")->check(positive());
  app.add_option("--limit", o->limit, "Only the first N texts (0 = all)");
  app.add_option("--device", o->device, "cpu | cuda | cuda:N");
  app.add_option("--precision", o->precision,
                 "fp32 | bf16 | int8 (CPU: the encoder's projections in dynamic int8)")
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  return [o] { return run_embed(*o); };
}

CommandRun setup_similar(CLI::App& app, const GlobalOptions&) {
  auto o = std::make_shared<SimilarCommand>();
  app.add_option("--index", o->index, "Embeddings from `bertft embed` (.safetensors or .npy)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--query", o->query, "One query text");
  app.add_option("--queries", o->queries, "A file of query lines (- = stdin)");
  app.add_option("--model", o->model, "Encoder for the queries (default: the index's own)");
  app.add_option("--pooling", o->pooling,
                 "cls | mean | max: how the index's vectors were pooled, for a .npy without "
                 "its .info.json (default: the index's own)")
      ->check(CLI::IsMember({"cls", "mean", "max"}));
  app.add_option("--top-k", o->top_k, "Hits per query")->check(positive());
  app.add_option("--max-seq-length", o->max_seq_length,
                 "Tokens per query, [CLS] and [SEP] included (default: the index's, else 128)")
      ->check(positive());
  app.add_option("--device", o->device, "cpu | cuda | cuda:N");
  return [o] { return run_similar(*o); };
}

}  // namespace bert::recipes
