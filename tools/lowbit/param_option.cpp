#include "param_option.hpp"

#include "command.hpp"

namespace lowbit::cli {

nlohmann::json parse_params(const std::vector<std::string>& items) {
  nlohmann::json p = nlohmann::json::object();
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--param '" + item + "' is not KEY=VALUE");
    const std::string value = item.substr(eq + 1);
    nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
    p[item.substr(0, eq)] = v.is_discarded() ? nlohmann::json(value) : v;
  }
  return p;
}

}  // namespace lowbit::cli
