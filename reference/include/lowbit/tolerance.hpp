#pragma once
// A tolerance policy is data: which classes of mismatch an operation may show and still conform.
// Built in: "bit-exact". Others are JSON files in policies/ (docs/tolerance-policy.md), or any
// JSON file named by path.
#include <string>

namespace lowbit {

struct TolerancePolicy {
  std::string name = "bit-exact";
  std::string description = "every bit of every output equals the expected bits";
  bool allow_ties = false;            // a different code only where the input lies exactly on a decision boundary
  double boundary_ulps = 0;           // ... or within this many binary32 ulps of one
  bool allow_scale_propagated = false;  // a code that differs only because its block's scale differs
  // a value that the reference reproduces exactly once one documented library operation that is
  // not correctly rounded (e.g. torch's CPU sqrt) is taken one ulp off (docs/tolerance-policy.md)
  bool allow_library_rounding = false;
};

// "bit-exact", a name in the policy folder (LOWBIT_POLICY_DIR), or a path to a JSON file.
// Throws std::runtime_error naming what was not found or not valid.
TolerancePolicy load_tolerance_policy(const std::string& name_or_path);

}  // namespace lowbit
