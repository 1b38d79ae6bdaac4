#include "lowbit/tolerance.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "lowbit/case.hpp"

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
  const auto bytes = read_file_bytes(path.string());
  try {
    const auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
    TolerancePolicy p;
    p.name = j.at("name").get<std::string>();
    p.description = j.value("description", "");
    p.allow_ties = j.value("allow_ties", false);
    p.boundary_ulps = j.value("boundary_ulps", 0.0);
    p.allow_scale_propagated = j.value("allow_scale_propagated", false);
    p.allow_library_rounding = j.value("allow_library_rounding", false);
    if (p.boundary_ulps < 0) throw std::runtime_error("boundary_ulps is negative");
    return p;
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": not a valid tolerance policy (" + e.what() + ")");
  }
}

}  // namespace lowbit
