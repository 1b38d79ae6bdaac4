// Uses both installed libraries: the arithmetic (FP8 codes derived by hand below) and the engine
// (registry, a shipped golden case hash-checked, the reference run on it, compared under the
// format's default policy loaded from the installed policy folder). Exit 0 when all hold.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <lowbit/compare.hpp>
#include <lowbit/formats.hpp>
#include <lowbit/fp8.hpp>
#include <lowbit/manifest.hpp>
#include <lowbit/tolerance.hpp>
#include <string>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  failures += !ok;
}

void expect_code(float x, std::uint8_t got, std::uint8_t want) {
  char line[80];
  std::snprintf(line, sizeof line, "e4m3fn(%.9g) = 0x%02x, by hand 0x%02x", x, got, want);
  expect(got == want, line);
}

}  // namespace

int main() {
  using namespace lowbit;
  // lowbit::reference. E4M3FN, bias 7: 1.0 = 0.0111.000 = 0x38; 448 = 1.75 * 2^8 = 0.1111.110 = 0x7E.
  // 1.0625 lies half-way between 1.0 (0x38) and 1.125 (0x39): ties to even, 0x38; 1.1875 half-way
  // between 1.125 (0x39) and 1.25 (0x3A): 0x3A. 500 saturates to 448 under CUDA's satfinite.
  const fp8::Policy sat = fp8::cuda_satfinite();
  expect_code(1.0f, fp8::encode_nearest_even<fp8::E4M3FN>(1.0f, sat), 0x38);
  expect_code(448.0f, fp8::encode_nearest_even<fp8::E4M3FN>(448.0f, sat), 0x7E);
  expect_code(1.0625f, fp8::encode_nearest_even<fp8::E4M3FN>(1.0625f, sat), 0x38);
  expect_code(1.1875f, fp8::encode_nearest_even<fp8::E4M3FN>(1.1875f, sat), 0x3A);
  expect_code(500.0f, fp8::encode_nearest_even<fp8::E4M3FN>(500.0f, sat), 0x7E);

  // lowbit::engine.
  expect(find_format("fp8.e4m3fn.satfinite") != nullptr, "find_format(fp8.e4m3fn.satfinite)");
  expect(load_tolerance_policy("bnb-cuda", LOWBIT_POLICY_DIR).boundary_ulps == 3,
         "shipped policy bnb-cuda allows 3 ulps (" LOWBIT_POLICY_DIR ")");
  const Manifest manifest = read_manifest(LOWBIT_GOLDEN_DIR);
  // bnb.adam8bit.cpu: its default policy, torch-cpu-eager, is one of the shipped files.
  const auto e = std::find_if(manifest.files.begin(), manifest.files.end(),
                              [](const ManifestEntry& m) { return m.format == "bnb.adam8bit.cpu"; });
  expect(e != manifest.files.end(), "a bnb.adam8bit.cpu golden case in " LOWBIT_GOLDEN_DIR);
  if (e != manifest.files.end()) {
    const Case expected = read_verified_case(LOWBIT_GOLDEN_DIR, *e);
    const FormatSpec* spec = find_format(expected.format());
    const ComparisonReport r = compare_cases(expected, run_reference(*spec, expected),
                                             load_tolerance_policy(spec->default_tolerance, LOWBIT_POLICY_DIR));
    expect(r.conformant && r.policy.name == "torch-cpu-eager",
           "the reference conforms on " + e->path + " under policy " + r.policy.name);
  }
  return failures == 0 ? 0 : 1;
}
