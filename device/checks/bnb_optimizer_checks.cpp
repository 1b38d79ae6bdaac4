// bitsandbytes' own 8-bit block-wise optimizer kernels (the c<rule>_8bit_blockwise_grad_fp32 entry
// points of libbitsandbytes_cuda130.so, loaded with dlopen) against our IEEE models of them:
// bnb.adam8bit.cuda, bnb.lion8bit.cuda, bnb.momentum8bit.cuda, bnb.rmsprop8bit.cuda,
// bnb.adagrad8bit.cuda and bnb.ademamix8bit.cuda. Each format's default battery (verify's inputs,
// three chained steps, each from the reference's state after the previous one, as golden generate
// --steps makes them) runs through the library on the device; the library's new parameter, codes and
// absmax are compared with the reference's under the shipped `bnb-cuda` policy, and once more with no
// limit on the boundary budget (bnb_library.hpp). One check per case and one per format; a library
// without a format's entry point gives that format one check saying so.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "bnb_library.hpp"
#include "bnb_optimizer_call.hpp"
#include "check_report.hpp"
#include "gpu_runtime.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/tolerance.hpp"

namespace lowbit::gpu {

namespace {

// bitsandbytes 0.50.2 csrc/pythonInterface.cpp MAKE_CBLOCKWISE8, float32: every pointer device memory.
using BlockwiseStepFn = void (*)(float* p, float* g, unsigned char* state1, unsigned char* state2, float beta1,
                                 float beta2, float beta3, float alpha, float eps, int step, float lr, float* quantiles1,
                                 float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
                                 float gnorm_scale, bool skip_zeros, int n);

constexpr int kSteps = 3;  // verify's default

// Runs the entry point on the call's arrays and reads the updated ones back into it.
void run_on_device(BlockwiseStepFn fn, BnbOptimizerCall& c) {
  const std::size_t n = c.p.size();
  DeviceBuffer<float> p(n), g(n), q1(c.quantiles1.size()), a1(c.absmax1.size());
  DeviceBuffer<unsigned char> s1(c.state1.size());
  // a one-state rule passes null for the second state's three pointers
  std::unique_ptr<DeviceBuffer<float>> q2, a2;
  std::unique_ptr<DeviceBuffer<unsigned char>> s2;
  p.from_host(c.p.data(), n);
  g.from_host(c.g.data(), n);
  q1.from_host(c.quantiles1.data(), c.quantiles1.size());
  a1.from_host(c.absmax1.data(), c.absmax1.size());
  s1.from_host(c.state1.data(), c.state1.size());
  if (!c.state2.empty()) {
    q2 = std::make_unique<DeviceBuffer<float>>(c.quantiles2.size());
    a2 = std::make_unique<DeviceBuffer<float>>(c.absmax2.size());
    s2 = std::make_unique<DeviceBuffer<unsigned char>>(c.state2.size());
    q2->from_host(c.quantiles2.data(), c.quantiles2.size());
    a2->from_host(c.absmax2.data(), c.absmax2.size());
    s2->from_host(c.state2.data(), c.state2.size());
  }
  fn(p.get(), g.get(), s1.get(), s2 ? s2->get() : nullptr, c.beta1, c.beta2, c.beta3, c.alpha, c.eps, c.step, c.lr,
     q1.get(), q2 ? q2->get() : nullptr, a1.get(), a2 ? a2->get() : nullptr, c.weight_decay, c.gnorm_scale,
     c.skip_zeros, c.n);
  finish(c.symbol.c_str());
  p.to_host(c.p.data(), n);
  s1.to_host(c.state1.data(), c.state1.size());
  a1.to_host(c.absmax1.data(), c.absmax1.size());
  if (s2) {
    s2->to_host(c.state2.data(), c.state2.size());
    a2->to_host(c.absmax2.data(), c.absmax2.size());
  }
}

std::string mismatch_text(const nlohmann::json& tensors) {
  std::string s;
  for (const auto& [name, t] : tensors.items())
    if (t["mismatches"].get<std::uint64_t>() > 0)
      s += fmt::format("{}{} {}/{}", s.empty() ? "" : ", ", name, t["mismatches"].dump(), t["elements"].dump());
  return s.empty() ? "none differ" : s + " differ";
}

}  // namespace

std::vector<Check> bnb_optimizer_checks(const CheckContext& context) {
  std::vector<Check> checks;
  if (context.bnb_library.empty()) return checks;
  const BnbLibrary library(context.bnb_library);
  const TolerancePolicy shipped = load_tolerance_policy("bnb-cuda", context.policy_dir);
  const MadeBy made_by{"bitsandbytes 0.50.2 CUDA (libbitsandbytes_cuda130.so)", "lowbit-gpu-checks"};
  for (const std::string& name : bnb_optimizer_cuda_formats()) {
    const FormatSpec* format = find_format(name);
    Check total;
    total.name = fmt::format("bnb.cuda130.{}", name);
    const std::string symbol = bnb_optimizer_symbol(name);
    const auto fn = reinterpret_cast<BlockwiseStepFn>(library.symbol(symbol.c_str()));
    if (!fn) {
      total.passed = false;
      total.figures = {{"entry_point", symbol}, {"missing", true}};
      total.summary = fmt::format("{}: the library lacks {}: not run", name, symbol);
      checks.push_back(std::move(total));
      continue;
    }
    int cases = 0, conformant = 0;
    double needed = 0;
    bool any_budget = true;
    nlohmann::json per_case = nlohmann::json::array();
    for (const InputRun& run : default_input_runs(*format))
      for_each_reference_case(
          *format, run, kSteps, made_by, true,
          [&](const std::string& stem, const Case& expected) {
            BnbOptimizerCall call = bnb_optimizer_call(name, expected, resolve_params(*format, expected.params()));
            run_on_device(fn, call);
            Case actual = expected;
            actual.origin = "bitsandbytes CUDA";
            for (Tensor& t : bnb_optimizer_outputs(call, expected)) actual.add(std::move(t));
            Check c;
            c.name = fmt::format("bnb.cuda130.{}.{}", name, stem);
            c.figures = {{"format", name}, {"input", run.spec}, {"params", run.params}, {"entry_point", symbol},
                         {"step", call.step}};
            const bool ok = compare_with_budget(expected, actual, shipped, c);
            ++cases;
            conformant += ok ? 1 : 0;
            if (c.figures["needed_boundary_ulps"].is_number())
              needed = std::max(needed, c.figures["needed_boundary_ulps"].get<double>());
            else
              any_budget = false;
            c.summary = fmt::format("{} step {} through {}: {}; {} under bnb-cuda; budget needed: {} ulps", run.spec,
                                    call.step, symbol, mismatch_text(c.figures["tensors"]),
                                    ok ? "conformant" : "NOT conformant", c.figures["needed_boundary_ulps"].dump());
            per_case.push_back(c.name);
            checks.push_back(std::move(c));
          },
          [&](const std::string& stem, const std::string& why) {
            Check c;
            c.name = fmt::format("bnb.cuda130.{}.{}", name, stem);
            c.passed = true;
            c.figures = {{"skipped", why}};
            c.summary = fmt::format("skipped: {}", why);
            checks.push_back(std::move(c));
          },
          context.threads);
    total.passed = cases > 0 && conformant == cases;
    total.figures = {{"entry_point", symbol}, {"cases", cases}, {"conformant_cases", conformant},
                     {"needed_boundary_ulps", any_budget ? nlohmann::json(needed) : nlohmann::json("none")},
                     {"case_checks", per_case}};
    total.summary = fmt::format("{} of {} cases conformant under bnb-cuda; budget that would make all conform: {}", conformant,
                                cases, any_budget ? fmt::format("{} ulps", needed) : "none (a mismatch no budget allows)");
    checks.push_back(std::move(total));
  }
  return checks;
}

}  // namespace lowbit::gpu
