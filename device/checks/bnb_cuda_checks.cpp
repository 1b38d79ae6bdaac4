// bitsandbytes' own CUDA kernels (libbitsandbytes_cuda130.so of the pinned wheel, loaded with
// dlopen) against the reference's `bnb.blockwise8.dynamic` with backend=cuda-ieee, the CUDA
// kernel's rule in IEEE arithmetic: cquantize_blockwise_fp32 gives codes and scale (absmax),
// cdequantize_blockwise_fp32 the dequantized values. Compared under the shipped `bnb-cuda` policy
// (expected: conformant), and once more with no limit on the boundary budget, which measures the
// budget the library's --use_fast_math build needs (and whether it conforms under 0, 1, 2, 3, 4, 8,
// 16, 64 and 1024 ulps).
#include <fmt/format.h>

#include "bnb_library.hpp"
#include "check_report.hpp"
#include "gpu_runtime.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"
#include "lowbit/mismatch.hpp"
#include "lowbit/tolerance.hpp"

namespace lowbit::gpu {

namespace {

// The library's C API (bitsandbytes 0.50 csrc/pythonInterface.cpp); all pointers are device memory.
using QuantizeFn = void (*)(float* code, float* A, float* absmax, unsigned char* out, int blocksize, int n);
using DequantizeFn = void (*)(float* code, unsigned char* A, float* absmax, float* out, int blocksize, int n,
                              cudaStream_t stream);

// The quantizer's two entry points; std::runtime_error when the library lacks one.
struct QuantizerEntries {
  QuantizeFn quantize = nullptr;
  DequantizeFn dequantize = nullptr;
};

QuantizerEntries quantizer_entries(const BnbLibrary& lib) {
  QuantizerEntries e;
  e.quantize = reinterpret_cast<QuantizeFn>(lib.symbol("cquantize_blockwise_fp32"));
  e.dequantize = reinterpret_cast<DequantizeFn>(lib.symbol("cdequantize_blockwise_fp32"));
  if (!e.quantize || !e.dequantize)
    throw std::runtime_error(fmt::format("--bnb-library {}: no cquantize_blockwise_fp32 / cdequantize_blockwise_fp32", lib.path()));
  return e;
}

// The case the reference computed, with codes, scale and dequant replaced by the library's.
Case run_library(const QuantizerEntries& lib, const Case& expected, int block) {
  const std::vector<float> x = expected.require("input").f32(), q = expected.require("qmap").f32();
  const std::size_t n = x.size(), blocks = (n + block - 1) / block;
  DeviceBuffer<float> dx(n), dq(q.size()), dabsmax(blocks), ddeq(n);
  DeviceBuffer<unsigned char> dcodes(n);
  dx.from_host(x.data(), n);
  dq.from_host(q.data(), q.size());
  lib.quantize(dq.get(), dx.get(), dabsmax.get(), dcodes.get(), block, static_cast<int>(n));
  finish("cquantize_blockwise_fp32");
  lib.dequantize(dq.get(), dcodes.get(), dabsmax.get(), ddeq.get(), block, static_cast<int>(n), nullptr);
  finish("cdequantize_blockwise_fp32");
  std::vector<unsigned char> codes(n);
  std::vector<float> absmax(blocks), deq(n);
  dcodes.to_host(codes.data(), n);
  dabsmax.to_host(absmax.data(), blocks);
  ddeq.to_host(deq.data(), n);
  Case actual = expected;
  actual.origin = "bitsandbytes CUDA";
  actual.add(Tensor::from_bytes("codes", DType::U8, expected.require("codes").shape, codes));
  actual.add(Tensor::from_f32("scale", expected.require("scale").shape, absmax));
  actual.add(Tensor::from_f32("dequant", expected.require("dequant").shape, deq));
  return actual;
}

}  // namespace

std::vector<Check> bnb_cuda_checks(const CheckContext& context) {
  std::vector<Check> checks;
  if (context.bnb_library.empty()) return checks;
  const BnbLibrary library(context.bnb_library);
  const QuantizerEntries lib = quantizer_entries(library);
  const FormatSpec* format = find_format("bnb.blockwise8.dynamic");
  const TolerancePolicy shipped = load_tolerance_policy("bnb-cuda", context.policy_dir);
  const MadeBy made_by{"bitsandbytes 0.50.2 CUDA (libbitsandbytes_cuda130.so)", "lowbit-gpu-checks"};
  for (const char* input : {"normal:n=4194304,seed=1", "lognormal:n=4194304,seed=2", "outliers:n=4194304,seed=3"})
    for (int block : {64, 256, 4096}) {
      nlohmann::json params = format->default_params;
      params["block_size"] = block;
      params["backend"] = "cuda-ieee";
      for_each_case(*format, params, parse_input_spec(input), 1, made_by, [&](CaseToRun run) {
        const Case expected = run_reference(*format, run.inputs);
        const Case actual = run_library(lib, expected, block);
        Check c;
        c.name = fmt::format("bnb.cuda130.blockwise8.{}.block{}", run.stem, block);
        c.figures = {{"input", input}, {"block_size", block}};
        compare_with_budget(expected, actual, shipped, c);
        const nlohmann::json& tensors = c.figures["tensors"];
        const bool has_codes = tensors.contains("codes");
        c.summary = fmt::format("{} against bnb.blockwise8.dynamic (cuda-ieee), block {}: codes {} of {} differ; {} under "
                                "bnb-cuda; budget needed: {} ulps",
                                input, block, has_codes ? tensors["codes"]["mismatches"].dump() : "0",
                                has_codes ? tensors["codes"]["elements"].dump() : "0", c.passed ? "conformant" : "NOT conformant",
                                c.figures["needed_boundary_ulps"].dump());
        checks.push_back(std::move(c));
        return expected;
      });
    }
  return checks;
}

}  // namespace lowbit::gpu
