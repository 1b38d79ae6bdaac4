#pragma once
// lowbit audit --trajectory: a deterministic least-squares problem trained with float32 AdamW and
// with each quantized-state variant, every one through the library's own fused step (docs/audit.md).
// The matrix products run on one thread each, so a run is the same bytes on any machine thread count.
#include <cstdint>
#include <string>
#include <vector>

namespace lowbit::audit {

// The variants: fp32 (torchao's step on dense float32 states), torchao-8bit, torchao-4bit,
// torchao-fp8, bnb-8bit (bitsandbytes' CPU step), coat-fp8, coat-fp8-expand.
const std::vector<std::string>& trajectory_variants();

struct TrajectoryPoint {
  double loss = 0;
  std::vector<float> w;  // the parameters at that point
};

// min_W 0.5 mean((X W - Y)^2), X 512x64 with column scales exp(N(0,1)) (ill-conditioned), W 64x64
// from 0 (4096 parameters: torchao quantizes tensors of at least 4096 elements), Y = X W* + 0.01
// noise, all drawn from `seed`. Returns the loss and parameters before step 1 and after every step
// (steps + 1 points); lr as given, betas (0.9, 0.999), eps 1e-8, no weight decay.
std::vector<TrajectoryPoint> run_trajectory_variant(std::uint64_t seed, const std::string& variant, int steps, double lr);

}  // namespace lowbit::audit
