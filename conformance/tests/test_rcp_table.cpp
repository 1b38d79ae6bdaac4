// The measured rcp.approx.ftz.f32 table that the reference embeds (reference/data/, measured on an
// NVIDIA H200 with CUDA 13.0: docs/device/README.md) against that GPU run's own figures
// (docs/device/h200-2026-12-01/gpu-checks.json): the table file is read here independently of the
// reference's embedding, its counts are the run's, cuda::rcp_approx_ftz gives its values on every
// input of [1, 2), and the reference's powf, fed the same inputs as the run, differs from the old
// RN(1/b) model exactly where the GPU did (1 113 times in 25 165 824).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "bits_printer.hpp"
#include "coat_powf_inputs.hpp"
#include "lowbit/cuda_libdevice.hpp"
#include "lowbit/float_bits.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

constexpr std::uint32_t kMantissas = 1u << 23;

std::vector<unsigned char> table_file() {
  std::ifstream in(LOWBIT_RCP_TABLE_FILE, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The file's difference from RN(1/b), in ulps, for 1 + m * 2^-23 (its format: reference/libdevice/cuda_rcp_table.cpp).
int delta(const std::vector<unsigned char>& t, std::uint32_t m) {
  const unsigned code = (t[m >> 2] >> (2 * (m & 3u))) & 3u;
  return code == 1 ? 1 : code == 2 ? -1 : code == 0 ? 0 : 99;
}

}  // namespace

TEST_CASE("the table file holds what the GPU run measured") {
  const std::vector<unsigned char> t = table_file();
  REQUIRE(t.size() == kMantissas / 4);
  std::map<int, std::uint64_t> all, coat;
  for (std::uint32_t m = 0; m < kMantissas; ++m) {
    const float b = float_from_bits(0x3F800000u | m);
    ++all[delta(t, m)];
    if (b >= 1.7f || b <= 1.21f) ++coat[delta(t, m)];
  }
  // gpu-checks.json, rcp.approx.ftz.f32.table_1_2: ulps_from_rn_histogram(_coat_range)
  CHECK(all == std::map<int, std::uint64_t>{{-1, 374723}, {0, 7280086}, {1, 733799}});
  CHECK(coat == std::map<int, std::uint64_t>{{-1, 227846}, {0, 3701443}, {1, 348902}});
}

TEST_CASE("cuda::rcp_approx_ftz gives the table's value on every input of [1, 2)") {
  const std::vector<unsigned char> t = table_file();
  std::uint64_t wrong = 0;
  for (std::uint32_t m = 0; m < kMantissas; ++m) {
    const float b = float_from_bits(0x3F800000u | m);
    const std::uint32_t want = bits_of(1.0f / b) + static_cast<std::uint32_t>(delta(t, m));
    if (cuda::rcp_approx_ftz_1_2(m) != want || bits_of(cuda::rcp_approx_ftz(b)) != want) ++wrong;
  }
  CHECK(wrong == 0);
}

TEST_CASE("cuda::rcp_approx_ftz outside [1, 2): scaled by powers of two, FTZ, Inf and NaN") {
  CHECK(bits(cuda::rcp_approx_ftz(1.0f)) == bits(1.0f));
  CHECK(bits(cuda::rcp_approx_ftz(-2.0f)) == bits(-0.5f));
  CHECK(bits(cuda::rcp_approx_ftz(0.0f)) == bits(INFINITY));
  CHECK(bits(cuda::rcp_approx_ftz(-0.0f)) == bits(-INFINITY));
  CHECK(bits(cuda::rcp_approx_ftz(float_from_bits(0x00000001u))) == bits(INFINITY));  // FTZ input
  CHECK(bits(cuda::rcp_approx_ftz(-float_from_bits(0x007FFFFFu))) == bits(-INFINITY));
  CHECK(bits(cuda::rcp_approx_ftz(0x1p126f)) == bits(0x1p-126f));  // the smallest normal result
  CHECK(bits(cuda::rcp_approx_ftz(0x1p127f)) == bits(0.0f));       // 2^-127 is subnormal: flushed
  CHECK(bits(cuda::rcp_approx_ftz(-0x1.8p126f)) == bits(-0.0f));
  CHECK(bits(cuda::rcp_approx_ftz(INFINITY)) == bits(0.0f));
  CHECK(bits(cuda::rcp_approx_ftz(-INFINITY)) == bits(-0.0f));
  CHECK(bits(cuda::rcp_approx_ftz(-NAN)) == f32_bits(cuda::kCanonicalNan));
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> mantissa(0, kMantissas - 1);
  std::uniform_int_distribution<int> exponent(-125, 125);
  std::uint64_t wrong = 0;
  for (int k = 0; k < 100000; ++k) {
    const float f = float_from_bits(0x3F800000u | mantissa(rng));
    const int e = exponent(rng);
    if (bits_of(cuda::rcp_approx_ftz(std::ldexp(f, e))) != bits_of(std::ldexp(cuda::rcp_approx_ftz(f), -e))) ++wrong;
  }
  CHECK(wrong == 0);
}

TEST_CASE("powf on the GPU run's inputs differs from the RN(1/b) model exactly as often as the GPU did") {
  std::vector<float> x, y;
  gpu::coat_powf_inputs(x, y);
  REQUIRE(x.size() == 25165824);
  const cuda::ReciprocalFn rn_model = [](float b) { return 1.0f / b; };
  std::uint64_t differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (bits_of(cuda::powf(x[i], y[i])) != bits_of(cuda::powf(x[i], y[i], rn_model))) ++differ;
  CHECK(differ == 1113);  // gpu-checks.json, powf.libdevice.coat_inputs: mismatches_with_rn_model
}
