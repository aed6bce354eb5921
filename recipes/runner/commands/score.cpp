// `bertft score`.
#include "recipes/runner/score.h"

#include <fmt/format.h>

#include "recipes/runner/command.h"
#include "tasks/registry.h"

namespace bert::recipes {

CommandRun setup_score(CLI::App& app, const GlobalOptions&) {
  auto o = std::make_shared<ScoreOptions>();
  auto& r = o->request;
  // The tasks and what each reads come from the task registry.
  std::string formats;
  for (const auto& t : tasks::TaskRegistry::global().tasks())
    if (t.score) formats += fmt::format("\n  {}: {}", t.name, t.score_formats);
  app.add_option("--task", o->task, "The task whose scorer to use:" + formats)->required();
  app.add_option("--data", r.data, "Gold data (GLUE TSV, CSV/JSONL, SWAG CSV, SQuAD JSON, CoNLL)")
      ->check(CLI::ExistingFile);
  app.add_option("--predictions", r.predictions, "Predictions, in the task's format (see --task)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--format", r.format,
                 "Data format: auto | glue | tsv | csv | jsonl | squad | conll | swag");
  app.add_option("--glue-task", r.glue_task, "GLUE task, when not clear from the directory name");
  app.add_option("--na-probs", r.na_probs, "SQuAD v2.0: JSON {id: no-answer probability}")
      ->check(CLI::ExistingFile);
  app.add_option("--na-prob-thresh", r.na_prob_threshold,
                 "SQuAD v2.0 no-answer threshold (default 1.0)");
  app.add_option("--tag-scheme", r.tag_scheme, "iob1 | iob2 | iobes (for --strict)");
  app.add_flag("--strict", r.strict, "Count only well-formed entities (seqeval strict mode)");
  app.add_flag("--regression", r.regression, "Scores, not labels: Pearson and Spearman");
  app.add_option("--positive-label", r.positive_label, "Positive class of binary F1 (default 1)");
  app.add_flag("--multi-label", r.multi_label,
               "Several labels per example (implied by predictions with \"labels\" lists): "
               "micro and macro F1, exact-set accuracy");
  app.add_option("--label-separator", r.label_separator,
                 "--multi-label: what joins a TSV/CSV label cell's labels (default ,)");
  return [o] { return run_score(*o); };
}

}  // namespace bert::recipes
