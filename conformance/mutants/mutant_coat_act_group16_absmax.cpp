// Bug class: coat.act.pergroup's group absmax over the group's first 16 elements whatever group_size
// says (COAT's default QB hard-coded in the reduction), while the codes and scales are still laid out
// per group_size. At the default group size 16 it is COAT's; only the battery's runs at group size 128
// (a group whose largest value lies past its 16th element) show it.
#include <limits>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup";
const char* const kBug = "coat-act-group-absmax-first-16";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const auto qb = params.at("group_size").get<std::size_t>();
  const std::size_t groups = input.element_count() / qb;  // 1 x QB groups along the rows, in memory order
  std::vector<float> s(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    float amax = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t k = 0; k < 16 && k < qb; ++k) amax = coat_act::absmax_step(amax, input.value_as_float(g * qb + k));
    s[g] = scale_from_absmax(amax, params);
  }
  requantize_with_scales(done, params, s, coat_division(params));
}
}  // namespace mutant
