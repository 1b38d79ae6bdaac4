#include "lowbit/tolerance.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "lowbit/case.hpp"

namespace lowbit {

TolerancePolicy load_tolerance_policy(const std::string& name_or_path) {
  if (name_or_path == "bit-exact") return {};
  std::filesystem::path path(name_or_path);
  if (!std::filesystem::exists(path)) path = std::filesystem::path(LOWBIT_POLICY_DIR) / (name_or_path + ".json");
  if (!std::filesystem::exists(path))
    throw std::runtime_error("tolerance policy '" + name_or_path + "': no such file, and no policy of that name in " +
                             std::string(LOWBIT_POLICY_DIR));
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
