// The GPU's approximate reciprocal and what depends on it (approx_kernels.cu, libdevice_powf.cu):
//  - rcp.approx.ftz.f32 measured on the 2^23 inputs of [1, 2), compared with RN(1/b) (the
//    reference's model until now), and written out as a table of differences in ulps;
//  - the scaling rule of cuda::rcp_approx_ftz_scaled held against the hardware on all 2^32 inputs
//    (expected: no mismatch);
//  - div.full.f32 against RN(a * rcp.approx(b)) on random pairs of ordinary magnitude (expected: no
//    mismatch) and over the whole normal range (a measurement);
//  - the measured table against the one the reference embeds (expected: identical);
//  - CUDA's powf against the reference's cuda::powf on the inputs COAT gives it, with this run's
//    reciprocal and with the reference's own (expected: no mismatch), and with the RN(1/b) model
//    used before the measurement (a measurement).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "check_report.hpp"
#include "coat_powf_inputs.hpp"
#include "gpu_kernels.hpp"
#include "gpu_runtime.hpp"
#include "lowbit/cuda_libdevice.hpp"
#include "lowbit/float_bits.hpp"

namespace lowbit::gpu {

namespace {

constexpr std::uint32_t kMantissas = 1u << 23;
constexpr std::uint32_t kOne = 0x3F800000u;

// The measured results on [1, 2), for cuda::powf's reciprocal parameter (a plain function pointer).
const std::uint32_t* g_measured = nullptr;
float measured_rcp(float b) { return cuda::rcp_approx_ftz_scaled(g_measured, b); }

std::string hex(std::uint32_t bits) { return fmt::format("0x{:08X}", bits); }

Check measure_table(std::vector<std::uint32_t>& table, const CheckContext& context) {
  DeviceBuffer<std::uint32_t> device(kMantissas);
  rcp_approx_ftz(device.get(), kOne, kMantissas);
  finish("rcp_approx_ftz");
  table.resize(kMantissas);
  device.to_host(table.data(), kMantissas);

  // Difference from RN(1/b) in ulps, per mantissa: both lie in (0.5, 1], so the difference of the
  // bit patterns is the difference in ulps.
  std::vector<std::int8_t> delta(kMantissas);
  std::map<long long, std::uint64_t> histogram, histogram_coat;
  for (std::uint32_t m = 0; m < kMantissas; ++m) {
    const float b = float_from_bits(kOne | m);
    const long long d = static_cast<long long>(table[m]) - static_cast<long long>(bits_of(1.0f / b));
    delta[m] = static_cast<std::int8_t>(d < -127 ? -127 : d > 127 ? 127 : d);
    ++histogram[d];
    // powf inside COAT sees b in [1.7, 2.42]: here [1.7, 2), and [2, 2.42] as [1, 1.21] scaled.
    if (b >= 1.7f || b <= 1.21f) ++histogram_coat[d];
  }
  const auto file = context.out / "rcp_approx_ftz_1_2.delta.i8";
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(delta.data()), delta.size());

  Check c;
  c.name = "rcp.approx.ftz.f32.table_1_2";
  c.passed = histogram.size() > 0;  // a measurement: the table is the result
  auto to_json = [](const std::map<long long, std::uint64_t>& h) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [d, n] : h) j[std::to_string(d)] = n;
    return j;
  };
  c.figures = {{"inputs", kMantissas},
               {"ulps_from_rn_histogram", to_json(histogram)},
               {"ulps_from_rn_histogram_coat_range", to_json(histogram_coat)},
               {"table_file", file.filename().string()},
               {"table_format", "int8 per mantissa m of 1 + m*2^-23: bits(rcp.approx.ftz) - bits(RN(1/b))"}};
  c.summary = fmt::format("measured on all {} inputs of [1, 2); {} equal RN(1/b); histogram of ulps from RN: {}",
                          kMantissas, histogram[0], to_json(histogram).dump());
  return c;
}

// The run's table against the one the reference embeds (measured on an H200): a GPU of another kind
// may differ, which is worth knowing before trusting the reference's powf for it.
Check check_table_is_reference(const std::vector<std::uint32_t>& table) {
  std::uint64_t differ = 0;
  nlohmann::json examples = nlohmann::json::array();
  for (std::uint32_t m = 0; m < kMantissas; ++m) {
    if (table[m] == cuda::rcp_approx_ftz_1_2(m)) continue;
    if (++differ <= 16)
      examples.push_back({{"input", hex(kOne | m)}, {"gpu", hex(table[m])}, {"reference", hex(cuda::rcp_approx_ftz_1_2(m))}});
  }
  Check c;
  c.name = "rcp.approx.ftz.f32.table_is_reference";
  c.passed = differ == 0;
  c.figures = {{"inputs", kMantissas}, {"differ", differ}, {"first_differences", examples}};
  c.summary = fmt::format("this GPU's results on [1, 2) against the reference's table: {} of {} differ", differ, kMantissas);
  return c;
}

Check check_scaling(const std::vector<std::uint32_t>& table) {
  DeviceBuffer<std::uint32_t> device_table(kMantissas);
  device_table.from_host(table.data(), kMantissas);
  DeviceBuffer<unsigned long long> counts(2);
  constexpr std::uint32_t kCap = 16;
  DeviceBuffer<std::uint32_t> first(kCap);
  check_rcp_scaling(device_table.get(), counts.get(), first.get(), kCap);
  finish("check_rcp_scaling");
  unsigned long long n[2];
  counts.to_host(n, 2);
  std::uint32_t f[kCap];
  first.to_host(f, kCap);
  Check c;
  c.name = "rcp.approx.ftz.f32.scaling_all_inputs";
  c.passed = n[0] == 0;
  nlohmann::json examples = nlohmann::json::array();
  for (unsigned long long k = 0; k < std::min<unsigned long long>(n[0], kCap); ++k)
    examples.push_back({{"input", hex(f[k])}, {"predicted", hex(bits_of(cuda::rcp_approx_ftz_scaled(table.data(), float_from_bits(f[k]))))}});
  c.figures = {{"inputs", std::uint64_t{1} << 32}, {"mismatches", n[0]}, {"first_mismatches", examples}};
  c.summary = fmt::format("all 2^32 inputs against cuda::rcp_approx_ftz_scaled over the measured table: {} mismatches", n[0]);
  return c;
}

Check check_division(const char* name, int min_exp, int max_exp, bool expect_exact) {
  constexpr std::uint64_t kPairs = std::uint64_t{1} << 32;
  constexpr std::uint32_t kCap = 16;
  DeviceBuffer<unsigned long long> counts(2);
  DeviceBuffer<std::uint32_t> first(4 * kCap);
  check_div_full(kPairs, 20261201, min_exp, max_exp, counts.get(), first.get(), kCap);
  finish("check_div_full");
  unsigned long long n[2];
  counts.to_host(n, 2);
  std::uint32_t f[4 * kCap];
  first.to_host(f, 4 * kCap);
  Check c;
  c.name = name;
  c.passed = !expect_exact || n[1] == 0;
  nlohmann::json examples = nlohmann::json::array();
  for (unsigned long long k = 0; k < std::min<unsigned long long>(n[1], kCap); ++k)
    examples.push_back({{"a", hex(f[4 * k])}, {"b", hex(f[4 * k + 1])}, {"div_full", hex(f[4 * k + 2])},
                        {"model", hex(f[4 * k + 3])}});
  c.figures = {{"pairs", n[0]}, {"exponents", {min_exp, max_exp}}, {"mismatches", n[1]},
               {"expectation", expect_exact ? "no mismatch" : "a measurement"}, {"first_mismatches", examples}};
  c.summary = fmt::format("{} random pairs, exponents {}..{}: {} differ from RN(a * rcp.approx.ftz(b))", n[0], min_exp,
                          max_exp, n[1]);
  return c;
}

Check check_powf(const std::vector<std::uint32_t>& table, int threads) {
  std::vector<float> x, y;
  coat_powf_inputs(x, y);
  const std::size_t n = x.size();
  DeviceBuffer<float> dx(n), dy(n), dout(n);
  dx.from_host(x.data(), n);
  dy.from_host(y.data(), n);
  powf_libdevice(dx.get(), dy.get(), dout.get(), n);
  finish("powf_libdevice");
  std::vector<float> gpu(n);
  dout.to_host(gpu.data(), n);

  g_measured = table.data();
  const cuda::ReciprocalFn rn_model = [](float b) { return 1.0f / b; };
  std::uint64_t with_table = 0, with_embedded = 0, with_model = 0;
  nlohmann::json examples = nlohmann::json::array();
#pragma omp parallel for num_threads(threads) reduction(+ : with_table, with_model) schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t g = bits_of(gpu[i]);
    if (bits_of(cuda::powf(x[i], y[i], measured_rcp)) != g) {
      ++with_table;
#pragma omp critical
      if (examples.size() < 16)
        examples.push_back({{"x", hex(bits_of(x[i]))}, {"y", hex(bits_of(y[i]))}, {"gpu", hex(g)},
                            {"reference", hex(bits_of(cuda::powf(x[i], y[i], measured_rcp)))}});
    }
    if (bits_of(cuda::powf(x[i], y[i])) != g) ++with_embedded;
    if (bits_of(cuda::powf(x[i], y[i], rn_model)) != g) ++with_model;
  }
  Check c;
  c.name = "powf.libdevice.coat_inputs";
  c.passed = with_table == 0 && with_embedded == 0;
  c.figures = {{"inputs", n},
               {"mismatches_with_measured_rcp", with_table},
               {"mismatches_with_reference_rcp", with_embedded},
               {"mismatches_with_rn_model", with_model},
               {"first_mismatches_with_measured_rcp", examples}};
  c.summary = fmt::format("{} (x, y) of COAT's kinds: {} mismatches with this run's reciprocal, {} with the reference's "
                          "(its committed table), {} with the RN(1/b) model",
                          n, with_table, with_embedded, with_model);
  return c;
}

}  // namespace

std::vector<Check> approx_checks(const CheckContext& context) {
  std::vector<Check> checks;
  std::vector<std::uint32_t> table;
  fmt::print(stderr, "rcp.approx.ftz: [1, 2), then all 2^32 inputs\n");
  checks.push_back(measure_table(table, context));
  checks.push_back(check_table_is_reference(table));
  checks.push_back(check_scaling(table));
  fmt::print(stderr, "div.full: 2^32 random pairs, twice\n");
  checks.push_back(check_division("div.full.f32.ordinary", -60, 60, true));
  checks.push_back(check_division("div.full.f32.normal_range", -126, 127, false));
  fmt::print(stderr, "powf: COAT's inputs\n");
  checks.push_back(check_powf(table, context.threads));
  return checks;
}

}  // namespace lowbit::gpu
