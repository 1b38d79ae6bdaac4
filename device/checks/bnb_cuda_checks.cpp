// bitsandbytes' own CUDA kernels (libbitsandbytes_cuda130.so of the pinned wheel, loaded with
// dlopen) against the reference's `bnb.blockwise8.dynamic` with backend=cuda-ieee, the CUDA
// kernel's rule in IEEE arithmetic: cquantize_blockwise_fp32 gives codes and scale (absmax),
// cdequantize_blockwise_fp32 the dequantized values. Compared under the shipped `bnb-cuda` policy
// (expected: conformant), and once more with no limit on the boundary budget, which measures the
// budget the library's --use_fast_math build needs (and whether it conforms under 0, 1, 2, 3, 4, 8,
// 16, 64 and 1024 ulps).
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>

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

struct BnbLibrary {
  void* handle = nullptr;
  QuantizeFn quantize = nullptr;
  DequantizeFn dequantize = nullptr;
};

BnbLibrary open_library(const std::string& path) {
  BnbLibrary lib;
  lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) throw std::runtime_error(fmt::format("--bnb-library {}: {}", path, dlerror()));
  lib.quantize = reinterpret_cast<QuantizeFn>(dlsym(lib.handle, "cquantize_blockwise_fp32"));
  lib.dequantize = reinterpret_cast<DequantizeFn>(dlsym(lib.handle, "cdequantize_blockwise_fp32"));
  if (!lib.quantize || !lib.dequantize)
    throw std::runtime_error(fmt::format("--bnb-library {}: no cquantize_blockwise_fp32 / cdequantize_blockwise_fp32", path));
  return lib;
}

// The case the reference computed, with codes, scale and dequant replaced by the library's.
Case run_library(const BnbLibrary& lib, const Case& expected, int block) {
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

nlohmann::json tensor_figures(const ComparisonReport& r) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const TensorComparison& t : r.tensors) {
    nlohmann::json by_class = nlohmann::json::object();
    for (MismatchClass c : kMismatchClasses)
      by_class[std::string(mismatch_class_name(c))] = t.by_class[static_cast<std::size_t>(c)];
    tensors[t.name] = {{"elements", t.elements}, {"mismatches", t.mismatches}, {"allowed", t.allowed},
                       {"max_code_distance", t.max_code_distance}, {"by_class", by_class}};
  }
  return tensors;
}

}  // namespace

std::vector<Check> bnb_cuda_checks(const CheckContext& context) {
  std::vector<Check> checks;
  if (context.bnb_library.empty()) return checks;
  const BnbLibrary lib = open_library(context.bnb_library);
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
        const ComparisonReport report = compare_cases(expected, actual, shipped);
        Check c;
        c.name = fmt::format("bnb.cuda130.blockwise8.{}.block{}", run.stem, block);
        c.passed = report.conformant;
        c.figures = {{"input", input}, {"block_size", block}, {"policy", shipped.name},
                     {"conformant", report.conformant}, {"tensors", tensor_figures(report)}};
        // The budget the library needs, from one more comparison with no limit on it: under a budget
        // of u ulps the case conforms when everything else does and no code lies farther than u.
        TolerancePolicy unlimited = shipped;
        unlimited.boundary_ulps = std::numeric_limits<double>::infinity();
        const ComparisonReport any_budget = compare_cases(expected, actual, unlimited, 0);
        double needed = 0;
        for (const TensorComparison& t : any_budget.tensors) needed = std::max(needed, t.max_boundary_ulps);
        nlohmann::json budgets = nlohmann::json::object();
        for (double ulps : {0.0, 1.0, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0, 1024.0})
          budgets[fmt::format("{}", ulps)] = any_budget.conformant && needed <= ulps;
        c.figures["conformant_with_boundary_ulps"] = budgets;
        c.figures["needed_boundary_ulps"] = any_budget.conformant ? nlohmann::json(needed) : nlohmann::json("none");
        const TensorComparison* codes = nullptr;
        for (const TensorComparison& t : report.tensors)
          if (t.name == "codes") codes = &t;
        c.summary = fmt::format("{} against bnb.blockwise8.dynamic (cuda-ieee), block {}: codes {} of {} differ; {} under "
                                "bnb-cuda; budget needed: {} ulps",
                                input, block, codes ? codes->mismatches : 0, codes ? codes->elements : 0,
                                report.conformant ? "conformant" : "NOT conformant",
                                c.figures["needed_boundary_ulps"].dump());
        checks.push_back(std::move(c));
        return expected;
      });
    }
  return checks;
}

}  // namespace lowbit::gpu
