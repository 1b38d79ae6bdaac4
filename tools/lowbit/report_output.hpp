#pragma once
// Where a command's reports go: --report (JSON) and --markdown; a JSON path alone also writes the
// Markdown beside it. Paths are checked before the work starts.
#include <CLI/CLI.hpp>
#include <string>

namespace lowbit::cli {

struct ReportOutput {
  std::string json_path;
  std::string markdown_path;

  void add_options(CLI::App& app);
  // Resolves the Markdown path and fails early (UsageError) on an unwritable path.
  void prepare();
  void write(const std::string& json_text, const std::string& markdown_text) const;
};

}  // namespace lowbit::cli
