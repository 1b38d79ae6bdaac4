// bnb_library.hpp: the loading and the reporting the bitsandbytes CUDA checks share.
#include "bnb_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "bnb_optimizer_call.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/mismatch.hpp"

namespace lowbit::gpu {

BnbLibrary::BnbLibrary(const std::string& path) : path_(path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) throw std::runtime_error(fmt::format("--bnb-library {}: {}", path, dlerror()));
}

void* BnbLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

std::vector<std::string> bnb_entry_points() {
  std::vector<std::string> names = {"cquantize_blockwise_fp32", "cdequantize_blockwise_fp32"};
  for (const std::string& format : bnb_optimizer_cuda_formats()) names.push_back(bnb_optimizer_symbol(format));
  return names;
}

int print_bnb_entry_points(const std::string& path) {
  const BnbLibrary library(path);
  int missing = 0;
  for (const std::string& name : bnb_entry_points()) {
    const bool has = library.symbol(name.c_str()) != nullptr;
    missing += has ? 0 : 1;
    fmt::print("{} {}\n", has ? "has  " : "lacks", name);
  }
  return missing == 0 ? 0 : 1;
}

namespace {

nlohmann::json tensor_figures(const ComparisonReport& r) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const TensorComparison& t : r.tensors) {
    nlohmann::json by_class = nlohmann::json::object();
    for (MismatchClass k : kMismatchClasses)
      by_class[std::string(mismatch_class_name(k))] = t.by_class[static_cast<std::size_t>(k)];
    tensors[t.name] = {{"elements", t.elements}, {"mismatches", t.mismatches}, {"allowed", t.allowed},
                       {"max_code_distance", t.max_code_distance}, {"by_class", by_class}};
  }
  return tensors;
}

}  // namespace

bool compare_with_budget(const Case& expected, const Case& actual, const TolerancePolicy& shipped, Check& c) {
  const ComparisonReport report = compare_cases(expected, actual, shipped);
  c.passed = report.conformant;
  c.figures["policy"] = shipped.name;
  c.figures["conformant"] = report.conformant;
  c.figures["tensors"] = tensor_figures(report);
  TolerancePolicy unlimited = shipped;
  unlimited.boundary_ulps = std::numeric_limits<double>::infinity();
  const ComparisonReport any_budget = compare_cases(expected, actual, unlimited, 0);
  double needed = 0;
  for (const TensorComparison& t : any_budget.tensors) needed = std::max(needed, t.max_boundary_ulps);
  nlohmann::json budgets = nlohmann::json::object();
  for (double ulps : {0.0, 1.0, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0, 1024.0})
    budgets[fmt::format("{}", ulps)] = any_budget.conformant && needed <= ulps;
  c.figures["conformant_with_boundary_ulps"] = budgets;
  c.figures["needed_boundary_ulps"] = any_budget.conformant ? nlohmann::json(needed) : nlohmann::json("none");
  return report.conformant;
}

}  // namespace lowbit::gpu
