#include "lowbit/tolerance.hpp"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "lowbit/atomic_file.hpp"
#include "lowbit/case.hpp"
#include "lowbit/sha256.hpp"

namespace lowbit {

namespace {

// A policy argument is a path only when it says so; otherwise it is a name, looked up only among
// the shipped policies, so that a stray file in the working directory cannot replace one.
bool names_a_file(const std::string& name_or_path) {
  return name_or_path.find('/') != std::string::npos || std::filesystem::path(name_or_path).extension() == ".json";
}

}  // namespace

TolerancePolicy load_tolerance_policy(const std::string& name_or_path, const std::filesystem::path& policy_dir) {
  if (name_or_path == "bit-exact") return {};
  const bool given_path = names_a_file(name_or_path);
  const std::filesystem::path path = given_path ? std::filesystem::path(name_or_path) : policy_dir / (name_or_path + ".json");
  if (!std::filesystem::is_regular_file(path)) {
    if (given_path) throw std::runtime_error("tolerance policy file " + name_or_path + ": no such file");
    throw std::runtime_error("tolerance policy '" + name_or_path + "': not among the shipped policies (no " +
                             path.string() + "; a policy file is given by a path containing '/' or ending in .json)");
  }
  note_input_file(path.string());  // an input of the run: no report may be written over it
  const auto bytes = read_file_bytes(path.string());
  TolerancePolicy p;
  try {
    const auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
    p.name = j.at("name").get<std::string>();
    p.description = j.value("description", "");
    p.allow_ties = j.value("allow_ties", false);
    p.boundary_ulps = j.value("boundary_ulps", 0.0);
    p.allow_scale_propagated = j.value("allow_scale_propagated", false);
    p.allow_library_rounding = j.value("allow_library_rounding", false);
    if (!(p.boundary_ulps >= 0) || !std::isfinite(p.boundary_ulps))
      throw std::runtime_error("boundary_ulps must be a finite number >= 0");
    if (p.name.empty()) throw std::runtime_error("name is empty");
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": not a valid tolerance policy (" + e.what() + ")");
  }
  if (!given_path) return p;
  // A file of the user's is named by its path and contents wherever the policy is shown, and may not
  // pass for a shipped policy: "conformant under policy bit-exact" must mean bit-exact. The shipped
  // file itself, given by its path, is that shipped policy.
  const std::filesystem::path shipped = policy_dir / (p.name + ".json");
  const bool is_shipped_name = p.name == "bit-exact" || std::filesystem::exists(shipped);
  if (is_shipped_name && std::filesystem::exists(shipped) && same_file(path.string(), shipped.string())) return p;
  if (is_shipped_name)
    throw std::runtime_error("tolerance policy file " + path.string() + ": calls itself '" + p.name +
                             "', the name of a shipped policy; a policy file needs a name of its own");
  p.file = path.string();
  p.file_sha256 = sha256_hex(bytes);
  p.name += " (file " + p.file + ", sha256 " + p.file_sha256 + ")";
  return p;
}

}  // namespace lowbit
