#pragma once
// The ABI side of our block-wise kernels (the CUDA plugin blockwise_plugin.cu and its host twin
// blockwise_host_twin.cpp): find the tensors by name, check dtypes and sizes, read the params, and hand
// plain pointers to the side's compute functions. Nothing here touches tensor data, so the same glue
// serves host and device memory. No C++ types or exceptions cross the ABI.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowbit/kernel_plugin.h"

namespace lowbit_kernels {

// torchao.codebook8/4.*: qmap of 256 or 16 entries; packed (4-bit only) gets two codes a byte.
struct CodebookArgs {
  const float* x;
  uint64_t n;
  const float* qmap;
  uint32_t qmap_size;
  uint64_t block;
  uint8_t* codes;
  float* scale;
  float* dequant;
  uint8_t* packed;  // null for 8-bit
};

// torchao.fp8: the cast's rules and the NaN a NaN code widens to, from the params.
struct Fp8Args {
  const float* x;
  uint64_t n;
  uint64_t block;
  bool saturate;
  bool nan_keeps_sign;
  uint32_t nan_bits;
  uint8_t* codes;
  float* scale;
  float* dequant;
};

// bnb.blockwise8.* with backend "cpu": a 256-entry qmap; the last block may be partial.
struct BnbArgs {
  const float* x;
  uint64_t n;
  const float* qmap;
  uint64_t block;
  uint8_t* codes;
  float* scale;
  float* dequant;
};

// One side's implementations: 0, or nonzero with a message in error.
struct Computes {
  int32_t (*codebook)(const CodebookArgs&, char* error, uint64_t capacity);
  int32_t (*fp8)(const Fp8Args&, char* error, uint64_t capacity);
  int32_t (*bnb)(const BnbArgs&, char* error, uint64_t capacity);
};

namespace glue {

inline const lowbit_tensor* find(const lowbit_tensor* t, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  return nullptr;
}
inline lowbit_tensor* find(lowbit_tensor* t, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  return nullptr;
}

// {"block_size":128} -> 128; 0 when absent or not a positive integer. The harness passes every param
// of the format resolved over its defaults, as compact JSON.
inline uint64_t size_param(const char* params, const char* key) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  const char* at = strstr(params, quoted);
  if (!at) return 0;
  at += strlen(quoted);
  while (*at == ' ' || *at == ':') ++at;
  if (*at < '1' || *at > '9') return 0;
  char* end = nullptr;
  const unsigned long long v = strtoull(at, &end, 10);
  return (*end == ',' || *end == '}' || *end == ' ') ? v : 0;
}

// {"backend":"cpu"} with key "backend" and value "cpu": true when the param is that string.
inline bool string_param_is(const char* params, const char* key, const char* value) {
  char pair[128];
  snprintf(pair, sizeof pair, "\"%s\":\"%s\"", key, value);
  return strstr(params, pair) != nullptr;
}

// {"lr":0.001,...} -> 0.001 as a double (the JSON number as written; the harness writes them so
// that they read back exactly); false when absent or not a number.
inline bool number_param(const char* params, const char* key, double* value) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  const char* at = strstr(params, quoted);
  if (!at) return false;
  at += strlen(quoted);
  while (*at == ' ' || *at == ':') ++at;
  char* end = nullptr;
  *value = strtod(at, &end);
  return end != at && (*end == ',' || *end == '}' || *end == ' ');
}

inline bool is(const lowbit_tensor* t, int32_t dtype, uint64_t bytes) { return t && t->dtype == dtype && t->bytes == bytes; }

inline int32_t fail(char* error, uint64_t capacity, const char* what, const char* params) {
  snprintf(error, capacity, "%s (params %s)", what, params);
  return 1;
}

// The tensors every optimizer step takes: param (F32), grad and param.next (F32, as many), step (one
// I64). 0 with them in *t, or 1 with the error written.
struct StepTensors {
  const float *param, *grad;
  const int64_t* step;
  float* param_next;
  uint64_t n;
};
inline int32_t step_tensors(const lowbit_tensor* in, int32_t n_in, lowbit_tensor* out, int32_t n_out, const char* params,
                            StepTensors* t, char* error, uint64_t capacity) {
  const lowbit_tensor* param = find(in, n_in, "param");
  if (!param || param->dtype != LOWBIT_F32) return fail(error, capacity, "needs an F32 input 'param'", params);
  const uint64_t n = param->bytes / 4;
  const lowbit_tensor* grad = find(in, n_in, "grad");
  const lowbit_tensor* step = find(in, n_in, "step");
  lowbit_tensor* param_next = find(out, n_out, "param.next");
  if (!is(grad, LOWBIT_F32, 4 * n) || !is(step, LOWBIT_I64, 8) || !is(param_next, LOWBIT_F32, 4 * n))
    return fail(error, capacity, "needs grad and param.next (F32, as many as param) and step (one I64)", params);
  *t = {static_cast<const float*>(param->data), static_cast<const float*>(grad->data),
        static_cast<const int64_t*>(step->data), static_cast<float*>(param_next->data), n};
  return 0;
}

// input F32 and the three outputs every block-wise state has, sized for n elements in blocks of block.
inline bool common_shapes(const lowbit_tensor* x, const lowbit_tensor* codes, const lowbit_tensor* scale,
                          const lowbit_tensor* dequant, int32_t codes_dtype, uint64_t block) {
  const uint64_t n = x->bytes / 4, blocks = (n + block - 1) / block;
  return x->dtype == LOWBIT_F32 && codes->dtype == codes_dtype && codes->bytes == n && scale->dtype == LOWBIT_F32 &&
         scale->bytes == 4 * blocks && dequant->dtype == LOWBIT_F32 && dequant->bytes == 4 * n;
}

}  // namespace glue

// torchao.codebook{8,4}.{signed,unsigned}: bits says which (the 4-bit states also write codes_packed).
inline int32_t run_torchao_codebook(const Computes& c, uint32_t bits, const lowbit_tensor* in, int32_t n_in,
                                    const char* params, lowbit_tensor* out, int32_t n_out, char* error, uint64_t capacity) {
  const lowbit_tensor* x = glue::find(in, n_in, "input");
  const lowbit_tensor* qmap = glue::find(in, n_in, "qmap");
  lowbit_tensor* codes = glue::find(out, n_out, "codes");
  lowbit_tensor* scale = glue::find(out, n_out, "scale");
  lowbit_tensor* dequant = glue::find(out, n_out, "dequant");
  lowbit_tensor* packed = bits == 4 ? glue::find(out, n_out, "codes_packed") : nullptr;
  if (!x || !qmap || !codes || !scale || !dequant || (bits == 4 && !packed))
    return glue::fail(error, capacity, "needs input, qmap, codes, scale, dequant (and codes_packed for 4 bits)", params);
  const uint64_t block = glue::size_param(params, "block_size");
  if (block == 0) return glue::fail(error, capacity, "no positive block_size", params);
  const uint32_t qmap_size = bits == 8 ? 256u : 16u;
  const uint64_t n = x->bytes / 4;
  if (n % block) return glue::fail(error, capacity, "torchao quantizes whole blocks only: the input is not a multiple of block_size", params);
  if (!glue::common_shapes(x, codes, scale, dequant, LOWBIT_U8, block) || qmap->dtype != LOWBIT_F32 || qmap->bytes != 4 * qmap_size ||
      (packed && (n % 2 || packed->dtype != LOWBIT_U8 || packed->bytes != n / 2)))
    return glue::fail(error, capacity, "unexpected dtypes or sizes", params);
  const CodebookArgs a{static_cast<const float*>(x->data), n, static_cast<const float*>(qmap->data), qmap_size, block,
                       static_cast<uint8_t*>(codes->data), static_cast<float*>(scale->data),
                       static_cast<float*>(dequant->data), packed ? static_cast<uint8_t*>(packed->data) : nullptr};
  return n == 0 ? 0 : c.codebook(a, error, capacity);
}

// torchao.fp8 under any of its params (overflow satfinite|nan|inf, nan_encoding torch|cuda|ml_dtypes,
// nan_widening c10|quiet|avx512).
inline int32_t run_torchao_fp8(const Computes& c, const lowbit_tensor* in, int32_t n_in, const char* params,
                               lowbit_tensor* out, int32_t n_out, char* error, uint64_t capacity) {
  const lowbit_tensor* x = glue::find(in, n_in, "input");
  lowbit_tensor* codes = glue::find(out, n_out, "codes");
  lowbit_tensor* scale = glue::find(out, n_out, "scale");
  lowbit_tensor* dequant = glue::find(out, n_out, "dequant");
  if (!x || !codes || !scale || !dequant) return glue::fail(error, capacity, "needs input, codes, scale and dequant", params);
  const uint64_t block = glue::size_param(params, "block_size");
  if (block == 0) return glue::fail(error, capacity, "no positive block_size", params);
  const uint64_t n = x->bytes / 4;
  if (n % block) return glue::fail(error, capacity, "torchao quantizes whole blocks only: the input is not a multiple of block_size", params);
  if (!glue::common_shapes(x, codes, scale, dequant, LOWBIT_F8_E4M3, block))
    return glue::fail(error, capacity, "unexpected dtypes or sizes", params);
  const bool saturate = glue::string_param_is(params, "overflow", "satfinite");
  if (!saturate && !glue::string_param_is(params, "overflow", "nan") && !glue::string_param_is(params, "overflow", "inf"))
    return glue::fail(error, capacity, "overflow must be satfinite, nan or inf", params);
  const bool drops_sign = glue::string_param_is(params, "nan_encoding", "cuda");
  if (!drops_sign && !glue::string_param_is(params, "nan_encoding", "torch") && !glue::string_param_is(params, "nan_encoding", "ml_dtypes"))
    return glue::fail(error, capacity, "nan_encoding must be torch, cuda or ml_dtypes", params);
  // c10's widening unless the params say quiet (or avx512, its other name; c10 is the format's default)
  const bool quiet = glue::string_param_is(params, "nan_widening", "quiet") || glue::string_param_is(params, "nan_widening", "avx512");
  const uint32_t nan_bits = quiet ? 0x7FC00000u : 0x7FF00000u;
  if (!quiet && strstr(params, "\"nan_widening\"") && !glue::string_param_is(params, "nan_widening", "c10"))
    return glue::fail(error, capacity, "nan_widening must be c10, quiet or avx512", params);
  const Fp8Args a{static_cast<const float*>(x->data), n, block, saturate, !drops_sign, nan_bits,
                  static_cast<uint8_t*>(codes->data), static_cast<float*>(scale->data), static_cast<float*>(dequant->data)};
  return n == 0 ? 0 : c.fp8(a, error, capacity);
}

// bnb.blockwise8.{dynamic,linear} with backend "cpu" (the formats' default; the other back ends are refused).
inline int32_t run_bnb(const Computes& c, const lowbit_tensor* in, int32_t n_in, const char* params, lowbit_tensor* out,
                       int32_t n_out, char* error, uint64_t capacity) {
  const lowbit_tensor* x = glue::find(in, n_in, "input");
  const lowbit_tensor* qmap = glue::find(in, n_in, "qmap");
  lowbit_tensor* codes = glue::find(out, n_out, "codes");
  lowbit_tensor* scale = glue::find(out, n_out, "scale");
  lowbit_tensor* dequant = glue::find(out, n_out, "dequant");
  if (!x || !qmap || !codes || !scale || !dequant) return glue::fail(error, capacity, "needs input, qmap, codes, scale and dequant", params);
  if (!glue::string_param_is(params, "backend", "cpu"))
    return glue::fail(error, capacity, "only the cpu back end (its lookup table) is implemented", params);
  const uint64_t block = glue::size_param(params, "block_size");
  if (block == 0) return glue::fail(error, capacity, "no positive block_size", params);
  if (!glue::common_shapes(x, codes, scale, dequant, LOWBIT_U8, block) || qmap->dtype != LOWBIT_F32 || qmap->bytes != 4 * 256)
    return glue::fail(error, capacity, "unexpected dtypes or sizes", params);
  const BnbArgs a{static_cast<const float*>(x->data), x->bytes / 4, static_cast<const float*>(qmap->data), block,
                  static_cast<uint8_t*>(codes->data), static_cast<float*>(scale->data), static_cast<float*>(dequant->data)};
  return a.n == 0 ? 0 : c.bnb(a, error, capacity);
}

}  // namespace lowbit_kernels
