#pragma once
// The tolerance policies the comparison fuzzers use: bit-exact and every policy shipped in policies/
// (LOWBIT_POLICY_DIR, set by conformance/CMakeLists.txt), loaded once as the command loads them.
#include <filesystem>
#include <map>
#include <string>

#include "lowbit/tolerance.hpp"

namespace lowbit::fuzz {

inline const std::map<std::string, TolerancePolicy>& shipped_policies() {
  static const std::map<std::string, TolerancePolicy> policies = [] {
    std::map<std::string, TolerancePolicy> p = {{"bit-exact", TolerancePolicy{}}};
    for (const auto& entry : std::filesystem::directory_iterator(LOWBIT_POLICY_DIR))
      if (entry.path().extension() == ".json") {
        const std::string name = entry.path().stem().string();
        p[name] = load_tolerance_policy(name, LOWBIT_POLICY_DIR);
      }
    return p;
  }();
  return policies;
}

// The policy `choice` picks: 0 the format's default (what compare and conform use unless told), else
// one of the shipped policies.
inline const TolerancePolicy& fuzzed_policy(const std::string& format_default, std::size_t choice) {
  const auto& all = shipped_policies();
  if (choice == 0) {
    const auto it = all.find(format_default);
    return it != all.end() ? it->second : all.at("bit-exact");
  }
  auto it = all.begin();
  std::advance(it, (choice - 1) % all.size());
  return it->second;
}

}  // namespace lowbit::fuzz
