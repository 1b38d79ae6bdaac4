#pragma once
// Fused optimizer steps, as the official code computes them: one step from (param, grad, states)
// to new (param, states). docs/formats/torchao-adam.md states the arithmetic.
#include <cstdint>
#include <span>
#include <vector>

#include "lowbit/fp8.hpp"

namespace lowbit::optimizer {

struct AdamHyper {
  float lr = 1e-3f;  // torchao keeps lr as a float32 0-dim tensor
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;  // Python floats
  bool adamw = true;  // decoupled weight decay (AdamW) or L2 on the gradient (Adam)
};

// One block-quantized moment: codes (one per element, 4-bit unpacked), per-block scale, and the qmap
// for codebook states (empty for FP8 states).
struct Moment {
  std::vector<std::uint8_t> codes;
  std::vector<float> scale;
  std::vector<float> qmap;
};

enum class TorchaoState { Codebook, Fp8 };

// Reference: torchao 0.18 optim/adam.py single_param_adam, eager semantics, on OptimState8bit /
// OptimState4bit (Codebook) or OptimStateFp8 (Fp8) moments and a float32 parameter. step is the
// float32 step counter, incremented here first as _AdamBase.step does.
void torchao_adam_step(std::span<float> param, std::span<const float> grad, float& step, Moment& exp_avg,
                       Moment& exp_avg_sq, const AdamHyper& h, TorchaoState kind, std::size_t block_size,
                       const fp8::Policy& fp8_policy = fp8::torch_eager<fp8::E4M3FN>());

}  // namespace lowbit::optimizer
