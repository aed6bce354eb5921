#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bert::data {

/// What bertft knows of one GLUE task: its TSV columns, label set and official metrics.
struct GlueTask {
  std::string name;            ///< cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli
  std::string text_a, text_b;  ///< column names (CoLA: numbers; it has no header)
  std::string label;           ///< label column ("" for none)
  std::string id;              ///< id column ("" = row number)
  bool header = true;
  bool regression = false;           ///< STS-B
  std::vector<std::string> labels;   ///< label names in id order (HF's order)
  std::vector<std::string> metrics;  ///< what GLUE reports, main metric first
};

/// The task named `name` (also accepts "SST-2", "STS-B", "MNLI-mm" spellings); nullopt if
/// not a GLUE task.
std::optional<GlueTask> find_glue_task(const std::string& name);

/// All task names, for messages.
std::string glue_task_names();

}  // namespace bert::data
