#pragma once
// One GPU check's outcome, as lowbit-gpu-checks reports it in JSON and Markdown.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace lowbit::gpu {

struct Check {
  std::string name;     // e.g. "fp8.float_to_fp8.e4m3.satfinite"
  bool passed = false;  // the expectation held (what each check expects is in its summary)
  std::string summary;  // one line for the Markdown table
  nlohmann::json figures = nlohmann::json::object();
};

struct CheckContext {
  int threads = 1;                  // host threads for the reference side
  std::filesystem::path out;        // where data files go beside the reports
  std::string bnb_library;          // libbitsandbytes_cuda130.so; empty: the bnb group is not run
  std::filesystem::path policy_dir; // the shipped tolerance policies
  std::vector<std::string> kernels_plugins;  // our CUDA plugins (cuda_blockwise_plugin.so first); none: no bandwidth group
};

std::vector<Check> fp8_checks(const CheckContext& context);
std::vector<Check> approx_checks(const CheckContext& context);  // rcp.approx, div.full, powf
std::vector<Check> bnb_cuda_checks(const CheckContext& context);  // bitsandbytes' CUDA library: the quantizer
std::vector<Check> bnb_optimizer_checks(const CheckContext& context);  // and its 8-bit block-wise optimizers
std::vector<Check> bandwidth_checks(const CheckContext& context);  // our block-wise kernels against a copy

}  // namespace lowbit::gpu
