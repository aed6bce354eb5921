#pragma once

namespace bert::recipes {

/// Parses the command line and runs one `bertft` sub-command. Returns the exit code: 0 on
/// success, 2 for configuration errors (thrown as ConfigError), 1 for other failures (thrown).
int run_cli(int argc, char** argv);

}  // namespace bert::recipes
