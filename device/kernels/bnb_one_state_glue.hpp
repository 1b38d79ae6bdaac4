#pragma once
// The ABI side of our kernels of bitsandbytes' one-state rules (the CUDA plugin bnb_one_state_plugin.cu
// and its host twin bnb_one_state_host_twin.cpp): find the case's tensors by name (conformance/engine/
// registry/formats_optimizer_bnb_rules.cpp names them), check dtypes and sizes, read the
// hyperparameters, and hand plain pointers to the side's launch. Nothing here touches tensor data, so
// the same glue serves host and device memory. No C++ types or exceptions cross the ABI.
#include "blockwise_glue.hpp"  // glue::find, glue::number_param, glue::is, glue::fail
#include "bnb_one_state_cuda.cuh"

namespace lowbit_kernels::bnb_one_state {

struct StepArgs {
  Rule rule;
  const float *param, *grad;
  const int64_t* step;  // one value, in the side's memory: the kernel reads it
  const uint8_t* codes;
  const float *scale, *qmap;
  uint64_t n;
  float* param_next;
  uint8_t* codes_next;
  float* scale_next;
  Scalars s;
};

// One side's implementation of a whole launch: 0, or nonzero with a message in error.
using StepFn = int32_t (*)(const StepArgs&, char* error, uint64_t capacity);

// Each rule's format, its state's name and the params it passes as the kernel's beta1 and beta2
// (null: 0.0), as the registry names them.
struct RuleNames {
  const char *format, *state, *beta1, *beta2;
  bool eps;  // the rule reads eps
};
inline RuleNames names_of(Rule rule) {
  switch (rule) {
    case Rule::Lion: return {"bnb.lion8bit.cuda", "exp_avg", "beta1", "beta2", false};
    case Rule::Momentum: return {"bnb.momentum8bit.cuda", "momentum_buffer", "momentum", nullptr, false};
    case Rule::Rmsprop: return {"bnb.rmsprop8bit.cuda", "square_avg", "alpha", nullptr, true};
    case Rule::Adagrad: return {"bnb.adagrad8bit.cuda", "sum", nullptr, nullptr, true};
  }
  return {"", "", nullptr, nullptr, false};
}
constexpr int kRules = 4;

inline int32_t run_rule(Rule rule, StepFn step_fn, const lowbit_tensor* in, int32_t n_in, const char* params,
                        lowbit_tensor* out, int32_t n_out, char* error, uint64_t capacity) {
  using glue::is;
  const RuleNames names = names_of(rule);
  char name[6][64];
  for (int k = 0; k < 6; ++k) {
    static const char* const suffixes[6] = {".codes", ".scale", ".qmap", ".codes.next", ".scale.next", ""};
    snprintf(name[k], sizeof name[k], "%s%s", names.state, suffixes[k]);
  }
  const lowbit_tensor* param = glue::find(in, n_in, "param");
  if (!param || param->dtype != LOWBIT_F32) return glue::fail(error, capacity, "needs an F32 input 'param'", params);
  const uint64_t n = param->bytes / 4, blocks = (n + kBlock - 1) / kBlock;
  const lowbit_tensor* grad = glue::find(in, n_in, "grad");
  const lowbit_tensor* step = glue::find(in, n_in, "step");
  const lowbit_tensor* codes = glue::find(in, n_in, name[0]);
  const lowbit_tensor* scale = glue::find(in, n_in, name[1]);
  const lowbit_tensor* qmap = glue::find(in, n_in, name[2]);
  lowbit_tensor* param_next = glue::find(out, n_out, "param.next");
  lowbit_tensor* codes_next = glue::find(out, n_out, name[3]);
  lowbit_tensor* scale_next = glue::find(out, n_out, name[4]);
  if (!is(grad, LOWBIT_F32, 4 * n) || !is(step, LOWBIT_I64, 8) || !is(param_next, LOWBIT_F32, 4 * n) ||
      !is(codes, LOWBIT_U8, n) || !is(codes_next, LOWBIT_U8, n) || !is(scale, LOWBIT_F32, 4 * blocks) ||
      !is(scale_next, LOWBIT_F32, 4 * blocks) || !is(qmap, LOWBIT_F32, 4 * 256)) {
    char what[512];
    snprintf(what, sizeof what,
             "needs grad and param.next (F32, as many as param), step (one I64), %s.codes and .codes.next (U8, one per "
             "element), %s.scale and .scale.next (F32, one per 256) and %s.qmap (256 F32)",
             name[5], name[5], name[5]);
    return glue::fail(error, capacity, what, params);
  }
  double lr, beta1 = 0.0, beta2 = 0.0, wd, eps = 0.0;
  if (!glue::number_param(params, "lr", &lr) || !glue::number_param(params, "weight_decay", &wd) ||
      (names.beta1 && !glue::number_param(params, names.beta1, &beta1)) ||
      (names.beta2 && !glue::number_param(params, names.beta2, &beta2)) ||
      (names.eps && !glue::number_param(params, "eps", &eps))) {
    char what[256];
    snprintf(what, sizeof what, "needs the numbers lr, weight_decay%s%s%s%s%s", names.beta1 ? ", " : "",
             names.beta1 ? names.beta1 : "", names.beta2 ? ", " : "", names.beta2 ? names.beta2 : "",
             names.eps ? ", eps" : "");
    return glue::fail(error, capacity, what, params);
  }
  const StepArgs a{rule, static_cast<const float*>(param->data), static_cast<const float*>(grad->data),
                   static_cast<const int64_t*>(step->data), static_cast<const uint8_t*>(codes->data),
                   static_cast<const float*>(scale->data), static_cast<const float*>(qmap->data), n,
                   static_cast<float*>(param_next->data), static_cast<uint8_t*>(codes_next->data),
                   static_cast<float*>(scale_next->data), scalars(lr, beta1, beta2, wd, eps)};
  return n == 0 ? 0 : step_fn(a, error, capacity);
}

// The plugin table of one side: a kernel per rule, named prefix.<format> (prefix "cuda" or
// "host-twin"), running Step on tensors in memory (host or CUDA). Each side's lowbit_plugin_v1 returns it.
template <StepFn Step, Rule R>
int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  return run_rule(R, Step, in, n_in, params, out, n_out, error, capacity);
}
template <StepFn Step>
const lowbit_plugin* plugin_of(const char* const (&kernel_names)[kRules], int32_t memory) {
  static const lowbit_kernel kernels[kRules] = {
      {kernel_names[0], names_of(Rule::Lion).format, memory, run<Step, Rule::Lion>},
      {kernel_names[1], names_of(Rule::Momentum).format, memory, run<Step, Rule::Momentum>},
      {kernel_names[2], names_of(Rule::Rmsprop).format, memory, run<Step, Rule::Rmsprop>},
      {kernel_names[3], names_of(Rule::Adagrad).format, memory, run<Step, Rule::Adagrad>}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, kRules, kernels};
  return &plugin;
}

}  // namespace lowbit_kernels::bnb_one_state
