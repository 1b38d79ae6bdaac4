// Bug class: the lerp weights swapped, beta and 1 - beta exchanged: m = lerp(m_old, g, beta1) and
// v = lerp(v_old, g^2, beta2), so the new gradient takes the weight the history should keep. Written
// in the reference's fused form, so that the weights are the only difference.
#include <cmath>

#include "mutant_plugin.hpp"
#include "mutant_torchao_adam.hpp"

namespace mutant {
const char* const kFormat = "torchao.adam.codebook8";
const char* const kBug = "lerp-weights-swapped";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  const auto beta1 = static_cast<float>(params.at("beta1").get<double>());
  const auto beta2 = static_cast<float>(params.at("beta2").get<double>());
  restep_torchao_codebook(done, params, [beta1, beta2](float p, float g, float m_old, float v_old,
                                                       const lowbit::optimizer::TorchaoAdamScalars& s) {
    if (s.adamw) p = p - (s.lr * s.wd) * p;
    else g = g + s.wd * p;
    const float m = std::fma(beta1, g - m_old, m_old);  // the bug: beta1 where the reference has 1 - beta1
    const float v = std::fma(beta2, g * g - v_old, v_old);
    const float denom = std::sqrt(v) / s.sqrt_bc2 + s.eps;
    return lowbit::optimizer::AdamElement{lowbit::optimizer::torch_sub(p, (s.lr * (m / s.bc1)) / denom), m, v};
  });
}
}  // namespace mutant
