#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bert/tokenizer/wordpiece.h"

namespace bert::recipes {

/// Options of `bertft` itself, set before the subcommand.
struct GlobalOptions {
  int threads = 0;  ///< --threads: intra-op threads (0 = all cores)
  bool verbose = false;
};

/// What a command's setup returns: runs it after the command line was parsed; returns the
/// exit code (ExitCode).
using CommandRun = std::function<int()>;

/// One `bertft` subcommand. `setup` declares its options on `app` (bound to storage the
/// returned CommandRun owns) and returns the CommandRun. Each lives in
/// recipes/runner/commands/<name>.cpp.
struct Command {
  std::string name;
  std::string help;
  std::function<CommandRun(CLI::App& app, const GlobalOptions& global)> setup;
};

/// The command table, in the order --help lists them: adding a command is one file and one line
/// in cli.cpp.
const std::vector<Command>& command_table();

// The commands (one file each under recipes/runner/commands/).
CommandRun setup_quickstart(CLI::App& app, const GlobalOptions& global);
CommandRun setup_validate(CLI::App& app, const GlobalOptions& global);
CommandRun setup_recipe_keys(CLI::App& app, const GlobalOptions& global);
CommandRun setup_train(CLI::App& app, const GlobalOptions& global);
CommandRun setup_sweep(CLI::App& app, const GlobalOptions& global);
CommandRun setup_leaderboard(CLI::App& app, const GlobalOptions& global);
CommandRun setup_export(CLI::App& app, const GlobalOptions& global);
CommandRun setup_predict(CLI::App& app, const GlobalOptions& global);
CommandRun setup_eval(CLI::App& app, const GlobalOptions& global);
CommandRun setup_score(CLI::App& app, const GlobalOptions& global);
CommandRun setup_new_model(CLI::App& app, const GlobalOptions& global);
CommandRun setup_pretrain_data(CLI::App& app, const GlobalOptions& global);
CommandRun setup_vocab(CLI::App& app, const GlobalOptions& global);
CommandRun setup_extend_vocab(CLI::App& app, const GlobalOptions& global);
CommandRun setup_tokenize(CLI::App& app, const GlobalOptions& global);
CommandRun setup_inspect(CLI::App& app, const GlobalOptions& global);
CommandRun setup_convert(CLI::App& app, const GlobalOptions& global);
CommandRun setup_embed(CLI::App& app, const GlobalOptions& global);
CommandRun setup_similar(CLI::App& app, const GlobalOptions& global);

/// `--column ROLE=COLUMN` (repeatable) and `--no-header` of the commands that read a data file
/// outside a recipe (predict, embed): a recipe's `columns:` and `header:` on the command line.
/// Returns the --column option (for needs()).
CLI::Option* add_column_options(CLI::App& app, std::vector<std::string>& columns, bool& no_header);
/// The roles of --column's ROLE=COLUMN values; ConfigError naming one without '=' or a role given
/// twice. The readers check the roles themselves.
std::map<std::string, std::string> parse_columns(const std::vector<std::string>& columns);

/// WordPiece options for a --lowercase flag (uncased: lower-case and strip accents, as HF);
/// shared by the commands that build a tokenizer from a vocab.txt.
tok::WordPieceOptions wordpiece_options(bool lowercase, tok::CasingCheck check);

/// CLI11 checks with short messages ("must be a number >= 0, got '-1'"; CLI11's own ranges
/// print the largest double).
CLI::Validator non_negative();
CLI::Validator positive();

/// Throws ConfigError "--out <out>: ..." where a command that writes a new model or vocabulary
/// (`writes`: what it writes, for the message) would break another: `out` is a file, or a
/// directory that already holds a model (config.json or weights), whose weights and vocabulary
/// would no longer belong together.
void check_out_holds_no_model(const std::string& out, const std::string& writes);

/// Throws ConfigError "--out <out>: holds tokenizer files that the new ones would not replace
/// (...)" where directory `out` holds tokenizer files (vocab.txt, spiece.model, tokenizer.json,
/// added_tokens.json, ...) for which `written` (a file name) is false: a loader would read them
/// with the new ones (vocab.txt is taken before a new spiece.model).
void check_no_other_tokenizer(const std::string& out,
                              const std::function<bool(const std::string& name)>& written);

/// Writes a model directory to `out` as one step: `write` fills a staging directory beside it
/// (".tmp-<name>"), which then becomes `out` (renamed where `out` is new; its files moved in,
/// config.json last, where `out` is a directory already; refused by check_no_other_tokenizer
/// there). A failure in `write` removes the staging directory and leaves `out` as it was, so a
/// rerun finds no half-written model there.
void write_model_dir(const std::string& out,
                     const std::function<void(const std::filesystem::path& dir)>& write);

/// "i/N" of --shard.
std::pair<int, int> parse_shard(const std::string& text);

}  // namespace bert::recipes
