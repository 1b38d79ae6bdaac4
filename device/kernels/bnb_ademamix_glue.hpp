#pragma once
// The ABI side of our bnb.ademamix8bit.cuda kernels (the CUDA plugin bnb_ademamix_plugin.cu and its host
// twin bnb_ademamix_host_twin.cpp): find the case's tensors by name (conformance/engine/registry/
// formats_optimizer_bnb_rules.cpp names them: exp_avg and exp_avg_slow, state1's two rows; exp_avg_sq,
// state2), check dtypes and sizes, read the hyperparameters, refuse element counts that 256 does not
// divide (as the format does: the real kernel's slow-moment absmax index races there), and hand plain
// pointers to the side's launch. Nothing here touches tensor data (the step lives in the side's memory).
#include "blockwise_glue.hpp"  // glue::find, glue::number_param, glue::is, glue::fail
#include "bnb_ademamix_cuda.cuh"

namespace lowbit_kernels::bnb_ademamix {

struct StateArgs {
  const uint8_t* codes;
  const float *scale, *qmap;
  uint8_t* codes_next;
  float* scale_next;
};

struct StepArgs {
  const float *param, *grad;
  const int64_t* step;  // one value, in the side's memory
  StateArgs m1, m2, nu;
  uint64_t n;
  float* param_next;
  Hyper h;
};

using StepFn = int32_t (*)(const StepArgs&, char* error, uint64_t capacity);

inline int32_t run_ademamix(StepFn step_fn, const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out,
                            int32_t n_out, char* error, uint64_t capacity) {
  using glue::is;
  glue::StepTensors st;
  if (glue::step_tensors(in, n_in, out, n_out, params, &st, error, capacity) != 0) return 1;
  const uint64_t n = st.n, blocks = n / kBlock;
  if (n % kBlock != 0)
    return glue::fail(error, capacity, "takes whole blocks of 256 elements only (the kernel's slow-moment absmax races otherwise)",
                      params);
  StepArgs a{};
  struct Named {
    const char* name;
    StateArgs* args;
  };
  const Named states[3] = {{"exp_avg", &a.m1}, {"exp_avg_slow", &a.m2}, {"exp_avg_sq", &a.nu}};
  for (const Named& s : states) {
    char name[5][48];
    static const char* const suffixes[5] = {".codes", ".scale", ".qmap", ".codes.next", ".scale.next"};
    for (int k = 0; k < 5; ++k) snprintf(name[k], sizeof name[k], "%s%s", s.name, suffixes[k]);
    const lowbit_tensor* codes = glue::find(in, n_in, name[0]);
    const lowbit_tensor* scale = glue::find(in, n_in, name[1]);
    const lowbit_tensor* qmap = glue::find(in, n_in, name[2]);
    lowbit_tensor* codes_next = glue::find(out, n_out, name[3]);
    lowbit_tensor* scale_next = glue::find(out, n_out, name[4]);
    if (!is(codes, LOWBIT_U8, n) || !is(codes_next, LOWBIT_U8, n) || !is(scale, LOWBIT_F32, 4 * blocks) ||
        !is(scale_next, LOWBIT_F32, 4 * blocks) || !is(qmap, LOWBIT_F32, 4 * 256)) {
      char what[256];
      snprintf(what, sizeof what, "needs %s.codes and .codes.next (U8, one per element), .scale and .scale.next (F32, one per 256) and .qmap (256 F32)",
               s.name);
      return glue::fail(error, capacity, what, params);
    }
    *s.args = {static_cast<const uint8_t*>(codes->data), static_cast<const float*>(scale->data),
               static_cast<const float*>(qmap->data), static_cast<uint8_t*>(codes_next->data),
               static_cast<float*>(scale_next->data)};
  }
  double t_alpha, t_beta3;
  Hyper& h = a.h;
  if (!glue::number_param(params, "lr", &h.lr) || !glue::number_param(params, "beta1", &h.beta1) ||
      !glue::number_param(params, "beta2", &h.beta2) || !glue::number_param(params, "beta3", &h.beta3) ||
      !glue::number_param(params, "alpha", &h.alpha) || !glue::number_param(params, "eps", &h.eps) ||
      !glue::number_param(params, "weight_decay", &h.weight_decay) || !glue::number_param(params, "t_alpha", &t_alpha) ||
      !glue::number_param(params, "t_beta3", &t_beta3))
    return glue::fail(error, capacity, "needs the numbers lr, beta1, beta2, beta3, alpha, eps, weight_decay, t_alpha and t_beta3",
                      params);
  h.t_alpha = static_cast<int64_t>(t_alpha);
  h.t_beta3 = static_cast<int64_t>(t_beta3);
  a.param = st.param;
  a.grad = st.grad;
  a.step = st.step;
  a.n = n;
  a.param_next = st.param_next;
  return n == 0 ? 0 : step_fn(a, error, capacity);
}

// The plugin table of one side: its one kernel, named name, running Step on tensors in memory (host or
// CUDA). Each side's lowbit_plugin_v1 returns it.
template <StepFn Step>
int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  return run_ademamix(Step, in, n_in, params, out, n_out, error, capacity);
}
template <StepFn Step>
const lowbit_plugin* plugin_of(const char* name, int32_t memory) {
  static const lowbit_kernel kernels[] = {{name, "bnb.ademamix8bit.cuda", memory, run<Step>}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kernels};
  return &plugin;
}

}  // namespace lowbit_kernels::bnb_ademamix
