// `bertft recipe-keys`: every key a recipe may hold, with type, default and meaning.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "recipes/runner/command.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"

namespace bert::recipes {

CommandRun setup_recipe_keys(CLI::App& app, const GlobalOptions&) {
  auto task = std::make_shared<std::string>();
  app.add_option("--task", *task, "Only this task's task.* options (default: every task's)");
  return [task] {
    auto docs = recipe_key_docs(*task);
    constexpr size_t kTypeWidth = 14;  // a longer type ("one of: ...") goes after the help
    size_t key_width = 0;
    for (auto& d : docs) {
      key_width = std::max(key_width, d.key.size());
      if (d.type.size() > kTypeWidth) {
        if (d.help.find(" | ") == std::string::npos) d.help += " [" + d.type + "]";
        d.type = d.type.rfind("one of", 0) == 0 ? "choice" : "see help";
      }
    }
    for (const auto& d : docs)
      std::cout << fmt::format("{:<{}}  {:<{}}  {:<12}  {}\n", d.key, key_width, d.type, kTypeWidth,
                               d.default_value.empty() ? "" : "= " + d.default_value, d.help);
    return code(ExitCode::kOk);
  };
}

}  // namespace bert::recipes
