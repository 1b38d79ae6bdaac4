// The GPU's FP8 conversions (fp8_kernels.cu) against the reference encoder on every input: all 2^32
// float32 patterns, all 2^16 f16 and bf16 patterns, in each of CUDA's four modes, and the 256 codes
// of each format decoded. Expected: no mismatch anywhere (a NaN decoded is the canonical 0x7FFF,
// as CUDA's host path gives; docs/formats/fp8.md#cuda-host-conversions).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "check_report.hpp"
#include "cuda_fp8_host.hpp"
#include "gpu_kernels.hpp"
#include "gpu_runtime.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/fp8_sweep.hpp"

namespace lowbit::gpu {

namespace {

using cuda_host::Mode;
using cuda_host::Saturation;

bool e5m2(const Mode& m) { return m.format == fp8::FormatId::E5M2; }
bool satfinite(const Mode& m) { return m.saturation == Saturation::SatFinite; }

std::string mode_name(const Mode& m) {
  return fmt::format("{}.{}", fp8::format_info(m.format).name, satfinite(m) ? "satfinite" : "nosat");
}

// The sweep of fp8_sweep.hpp over a table of GPU results indexed by the input's bits.
Check sweep_table(const std::string& function, const Mode& m, fp8::Source source, const std::uint8_t* codes,
                  int threads) {
  fp8::SweepConfig cfg;
  cfg.format = m.format;
  cfg.policy = m.policy;
  cfg.source = source;
  cfg.expected = fp8::Expected::Reference;
  cfg.threads = threads;
  cfg.candidate_bits = [codes](std::uint32_t pattern, std::uint32_t) { return codes[pattern]; };
  const fp8::SweepResult r = fp8::run_sweep(cfg);
  Check c;
  c.name = fmt::format("fp8.{}.{}.{}", function, fp8::source_name(source), mode_name(m));
  c.passed = r.mismatches == 0;
  c.figures["inputs"] = r.inputs;
  c.figures["mismatches"] = r.mismatches;
  c.figures["ties"] = {{"inputs", r.ties.inputs}, {"mismatches", r.ties.mismatches}};
  for (std::size_t k = 0; k < fp8::kInputClasses.size(); ++k)
    c.figures["by_class"][std::string(fp8::input_class_name(fp8::kInputClasses[k]))] = {
        {"inputs", r.by_class[k].inputs}, {"mismatches", r.by_class[k].mismatches}};
  nlohmann::json first = nlohmann::json::array();
  for (const fp8::Mismatch& mm : r.first_mismatches)
    first.push_back({{"input", fmt::format("0x{:08X}", mm.input_bits)},
                     {"reference", fmt::format("0x{:02X}", mm.expected)},
                     {"gpu", fmt::format("0x{:02X}", mm.actual)}});
  c.figures["first_mismatches"] = first;
  c.figures["host_seconds"] = r.seconds;
  c.summary = fmt::format("{} inputs, {} mismatches against the reference (policy of {}), ties {}/{}", r.inputs,
                          r.mismatches, mode_name(m), r.ties.mismatches, r.ties.inputs);
  return c;
}

Check float_sweep(const Mode& m, int threads) {
  constexpr std::uint64_t kAll = std::uint64_t{1} << 32;
  DeviceBuffer<std::uint8_t> device(kAll);
  const auto start = std::chrono::steady_clock::now();
  float_to_fp8(device.get(), 0, kAll, e5m2(m), satfinite(m));
  finish("float_to_fp8");
  const double gpu_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::unique_ptr<std::uint8_t[]> host(new std::uint8_t[kAll]);
  device.to_host(host.get(), kAll);
  Check c = sweep_table("__nv_cvt_float_to_fp8", m, fp8::Source::F32, host.get(), threads);
  c.figures["gpu_seconds"] = gpu_seconds;
  return c;
}

Check sixteen_bit_sweep(const Mode& m, fp8::Source source, int threads) {
  DeviceBuffer<std::uint8_t> device(65536);
  if (source == fp8::Source::F16) f16_to_fp8(device.get(), e5m2(m), satfinite(m));
  else bf16_to_fp8(device.get(), e5m2(m), satfinite(m));
  finish("16-bit to fp8");
  std::vector<std::uint8_t> host(65536);
  device.to_host(host.data(), host.size());
  return sweep_table(source == fp8::Source::F16 ? "__nv_cvt_halfraw_to_fp8" : "__nv_cvt_bfloat16raw_to_fp8", m, source,
                     host.data(), threads);
}

// Every code decoded on the GPU: the exact binary16 of its value, a NaN as 0x7FFF.
Check decode_codes(fp8::FormatId f) {
  DeviceBuffer<std::uint16_t> device(256);
  fp8_to_f16(device.get(), f == fp8::FormatId::E5M2);
  finish("fp8_to_f16");
  std::vector<std::uint16_t> host(256);
  device.to_host(host.data(), host.size());
  Check c;
  c.name = fmt::format("fp8.__nv_cvt_fp8_to_halfraw.{}", fp8::format_info(f).name);
  std::uint64_t mismatches = 0;
  nlohmann::json first = nlohmann::json::array();
  for (unsigned code = 0; code < 256; ++code) {
    const float want = fp8::decode(f, static_cast<std::uint8_t>(code));
    const bool ok = std::isnan(want) ? host[code] == 0x7FFF : bits_of(widen_f16(host[code])) == bits_of(want);
    if (ok) continue;
    if (++mismatches <= 16)
      first.push_back({{"code", fmt::format("0x{:02X}", code)}, {"gpu_f16", fmt::format("0x{:04X}", host[code])}});
  }
  c.passed = mismatches == 0;
  c.figures = {{"codes", 256}, {"mismatches", mismatches}, {"first_mismatches", first}};
  c.summary = fmt::format("256 codes, {} mismatches against the reference decode (NaN as 0x7FFF)", mismatches);
  return c;
}

}  // namespace

std::vector<Check> fp8_checks(const CheckContext& context) {
  std::vector<Check> checks;
  for (const Mode& m : cuda_host::kModes) {
    fmt::print(stderr, "fp8: {} over 2^32 float32 inputs\n", mode_name(m));
    checks.push_back(float_sweep(m, context.threads));
    checks.push_back(sixteen_bit_sweep(m, fp8::Source::F16, context.threads));
    checks.push_back(sixteen_bit_sweep(m, fp8::Source::BF16, context.threads));
  }
  checks.push_back(decode_codes(fp8::FormatId::E4M3FN));
  checks.push_back(decode_codes(fp8::FormatId::E5M2));
  return checks;
}

}  // namespace lowbit::gpu
