#pragma once
// The ABI side of our bnb.lion8bit.cuda kernels (the CUDA plugin bnb_lion_plugin.cu and its host twin
// bnb_lion_host_twin.cpp): find the case's tensors by name (conformance/engine/registry/
// formats_optimizer_bnb_rules.cpp names them), check dtypes and sizes, read the hyperparameters, and
// hand plain pointers to the side's launch. Nothing here touches tensor data, so the same glue serves
// host and device memory. No C++ types or exceptions cross the ABI.
#include "blockwise_glue.hpp"  // glue::find, glue::number_param, glue::is, glue::fail
#include "bnb_lion_cuda.cuh"

namespace lowbit_kernels::bnb_lion {

struct StepArgs {
  const float *param, *grad;
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

inline int32_t run_lion(StepFn step_fn, const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out,
                        int32_t n_out, char* error, uint64_t capacity) {
  using glue::is;
  const lowbit_tensor* param = glue::find(in, n_in, "param");
  if (!param || param->dtype != LOWBIT_F32) return glue::fail(error, capacity, "needs an F32 input 'param'", params);
  const uint64_t n = param->bytes / 4, blocks = (n + kBlock - 1) / kBlock;
  const lowbit_tensor* grad = glue::find(in, n_in, "grad");
  const lowbit_tensor* step = glue::find(in, n_in, "step");  // Lion's kernel does not read it
  const lowbit_tensor* codes = glue::find(in, n_in, "exp_avg.codes");
  const lowbit_tensor* scale = glue::find(in, n_in, "exp_avg.scale");
  const lowbit_tensor* qmap = glue::find(in, n_in, "exp_avg.qmap");
  lowbit_tensor* param_next = glue::find(out, n_out, "param.next");
  lowbit_tensor* codes_next = glue::find(out, n_out, "exp_avg.codes.next");
  lowbit_tensor* scale_next = glue::find(out, n_out, "exp_avg.scale.next");
  if (!is(grad, LOWBIT_F32, 4 * n) || !is(step, LOWBIT_I64, 8) || !is(param_next, LOWBIT_F32, 4 * n) ||
      !is(codes, LOWBIT_U8, n) || !is(codes_next, LOWBIT_U8, n) || !is(scale, LOWBIT_F32, 4 * blocks) ||
      !is(scale_next, LOWBIT_F32, 4 * blocks) || !is(qmap, LOWBIT_F32, 4 * 256))
    return glue::fail(error, capacity,
                      "needs grad and param.next (F32, as many as param), step (one I64), exp_avg.codes and .codes.next "
                      "(U8, one per element), exp_avg.scale and .scale.next (F32, one per 256) and exp_avg.qmap (256 F32)",
                      params);
  double lr, beta1, beta2, wd;
  if (!glue::number_param(params, "lr", &lr) || !glue::number_param(params, "beta1", &beta1) ||
      !glue::number_param(params, "beta2", &beta2) || !glue::number_param(params, "weight_decay", &wd))
    return glue::fail(error, capacity, "needs the numbers lr, beta1, beta2 and weight_decay", params);
  const StepArgs a{static_cast<const float*>(param->data), static_cast<const float*>(grad->data),
                   static_cast<const uint8_t*>(codes->data), static_cast<const float*>(scale->data),
                   static_cast<const float*>(qmap->data), n, static_cast<float*>(param_next->data),
                   static_cast<uint8_t*>(codes_next->data), static_cast<float*>(scale_next->data),
                   scalars(lr, beta1, beta2, wd)};
  return n == 0 ? 0 : step_fn(a, error, capacity);
}

// The plugin table of one side: its one kernel, named name, running Step on tensors in memory (host or
// CUDA). Each side's lowbit_plugin_v1 returns it.
template <StepFn Step>
int32_t run(const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out, int32_t n_out, char* error,
            uint64_t capacity) {
  return run_lion(Step, in, n_in, params, out, n_out, error, capacity);
}
template <StepFn Step>
const lowbit_plugin* plugin_of(const char* name, int32_t memory) {
  static const lowbit_kernel kernels[] = {{name, "bnb.lion8bit.cuda", memory, run<Step>}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, 1, kernels};
  return &plugin;
}

}  // namespace lowbit_kernels::bnb_lion
