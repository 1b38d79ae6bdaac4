#pragma once
// For coat.optim.expand.e4m3 mutants: the new moments recomputed from the case's inputs as the
// reference computes them (the update is not the bug), then each group of 128 requantized with a
// changed k or centre, or another group minimum (the bug). The new parameter is the reference's: it
// uses the unquantized moments, so a bug in the requantization cannot reach it.
#include <cfloat>
#include <cmath>
#include <functional>
#include <span>

#include "lowbit/case.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "lowbit/cuda_libdevice.hpp"
#include "lowbit/fp8.hpp"

namespace mutant {

// The group's k and centre as the mutant computes them, from A = max + 1e-30 and B = min + 1e-30
// (each added in double, as the kernel does) and expand_min.
struct KAndCentre {
  float expand, centre;
};
using KAndCentreFn = std::function<KAndCentre(float a, float b, int expand_min)>;
// The group's max and min of |x| as the mutant finds them (the reference's shuffle trees by default).
using StatsFn = std::function<lowbit::coat::GroupStats(std::span<const float> values)>;

// The reference's k = floor(log2f(100352) / log2f(A / B) * E) / E, for the mutant that keeps it.
inline float reference_k(float a, float b, int expand_min) {
  const auto e = static_cast<float>(expand_min);
  return lowbit::cuda::canonical(std::floor((lowbit::cuda::log2f(100352.0f) / lowbit::cuda::log2f(a / b)) * e) / e);
}

// The reference's k and centre, for the mutants whose bug is in the group statistics.
inline KAndCentre reference_k_and_centre(float a, float b, int expand_min) {
  return {reference_k(a, b, expand_min), std::sqrt(a) * std::sqrt(b)};
}

inline lowbit::coat::GroupStats reference_stats(std::span<const float> values) {
  return lowbit::coat::expand_group_stats(values);
}

inline lowbit::coat::QuantizedGroup mutant_group(std::span<const float> values, int expand_min, bool second,
                                                 const KAndCentreFn& k_and_centre, const StatsFn& stats) {
  using lowbit::cuda::canonical;
  const lowbit::coat::GroupStats st = stats(values);
  const auto a = static_cast<float>(static_cast<double>(st.max) + 1e-30);
  const auto b = static_cast<float>(static_cast<double>(st.min) + 1e-30);
  const KAndCentre kc = k_and_centre(a, b, expand_min);
  lowbit::coat::QuantizedGroup q;
  q.expand = kc.expand;
  q.centre = kc.centre;
  q.scale = canonical(lowbit::cuda::powf(canonical(a / q.centre), q.expand) / 448.0f);
  for (float x : values)
    q.codes.push_back(lowbit::fp8::encode_nearest_even<lowbit::fp8::E4M3FN>(
        lowbit::coat::expand_prequantized(x, q, second), lowbit::fp8::cuda_satfinite()));
  return q;
}

inline void requantize_coat_expand(lowbit::Case& done, const nlohmann::json& params, const KAndCentreFn& k_and_centre,
                                   const StatsFn& stats = reference_stats) {
  using namespace lowbit;
  using cuda::canonical;
  const auto beta1 = static_cast<float>(params.at("beta1").get<double>());
  const auto beta2 = static_cast<float>(params.at("beta2").get<double>());
  const int expand_min = params.at("expand_min").get<int>();
  const std::vector<float> grad = done.require("grad").f32();
  const std::size_t n = grad.size();
  std::vector<float> updated[2] = {std::vector<float>(n), std::vector<float>(n)};
  const char* const names[2] = {"exp_avg", "exp_avg_sq"};
  std::vector<std::uint8_t> codes[2];
  std::vector<float> scale[2], expand[2], centre[2];
  for (int k = 0; k < 2; ++k) {
    const std::string name = names[k];
    codes[k] = done.require(name + ".codes").u8();
    scale[k] = done.require(name + ".scale").f32();
    expand[k] = done.require(name + ".expand").f32();
    centre[k] = done.require(name + ".centre").f32();
  }
  // the reference's update of the moments (coat_optimizer.cpp adamw_step): m = fma(m0, b1, (1-b1) g),
  // v = fma(v0, b2, g ((1-b2) g))
  const float w1 = 1.0f - beta1, w2 = 1.0f - beta2;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t g = i / coat::kGroup;
    const float m0 = coat::expand_dequantize(codes[0][i], scale[0][g], expand[0][g], centre[0][g], false);
    const float v0 = coat::expand_dequantize(codes[1][i], scale[1][g], expand[1][g], centre[1][g], true);
    updated[0][i] = canonical(std::fma(m0, beta1, w1 * grad[i]));
    updated[1][i] = canonical(std::fma(v0, beta2, grad[i] * (w2 * grad[i])));
  }
  for (int k = 0; k < 2; ++k) {
    for (std::size_t begin = 0, g = 0; begin < n; begin += coat::kGroup, ++g) {
      const std::span<const float> group(updated[k].data() + begin, std::min(coat::kGroup, n - begin));
      const coat::QuantizedGroup q = mutant_group(group, expand_min, k == 1, k_and_centre, stats);
      std::copy(q.codes.begin(), q.codes.end(), codes[k].begin() + static_cast<std::ptrdiff_t>(begin));
      scale[k][g] = q.scale;
      expand[k][g] = q.expand;
      centre[k][g] = q.centre;
    }
    const std::string name = names[k];
    const Tensor& old_codes = done.require(name + ".codes.next");
    const std::vector<std::int64_t> code_shape = old_codes.shape, group_shape = done.require(name + ".scale.next").shape;
    const DType code_dtype = old_codes.dtype;
    done.add(Tensor::from_bytes(name + ".codes.next", code_dtype, code_shape, codes[k]));
    done.add(Tensor::from_f32(name + ".scale.next", group_shape, scale[k]));
    done.add(Tensor::from_f32(name + ".expand.next", group_shape, expand[k]));
    done.add(Tensor::from_f32(name + ".centre.next", group_shape, centre[k]));
  }
}

}  // namespace mutant
