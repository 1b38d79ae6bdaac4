#pragma once
// How a case of one of our bitsandbytes CUDA optimizer formats becomes a call of bitsandbytes' own
// 8-bit block-wise entry point (c<rule>_8bit_blockwise_grad_fp32, csrc/pythonInterface.cpp), and how
// the buffers the call updated become the case's outputs. Host code only: the GPU check
// (bnb_optimizer_checks.cpp) moves these arrays to the device and back; the unit test
// (conformance/tests/test_bnb_optimizer_call.cpp) checks them on the CPU.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lowbit/case.hpp"

namespace lowbit::gpu {

// The entry point's arguments, in its order, with the pointers' host contents:
//   void c<rule>_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
//     unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step,
//     float lr, float* quantiles1, float* quantiles2, float* absmax1, float* absmax2,
//     float weight_decay, float gnorm_scale, bool skip_zeros, int n)
// p, state1, state2, absmax1 and absmax2 are updated in place. A one-state rule passes null for
// state2, quantiles2 and absmax2 (empty here), as bitsandbytes' Python does.
struct BnbOptimizerCall {
  std::string symbol;  // e.g. "clion_8bit_blockwise_grad_fp32"
  std::vector<float> p, g;
  std::vector<std::uint8_t> state1, state2;
  float beta1 = 0, beta2 = 0, beta3 = 0, alpha = 0, eps = 0;
  std::int32_t step = 0;
  float lr = 0;
  std::vector<float> quantiles1, quantiles2, absmax1, absmax2;
  float weight_decay = 0, gnorm_scale = 1.0f;  // the optimizers' gnorm_scale (no percentile clipping)
  bool skip_zeros = false;
  std::int32_t n = 0;
  // The case's state names behind state1 (one, or AdEMAMix's two rows) and state2 (empty: none).
  std::vector<std::string> state1_rows;
  std::string state2_name;
};

// The formats this step drives: bnb.adam8bit.cuda and the five of issue 29.
const std::vector<std::string>& bnb_optimizer_cuda_formats();

// The entry point a format's cases call; std::invalid_argument for a format not in the list.
std::string bnb_optimizer_symbol(const std::string& format);

// The call for one case (its inputs: param, grad, step, the states' codes, scale and qmap) under the
// resolved params. std::invalid_argument for a format not in the list, a step outside 1..INT32_MAX,
// more elements than an int counts, or AdEMAMix rows with different qmaps (bitsandbytes has one
// quantiles1 for both); CaseError for a missing tensor.
BnbOptimizerCall bnb_optimizer_call(const std::string& format, const Case& in, const nlohmann::json& params);

// The case's outputs from the call's buffers after the entry point ran (call.p, state1, state2,
// absmax1, absmax2 as updated): param.next, <state>.codes.next, <state>.scale.next, with the shapes
// of the inputs they replace.
std::vector<Tensor> bnb_optimizer_outputs(const BnbOptimizerCall& call, const Case& in);

}  // namespace lowbit::gpu
