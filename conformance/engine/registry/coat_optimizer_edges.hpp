#pragma once
// The decision points of COAT's FP8 AdamW group quantizers that random gradients never reach
// (engine-internal: the registry's coat.optim.* entries give them as their `edges`): exact zeros where
// the expansion's minimum tree skips them, groups of one magnitude, moments above the minimum's 1e9
// cap, groups whose ratio lies within an ulp of a step of k, and a partial last group
// (docs/formats/coat-optimizer.md, "Quirks"; docs/verifying-a-kernel.md, "What the battery reaches").
#include <cstddef>
#include <vector>

namespace lowbit {

// The gradient (and parameter) of the battery's `edges` run of COAT's optimizers: groups of 128, each
// aimed at one quirk (kCoatEdgeGroups), then a partial group of kCoatEdgeTail ordinary values. From the
// fresh state a step's moments are m = (1 - beta1) g and v = (1 - beta2) g^2, so a zero gradient places
// a zero moment and a gradient of 2e10 a first moment of 2e9.
std::vector<float> coat_optimizer_edges();
inline constexpr std::size_t kCoatEdgeGroups = 9, kCoatEdgeTail = 50;
// The k-boundary groups' two gradients (lane 0: the smallest; lanes 1-127: the largest): at the default
// betas log2f(A / B) and log2f(A) - log2f(B) give ks one 1/16 apart, for the first moment of the first
// pair and the second moment of the second.
inline constexpr float kCoatEdgeRatioSmall = 0x1.c9cb2ap-68f, kCoatEdgeRatioLarge = 0x1.3a9ad2p-1f;
inline constexpr float kCoatEdgeSquareRatioSmall = 0x1.507432p-34f, kCoatEdgeSquareRatioLarge = 0x1.8a7276p-1f;

}  // namespace lowbit
