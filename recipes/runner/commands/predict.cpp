// `bertft predict`.
#include "bert/common/device.h"
#include "bert/common/error.h"
#include "recipes/runner/command.h"
#include "recipes/runner/export.h"

namespace bert::recipes {

CommandRun setup_predict(CLI::App& app, const GlobalOptions&) {
  auto o = std::make_shared<PredictOptions>();
  app.add_option("--model", o->model, "Fine-tuned model directory (bertft export or HF)")
      ->required()
      ->check(CLI::ExistingDirectory);
  auto* data = app.add_option("--data", o->data,
                              "Data file (JSONL, GLUE TSV, CSV, SQuAD JSON, CoNLL, SWAG CSV)")
                   ->check(CLI::ExistingFile);
  auto* text = app.add_option(
      "--text", o->text,
      "Raw text (- = stdin lines; a tab separates a pair): classification, tagging, or with a "
      "pre-training model the [MASK] tokens filled (and, for a pair, next-sentence prediction)");
  app.add_option("--text-pair", o->text_pair, "The second text of a pair (with --text)")
      ->needs(text);
  app.add_option("--choice", o->choices,
                 "Multiple choice: a candidate for the context in --text (repeat, two or more)")
      ->needs(text);
  app.add_option("--top-k", o->top_k,
                 "Pre-training models: candidates per mask token (default 5); question "
                 "answering: with 2 or more, the n-best's first answers under \"answers\" too")
      ->check(positive())
      ->default_str("");  // the task's own default, not 0
  app.add_option("--targets", o->targets,
                 "Pre-training models: only these candidates (tokens, or words whose first token "
                 "stands for them), as the fill-mask pipeline's targets")
      ->needs(text);
  app.add_option("--aggregation", o->aggregation,
                 "Token classification: how sub-tokens become entities, as HF's pipeline's "
                 "aggregation_strategy: none | simple | first | average | max (default first)")
      ->check(CLI::IsMember({"none", "simple", "first", "average", "max"}))
      ->needs(text);
  auto* question = app.add_option("--question", o->question, "Question answering: the question");
  auto* context = app.add_option("--context", o->context, "Question answering: the context");
  question->needs(context);
  context->needs(question);
  data->excludes(text)->excludes(question);
  text->excludes(question);
  app.add_option("--format", o->format, "auto | glue | tsv | csv | jsonl | squad | conll | swag");
  app.add_option("--glue-task", o->glue_task, "GLUE task, when not clear from the directory name");
  auto columns = std::make_shared<std::vector<std::string>>();
  auto no_header = std::make_shared<bool>(false);
  add_column_options(app, *columns, *no_header)->needs(data);
  app.add_option("--out", o->out, "Predictions file (default stdout)");
  app.add_flag("--logits", o->logits,
               "Add each example's raw scores (classification, multiple choice)");
  app.add_option("--batch-size", o->batch_size, "Examples per batch")->check(positive());
  app.add_option("--device", o->device, "cpu | cuda | cuda:N");
  app.add_option("--precision", o->precision,
                 "fp32 | bf16 | int8 (CPU: the encoder's projections in dynamic int8)")
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  return [o, columns, no_header] {
    usable_device(o->device, "--device");  // before the model and data are read
    o->columns = parse_columns(*columns);
    o->header = !*no_header;
    if (!o->text.empty() || !o->question.empty()) return run_predict_text(*o);
    if (o->data.empty())
      throw ConfigError("predict: give --data FILE, --text TEXT or --question/--context");
    if (o->top_k > 0)
      throw ConfigError("predict --top-k: for raw text (--text, --question), not --data");
    return run_predict(*o);
  };
}

}  // namespace bert::recipes
