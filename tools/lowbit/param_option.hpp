#pragma once
// --param KEY=VALUE (golden generate, verify): the items as a JSON object, each value read as JSON
// where it is JSON (64, 0.01, true, "x") and as a string otherwise (map=dynamic_unsigned).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lowbit::cli {
// UsageError "--param 'ITEM' is not KEY=VALUE" for an item without a key.
nlohmann::json parse_params(const std::vector<std::string>& items);
}  // namespace lowbit::cli
