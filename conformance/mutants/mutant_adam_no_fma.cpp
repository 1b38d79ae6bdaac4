// Bug class: the moments computed without the fused multiply-add. torch.lerp on the CPU rounds
// m_old + w (g - m_old) once (a fused multiply-add); a kernel that writes the lerp out as a
// multiply and an add rounds twice, and the moments, the codes that store them and the new
// parameter move by an ulp here and there (the project is built with -ffp-contract=off, so the
// compiler fuses nothing back).
#include <cmath>

#include "mutant_plugin.hpp"
#include "mutant_torchao_adam.hpp"

namespace mutant {
const char* const kFormat = "torchao.adam.codebook8";
const char* const kBug = "moments-without-fma";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  restep_torchao_codebook(done, params, [](float p, float g, float m_old, float v_old,
                                           const lowbit::optimizer::TorchaoAdamScalars& s) {
    if (s.adamw) p = p - (s.lr * s.wd) * p;
    else g = g + s.wd * p;
    const float m = m_old + s.w1 * (g - m_old);  // the bug: two roundings where the reference has one
    const float v = v_old + s.w2 * (g * g - v_old);
    const float denom = std::sqrt(v) / s.sqrt_bc2 + s.eps;
    return lowbit::optimizer::AdamElement{lowbit::optimizer::torch_sub(p, (s.lr * (m / s.bc1)) / denom), m, v};
  });
}
}  // namespace mutant
