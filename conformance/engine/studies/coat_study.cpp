// The oracle study of COAT's expansion quantizer (coat_study.hpp). Each group is drawn, quantized
// by the official float32 path and by the exact path on the same statistics, and compared.
#include "lowbit/coat_study.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <chrono>
#include <cmath>
#include <omp.h>
#include <random>

#include "lowbit/coat_exact.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/generators.hpp"
#include "lowbit/oracle.hpp"

namespace lowbit::coat {

namespace {

using Wide = boost::multiprecision::cpp_bin_float_quad;

struct Drawn {
  std::vector<float> values;
  bool second;  // a second moment: non-negative, no sign handling
};

// Group `index` of input `kind`, drawn with the generators' transforms (the same groups with every
// standard library): the scale of each group is log-uniform over five decades, as the
// moments of different parameters are.
Drawn draw(std::size_t kind, std::uint64_t seed, std::uint64_t index) {
  std::mt19937_64 rng(seed * 1000003u + kind * 7919u + index);
  const double sigma = std::pow(10.0, -6.0 + 5.0 * unit_uniform(rng));
  Drawn d{std::vector<float>(kGroup), kind == 1 || kind == 4};
  for (float& x : d.values) {
    switch (kind) {
      case 0: x = static_cast<float>(sigma * standard_normal(rng)); break;
      case 1: { const double g = sigma * standard_normal(rng); x = static_cast<float>(g * g); break; }
      case 2: {  // Student-t with 3 degrees of freedom: normal / sqrt(chi-square(3) / 3)
        double chi = 0;
        for (int k = 0; k < 3; ++k) { const double z = standard_normal(rng); chi += z * z; }
        x = static_cast<float>(sigma * standard_normal(rng) / std::sqrt(chi / 3.0));
        break;
      }
      case 3: x = unit_uniform(rng) < 0.25 ? 0.0f : static_cast<float>(sigma * standard_normal(rng)); break;
      default: x = static_cast<float>(sigma * std::exp(2.0 * standard_normal(rng))); break;
    }
  }
  return d;
}

// |got - exact| in binary32 ulps at the exact value (oracle::ulp_error); a non-finite got is infinitely off.
double ulps(float got, const Wide& exact) {
  if (!std::isfinite(got)) return INFINITY;
  return static_cast<double>(oracle::ulp_error(got, oracle::Exact(exact)));
}

struct Partial {
  std::uint64_t degenerate = 0, k_differs = 0, elements = 0, codes_differ = 0, max_distance = 0;
  std::uint64_t y_count = 0, y_over_half = 0, scale_count = 0, roundtrip_count = 0;
  double y_max = 0, y_sum = 0, scale_max = 0, scale_sum = 0, rt_official = 0, rt_exact = 0, rt_paper = 0;
};

Partial study_group(const Drawn& d, int expand_min) {
  Partial p;
  const QuantizedGroup q = expand_quantize_group(d.values, expand_min, d.second);
  const ExactGroup x = expand_quantize_group_exact(d.values, expand_min);
  if (x.degenerate || !std::isfinite(q.expand) || !std::isfinite(q.scale) || q.scale == 0) {
    p.degenerate = 1;
    return p;
  }
  if (static_cast<double>(q.expand) != x.k) {
    p.k_differs = 1;
    return p;
  }
  const PaperGroup paper = paper_quantize_group(d.values);
  const GroupStats st = expand_group_stats(d.values);
  const float a = static_cast<float>(static_cast<double>(st.max) + 1e-30);
  const Wide k = Wide(static_cast<double>(q.expand));
  const Wide exact_scale = boost::multiprecision::pow(Wide(static_cast<double>(a)) / Wide(static_cast<double>(q.centre)), k) / 448;
  p.scale_max = p.scale_sum = ulps(q.scale, exact_scale);
  p.scale_count = 1;
  for (std::size_t i = 0; i < d.values.size(); ++i) {
    const float v = d.values[i];
    ++p.elements;
    if (q.codes[i] != x.codes[i]) {
      ++p.codes_differ;
      const auto distance = static_cast<std::uint64_t>(std::abs(fp8::code_ordinal(q.codes[i]) - fp8::code_ordinal(x.codes[i])));
      p.max_distance = std::max(p.max_distance, distance);
    }
    if (v == 0) continue;
    const double e = ulps(expand_prequantized(v, q, d.second), Wide(x.y[i]));
    p.y_max = std::max(p.y_max, e);
    p.y_sum += e;
    p.y_over_half += e > 0.5 ? 1 : 0;
    ++p.y_count;
    const double official = expand_dequantize(q.codes[i], q.scale, q.expand, q.centre, d.second);
    const double exact = expand_dequantize_exact(x.codes[i], x.k, a);
    p.rt_official += std::fabs(official - v) / std::fabs(v);
    p.rt_exact += std::fabs(exact - v) / std::fabs(v);
    p.rt_paper += std::fabs(paper_dequantize(paper.codes[i], paper) - v) / std::fabs(v);
    ++p.roundtrip_count;
  }
  return p;
}

}  // namespace

const std::vector<StudyInput>& study_inputs() {
  static const std::vector<StudyInput> inputs = {
      {"m: normal", "first moment: normal(0, s)"},
      {"v: squared normal", "second moment: (normal(0, s))^2"},
      {"m: Student-t(3)", "first moment with heavy tails: s * t(3)"},
      {"m: 25% zeros", "first moment, a quarter of the elements exactly 0 (sparse gradients)"},
      {"v: lognormal", "second moment: s * exp(2 normal), six decades in a group"},
  };
  return inputs;
}

std::vector<StudyRow> run_expansion_study(std::uint64_t groups_per_input, std::uint64_t seed, int expand_min, int threads) {
  std::vector<StudyRow> rows;
  for (std::size_t kind = 0; kind < study_inputs().size(); ++kind) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<Partial> parts(groups_per_input);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (std::int64_t g = 0; g < static_cast<std::int64_t>(groups_per_input); ++g)
      parts[static_cast<std::size_t>(g)] = study_group(draw(kind, seed, static_cast<std::uint64_t>(g)), expand_min);
    StudyRow r;
    r.input = study_inputs()[kind].name;
    r.groups = groups_per_input;
    Partial t;
    for (const Partial& p : parts) {  // in group order: identical sums for any thread count
      t.degenerate += p.degenerate;
      t.k_differs += p.k_differs;
      t.elements += p.elements;
      t.codes_differ += p.codes_differ;
      t.max_distance = std::max(t.max_distance, p.max_distance);
      t.y_count += p.y_count;
      t.y_over_half += p.y_over_half;
      t.y_max = std::max(t.y_max, p.y_max);
      t.y_sum += p.y_sum;
      t.scale_count += p.scale_count;
      t.scale_max = std::max(t.scale_max, p.scale_max);
      t.scale_sum += p.scale_sum;
      t.rt_official += p.rt_official;
      t.rt_exact += p.rt_exact;
      t.rt_paper += p.rt_paper;
      t.roundtrip_count += p.roundtrip_count;
    }
    r.degenerate_groups = t.degenerate;
    r.k_differs = t.k_differs;
    r.elements = t.elements;
    r.codes_differ = t.codes_differ;
    r.max_code_distance = t.max_distance;
    r.y_ulp_max = t.y_max;
    r.y_ulp_mean = t.y_count ? t.y_sum / static_cast<double>(t.y_count) : 0;
    r.y_over_half_ulp = t.y_count ? static_cast<double>(t.y_over_half) / static_cast<double>(t.y_count) : 0;
    r.scale_ulp_max = t.scale_max;
    r.scale_ulp_mean = t.scale_count ? t.scale_sum / static_cast<double>(t.scale_count) : 0;
    r.roundtrip_rel_official = t.roundtrip_count ? t.rt_official / static_cast<double>(t.roundtrip_count) : 0;
    r.roundtrip_rel_exact = t.roundtrip_count ? t.rt_exact / static_cast<double>(t.roundtrip_count) : 0;
    r.roundtrip_rel_paper = t.roundtrip_count ? t.rt_paper / static_cast<double>(t.roundtrip_count) : 0;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rows.push_back(r);
  }
  return rows;
}

}  // namespace lowbit::coat
