#pragma once
// The oracle study of COAT's expansion quantizer: how far the official float32 path (CUDA log2f and
// powf, the kernel's order of operations) lands from the exact mathematics on the same group
// statistics, per group and per element, and how often that changes an FP8 code.
#include <cstdint>
#include <string>
#include <vector>

namespace lowbit::coat {

// A kind of realistic optimizer-state group (128 elements each).
struct StudyInput {
  std::string name;         // e.g. "first moment (normal)"
  std::string description;  // how the groups are drawn
};
const std::vector<StudyInput>& study_inputs();

struct StudyRow {
  std::string input;
  std::uint64_t groups = 0, degenerate_groups = 0;  // degenerate: R <= 1 or k not finite (excluded)
  std::uint64_t k_differs = 0;                      // groups whose official k is not the exact k
  std::uint64_t elements = 0, codes_differ = 0;     // over groups whose k agrees
  std::uint64_t max_code_distance = 0;              // in E4M3 code steps
  double y_ulp_max = 0, y_ulp_mean = 0;             // official t / s against the exact 448 (|x| / A)^k
  double y_over_half_ulp = 0;                       // fraction of elements more than 0.5 ulp off
  double scale_ulp_max = 0, scale_ulp_mean = 0;     // official s against exact (A / c)^k / 448 (same k, c)
  double roundtrip_rel_official = 0;                // mean |dequant - x| / |x|, official codes and dequant
  double roundtrip_rel_exact = 0;                   // the same with exact codes and exact dequantization
  double roundtrip_rel_paper = 0;                   // the same with the README / paper mathematics
  double seconds = 0;
};

// groups_per_input groups of each study input, seeds derived from `seed`; deterministic for any
// thread count (groups are independent; results are summed in group order).
std::vector<StudyRow> run_expansion_study(std::uint64_t groups_per_input, std::uint64_t seed, int expand_min, int threads);

}  // namespace lowbit::coat
