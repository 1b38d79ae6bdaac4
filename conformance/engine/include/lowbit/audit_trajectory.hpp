#pragma once
// lowbit audit --trajectory: a deterministic least-squares problem trained with every registered
// optimizer format (FormatSpec::fresh_state and run, one case per step), each through the library's
// own fused step (docs/audit.md). The matrix products run on one thread each, so a run is the same
// bytes on any machine thread count.
#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/formats.hpp"

namespace lowbit::audit {

// The run every other is measured against: torchao's step on dense float32 states (plain AdamW).
inline constexpr const char* kTrajectoryBaseline = "torchao.adam.dense";

// The optimizer formats (those with fresh_state and run) matching any of the names or globs (every
// one when there are none), in registry order; std::invalid_argument as select_formats.
std::vector<const FormatSpec*> trajectory_formats(const std::vector<std::string>& globs = {});

struct TrajectoryPoint {
  double loss = 0;
  std::vector<float> w;  // the parameters at that point
};

// min_W 0.5 mean((X W - Y)^2), X 512x64 with column scales exp(N(0,1)) (ill-conditioned), W 64x64
// from 0 (4096 parameters: torchao quantizes tensors of at least 4096 elements), Y = X W* + 0.01
// noise, all drawn from `seed`. Returns the loss and parameters before step 1 and after every step
// (steps + 1 points); the format's default params with lr as given and no weight decay.
std::vector<TrajectoryPoint> run_trajectory(std::uint64_t seed, const FormatSpec& optimizer, int steps, double lr);

}  // namespace lowbit::audit
