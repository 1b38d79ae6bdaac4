#pragma once
// The ABI side of our COAT optimizer kernels (the CUDA plugin coat_plugin.cu and its host twin
// coat_host_twin.cpp): find the case's tensors by name (conformance/engine/registry/formats_coat_optimizer.cpp
// names them), check dtypes and sizes, read the hyperparameters from the params, and hand plain
// pointers to the side's step function. Nothing here touches tensor data (the step, an I64, is read
// by the step function: on the device it lives in device memory), so the same glue serves host and
// device memory. No C++ types or exceptions cross the ABI.
#include "blockwise_glue.hpp"  // glue::find, glue::size_param, glue::fail
#include "coat_adamw.cuh"

namespace lowbit_kernels::coat {

// One moment's state: codes per element; scale (and with expansion k and c) per group of 128.
struct MomentIn {
  const uint8_t* codes;
  const float *scale, *expand, *centre;
};
struct MomentOut {
  uint8_t* codes;
  float *scale, *expand, *centre;
};

struct StepArgs {
  const float* param;
  const float* grad;
  const int64_t* step;  // one value: the int the optimizer passes
  uint64_t n;
  MomentIn m_in, v_in;
  float* param_next;
  MomentOut m_out, v_out;
  Hyper h;
};

// One side's implementation of a whole launch: 0, or nonzero with a message in error.
using StepFn = int32_t (*)(const StepArgs&, bool expansion, char* error, uint64_t capacity);

namespace glue_coat {

using glue::is;  // blockwise_glue.hpp, shared with the bitsandbytes Lion kernels
using glue::number_param;

}  // namespace glue_coat

// coat.optim.origin.e4m3 (expansion false) and coat.optim.expand.e4m3 (true).
inline int32_t run_coat_step(StepFn step_fn, bool expansion, const lowbit_tensor* in, int32_t n_in, const char* params,
                             lowbit_tensor* out, int32_t n_out, char* error, uint64_t capacity) {
  using glue_coat::is;
  glue::StepTensors st;
  if (glue::step_tensors(in, n_in, out, n_out, params, &st, error, capacity) != 0) return 1;
  const uint64_t n = st.n, groups = (n + kGroup - 1) / kGroup;
  StepArgs a{};
  a.param = st.param;
  a.grad = st.grad;
  a.step = st.step;
  a.n = n;
  a.param_next = st.param_next;
  const char* const names[2] = {"exp_avg", "exp_avg_sq"};
  for (int k = 0; k < 2; ++k) {
    char name[64];
    const lowbit_tensor* t[4];
    lowbit_tensor* o[4];
    const char* const parts[4] = {"codes", "scale", "expand", "centre"};
    const int count = expansion ? 4 : 2;
    for (int j = 0; j < count; ++j) {
      snprintf(name, sizeof name, "%s.%s", names[k], parts[j]);
      t[j] = glue::find(in, n_in, name);
      snprintf(name, sizeof name, "%s.%s.next", names[k], parts[j]);
      o[j] = glue::find(out, n_out, name);
      const int32_t dtype = j == 0 ? LOWBIT_F8_E4M3 : LOWBIT_F32;
      const uint64_t bytes = j == 0 ? n : 4 * groups;
      if (!is(t[j], dtype, bytes) || !is(o[j], dtype, bytes))
        return glue::fail(error, capacity,
                          "needs each moment's codes (F8_E4M3, one per element) and scale (with expansion also expand and "
                          "centre; F32, one per group of 128), before and after (.next)",
                          params);
    }
    MomentIn& mi = k == 0 ? a.m_in : a.v_in;
    MomentOut& mo = k == 0 ? a.m_out : a.v_out;
    mi = {static_cast<const uint8_t*>(t[0]->data), static_cast<const float*>(t[1]->data),
          expansion ? static_cast<const float*>(t[2]->data) : nullptr, expansion ? static_cast<const float*>(t[3]->data) : nullptr};
    mo = {static_cast<uint8_t*>(o[0]->data), static_cast<float*>(o[1]->data), expansion ? static_cast<float*>(o[2]->data) : nullptr,
          expansion ? static_cast<float*>(o[3]->data) : nullptr};
  }
  // pybind11 rounds each Python float to float32 once (reference: formats_coat_optimizer.cpp hyper_from)
  double lr, beta1, beta2, eps, wd;
  if (!glue_coat::number_param(params, "lr", &lr) || !glue_coat::number_param(params, "beta1", &beta1) ||
      !glue_coat::number_param(params, "beta2", &beta2) || !glue_coat::number_param(params, "eps", &eps) ||
      !glue_coat::number_param(params, "weight_decay", &wd))
    return glue::fail(error, capacity, "needs the numbers lr, beta1, beta2, eps and weight_decay", params);
  a.h = {static_cast<float>(lr), static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(eps),
         static_cast<float>(wd), 0};
  if (expansion) {
    const uint64_t e = glue::size_param(params, "expand_min");
    if (e == 0 || e > 0x7FFFFFFF) return glue::fail(error, capacity, "no positive expand_min", params);
    a.h.expand_min = static_cast<int>(e);
  }
  return n == 0 ? 0 : step_fn(a, expansion, error, capacity);
}

}  // namespace lowbit_kernels::coat
