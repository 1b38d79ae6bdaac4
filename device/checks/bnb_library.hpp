#pragma once
// What the GPU checks against bitsandbytes' CUDA library share (bnb_cuda_checks.cpp: the block-wise
// quantizer; bnb_optimizer_checks.cpp: the 8-bit optimizers): the library loaded with dlopen, its
// entry points looked up by name, and a comparison's figures with the ulp budget it would need.
#include <string>
#include <vector>

#include "check_report.hpp"
#include "lowbit/case.hpp"
#include "lowbit/tolerance.hpp"

namespace lowbit::gpu {

// libbitsandbytes_cuda130.so, loaded once (RTLD_NOW | RTLD_LOCAL); std::runtime_error naming the
// file when dlopen fails.
class BnbLibrary {
 public:
  explicit BnbLibrary(const std::string& path);
  // The entry point `name`, or nullptr when the library lacks it.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_ = nullptr;
};

// The entry points the bnb group calls: the quantizer's two, then each optimizer format's.
std::vector<std::string> bnb_entry_points();

// --bnb-entry-points: prints one line per entry point ("has NAME" or "lacks NAME") and returns 0 when
// the library has them all, 1 when it lacks one; needs no GPU. std::runtime_error when it does not load.
int print_bnb_entry_points(const std::string& path);

// Compares the library's case with the reference's under `shipped` and sets c.passed and the figures
// both checks report: policy, conformant, per-tensor mismatches by class, and the boundary budget
// the library needs (one more comparison with no limit on it: under u ulps the case conforms when
// everything else does and no code lies farther than u), with conformance at 0 ... 1024 ulps.
// Returns whether the case conforms under the shipped policy.
bool compare_with_budget(const Case& expected, const Case& actual, const TolerancePolicy& shipped, Check& c);

}  // namespace lowbit::gpu
