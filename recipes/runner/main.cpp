#include <c10/util/Exception.h>

#include <exception>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/threads.h"
#include "recipes/runner/cli.h"
#include "recipes/runner/run_dir.h"

int main(int argc, char** argv) {
  bert::apply_load_time_settings(argv);
  bert::keep_freed_memory();
  try {
    return bert::recipes::run_cli(argc, argv);
  } catch (const bert::ConfigError& e) {
    for (const auto& problem : e.problems()) bert::log::error("{}", problem);
    return 2;
  } catch (const c10::Error& e) {  // TORCH_CHECK failures: the message without the C++ backtrace
    bert::log::error("{}", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    bert::log::error("{}", e.what());
    return 1;
  }
}
