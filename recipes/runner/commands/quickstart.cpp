// `bertft quickstart`.
#include "recipes/runner/quickstart.h"

#include "bert/common/signals.h"
#include "recipes/runner/command.h"

namespace bert::recipes {

CommandRun setup_quickstart(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<QuickstartOptions>();
  app.add_option("--out", o->out, "Output directory");
  app.add_option("--seed", o->seed, "Random seed");
  app.add_option("--jobs", o->jobs, "Trials in parallel")->check(positive());
  app.add_flag("--pretrain", o->pretrain,
               "Pre-train the small BERT (MLM + NSP) on generated text first");
  return [o, &global] {
    o->threads = global.threads;
    install_stop_signals();
    return run_quickstart(*o);
  };
}

}  // namespace bert::recipes
