#include "report_output.hpp"

#include "command.hpp"
#include "lowbit/atomic_file.hpp"

namespace lowbit::cli {

void ReportOutput::add_options(CLI::App& app) {
  app.add_option("--report", json_path, "Write the JSON report here (and the Markdown beside it, as .md)");
  app.add_option("--markdown", markdown_path, "Write the Markdown report here");
}

void ReportOutput::prepare() {
  if (markdown_path.empty() && !json_path.empty()) {
    const auto dot = json_path.rfind('.');
    const auto slash = json_path.rfind('/');
    const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
    markdown_path = (has_extension ? json_path.substr(0, dot) : json_path) + ".md";
  }
  if (!json_path.empty() && same_file(json_path, markdown_path))
    throw UsageError("the JSON report and the Markdown report would both be written to '" + json_path +
                     "'; name the Markdown file with --markdown");
  try {
    if (!json_path.empty()) ensure_writable(json_path);
    if (!markdown_path.empty()) ensure_writable(markdown_path);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

void ReportOutput::write(const std::string& json_text, const std::string& markdown_text,
                         const std::vector<std::pair<std::string, std::string>>& more) const {
  FileBatch batch;
  for (const auto& [path, contents] : more) batch.stage(path, contents);
  if (!json_path.empty()) batch.stage(json_path, json_text);
  if (!markdown_path.empty()) batch.stage(markdown_path, markdown_text);
  batch.publish();
}

}  // namespace lowbit::cli
