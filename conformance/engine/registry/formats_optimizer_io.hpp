#pragma once
// Helpers shared by the optimizer formats' registry entries: reading a case's moments and scalars,
// writing the new state, and the library-rounding test for a differing parameter.
#include <span>
#include <string>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"

namespace lowbit::optimizer_io {

inline std::vector<std::int64_t> flat(std::size_t n) { return {static_cast<std::int64_t>(n)}; }

// A one-element float tensor's value; CaseError naming the tensor otherwise.
float scalar(const Case& in, const std::string& name);

// A quantized moment: <prefix>.codes, <prefix>.scale and, for codebooks, <prefix>.qmap.
optimizer::Moment read_moment(const Case& in, const std::string& prefix, bool fp8);
void write_moment(std::vector<Tensor>& out, const std::string& prefix, const optimizer::Moment& m, bool fp8);

// The param `cpu_capability` (what torch.backends.cpu.get_cpu_capability() reports, lower case:
// avx2, avx512 or default) as the arithmetic it implies: whether torch's CPU lerp, add(alpha) and
// addcmul round once (vectorized kernels, built with FMA) or twice (the scalar default kernels).
bool fused_on(const nlohmann::json& params);

// bitsandbytes' 8-bit state initialization (Optimizer8bit.init_state): for each named state codes 0
// and absmax 0, one absmax per 256 elements (partial tail), and its qmap ("dynamic", the signed map,
// or "udynamic"); param as given, grad zero, "step" 1 (the step the update uses).
struct BnbStateName {
  std::string name;
  bool is_signed;
};
Case bnb_fresh_state(std::span<const float> param, const std::vector<BnbStateName>& states);

// torchao's new parameter as its step writes it (p32 the float32 result of element i): RNE into its
// dtype, or the stochastic rounding's draw; a bf16 NaN as torch's vectorized or scalar copy writes it
// (TorchaoAdamOptions::vectorized_copies).
float written(float p32, optimizer::ParamDtype dtype, bool vectorized, const std::vector<std::int32_t>& draws,
              std::size_t i);

// The hyperparameters of a format's resolved params, as the formats' reference runs and the diagnosis's
// variants pass them to the reference: bitsandbytes' Adam, a one-state rule (beta1, beta2: the params
// passed as the kernel's betas, null for 0.0), AdEMAMix (t_alpha and t_beta3 >= 0), and torchao's Adam,
// whose lr is the case's float32 tensor `lr` (CaseError where the params name another).
optimizer::BnbAdamHyper bnb_adam_hyper(const nlohmann::json& p);
optimizer::BnbRuleHyper bnb_rule_hyper(const nlohmann::json& p, const char* beta1, const char* beta2);
optimizer::BnbAdemamixHyper bnb_ademamix_hyper(const nlohmann::json& p);
optimizer::AdamHyper torchao_adam_hyper(const Case& in, const nlohmann::json& p);

// bitsandbytes' one-state rules by format name (bnb.lion8bit.cpu and .cuda, bnb.momentum8bit.*,
// bnb.rmsprop8bit.*, bnb.adagrad8bit.*): the rule, its state and the params passed as the kernel's beta1
// and beta2 (null: 0.0); null for any other format.
struct BnbOneState {
  optimizer::BnbRule rule;
  const char* state;
  const char* beta1;
  const char* beta2;
};
const BnbOneState* bnb_one_state(const std::string& format);

// A float32, bf16 or f16 tensor's elements widened to float (exactly; NaN payloads kept).
std::vector<float> widened(const Tensor& t);
// values (exactly representable in like's dtype) as a tensor of like's dtype and shape.
Tensor narrowed(std::string name, const Tensor& like, const std::vector<float>& values);

// A sqrt that is faithful but not correctly rounded (torch's CPU sqrt, MKL VML) returns sqrtf(x) or
// the other float that brackets the exact root: +1 or -1 (ulps from sqrtf(x)) for that other float,
// 0 when the root is exact or not finite (no other faithful result).
int faithful_sqrt_other(float x);

// Both the expected and the actual bit patterns are among the candidates: the two sides differ only
// in how one operation the candidates vary (torch's CPU sqrt) rounded.
bool both_reproduced(std::uint64_t expected_bits, std::uint64_t actual_bits, const std::vector<std::uint64_t>& candidates);

}  // namespace lowbit::optimizer_io
