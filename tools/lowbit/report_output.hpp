#pragma once
// Where a command's reports go: --report (JSON) and --markdown; a JSON path alone also writes the
// Markdown beside it. Paths are checked before the work starts.
#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

namespace lowbit::cli {

struct ReportOutput {
  std::string json_path;
  std::string markdown_path;

  void add_options(CLI::App& app);
  // Resolves the Markdown path and fails early (UsageError) on an unwritable path.
  void prepare();
  // The reports, and `more` files of the run (audit's --csv: path, contents), all or none: each is
  // checked (a regular file, not an input or earlier output of the run) and staged before any is
  // renamed into place, so a refused one leaves no other behind.
  void write(const std::string& json_text, const std::string& markdown_text,
             const std::vector<std::pair<std::string, std::string>>& more = {}) const;
};

}  // namespace lowbit::cli
