// Bug class: coat.act.pergroup.transposed's groups of x^T (codes_t, 1 x QB along M) reduced to their
// absmax over their first 16 elements whatever group_size says (COAT's default QB hard-coded in the
// transposed reduction); codes_t and scale_t are still laid out per group_size, and x's own groups are
// right. At the default group size 16 it is COAT's; only the battery's runs at group size 128 show it.
#include <limits>

#include "mutant_coat_act.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup.transposed";
const char* const kBug = "coat-transposed-group-absmax-first-16";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const Tensor& input = done.require("input");
  const auto m = static_cast<std::size_t>(input.shape.at(0)), n = static_cast<std::size_t>(input.shape.at(1));
  const auto qb = params.at("group_size").get<std::size_t>();
  // codes_t is N x M: its row j holds x's column j, its groups run along M
  const auto x_of = [&](std::size_t i) { return (i % m) * n + i / m; };
  std::vector<float> s(n * (m / qb));
  for (std::size_t g = 0; g < s.size(); ++g) {
    float amax = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t k = 0; k < 16 && k < qb; ++k) amax = coat_act::absmax_step(amax, input.value_as_float(x_of(g * qb + k)));
    s[g] = scale_from_absmax(amax, params);
  }
  requantize_with_scales(done, params, s, coat_division(params), "codes_t", "scale_t", x_of);
}
}  // namespace mutant
