#pragma once
// A tolerance policy is data: which classes of mismatch an operation may show and still conform.
// Built in: "bit-exact". Others are the shipped JSON files (policies/ in the source tree,
// <prefix>/share/lowbit/policies installed; docs/tolerance-policy.md), or any JSON file named by path.
#include <filesystem>
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
  // Not read from a policy file: --strict (verify, compare, conform) sets it for one run, and then
  // every mismatch fails, whatever the flags above allow; the report records it.
  bool strict = false;
  // A policy read from a file of the user's (not a shipped one): its path and the sha256 of its bytes,
  // also appended to name ("mine (file p.json, sha256 ...)"), so every text and report that names the
  // policy says which file it was.
  std::string file, file_sha256;
};
// arithmetic-variant, flushed-subnormal, nan-encoding and genuine are never allowed by any policy.

// "bit-exact"; a path to a JSON file when the argument looks like one (contains '/' or ends in
// ".json"); else the name of a shipped policy, <policy_dir>/<name>.json, and nothing else (a file of
// that name in the working directory is never read instead). The caller says where the shipped
// policies are: the lowbit command finds them beside its binary, a library user passes its own.
// Throws std::runtime_error naming what was looked for and where, or what is not valid; a file that
// calls itself by a shipped policy's name (bit-exact, or any <policy_dir>/<name>.json) is refused,
// unless it is that shipped file. The file is an input of the run (note_input_file).
TolerancePolicy load_tolerance_policy(const std::string& name_or_path, const std::filesystem::path& policy_dir);

}  // namespace lowbit
