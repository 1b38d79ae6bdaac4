#pragma once
// The sweep's tolerance report: JSON for machines, Markdown for people (docs/formats/fp8.md
// describes the fields). A sweep's policy is bit-exactness: any mismatch is non-conformant.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/fp8_sweep.hpp"

namespace lowbit::cli {

struct SweepRun {
  fp8::SweepConfig config;
  std::string nan_encoding_name;
  fp8::SweepResult result;
};

nlohmann::json sweep_report_json(const std::vector<SweepRun>& runs);
std::string sweep_report_markdown(const std::vector<SweepRun>& runs);

}  // namespace lowbit::cli
