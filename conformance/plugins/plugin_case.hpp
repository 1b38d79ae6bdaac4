#pragma once
// For plugins written over the reference (the reference-as-plugin, the mutants): the ABI's tensors as
// a lowbit Case and back, and one run function that does it all around a C++ step, catching every
// exception (nothing but a status and a message crosses the ABI).
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#include "lowbit/formats.hpp"
#include "lowbit/kernel_plugin.h"

namespace lowbit::plugin {

inline DType dtype_of(std::int32_t d) {
  static const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::U8,
                                  DType::F8_E4M3, DType::F8_E5M2, DType::I32, DType::I64};
  return kDtypes[d];  // the harness passes lowbit_dtype values only
}

// The reference on the case's inputs, then `mutate` (the bug of a mutant; none for the reference),
// written into the harness's outputs.
inline int32_t run_over_reference(const FormatSpec& f, const lowbit_tensor* inputs, int32_t input_count,
                                  const char* params, lowbit_tensor* outputs, int32_t output_count, char* error,
                                  uint64_t capacity, const std::function<void(Case&, const nlohmann::json&)>& mutate) {
  try {
    // The harness passes every param; the case states only those that differ from the defaults, as a
    // case file does (torchao's lr lives in its tensor; the param is only a fresh state's start).
    const nlohmann::json given = nlohmann::json::parse(params);
    nlohmann::json differing = nlohmann::json::object();
    for (const auto& [key, value] : given.items())
      if (!f.default_params.contains(key) || f.default_params.at(key) != value) differing[key] = value;
    Case in;
    in.origin = "plugin input";
    in.metadata = {{"format", f.name}, {"params", differing.dump()}};
    for (int32_t i = 0; i < input_count; ++i) {
      const lowbit_tensor& t = inputs[i];
      in.add(Tensor::from_bytes(t.name, dtype_of(t.dtype), {t.shape, t.shape + t.rank},
                                {static_cast<const std::uint8_t*>(t.data), t.bytes}));
    }
    Case done = run_reference(f, in);
    if (mutate) mutate(done, given);
    for (int32_t i = 0; i < output_count; ++i) {
      const Tensor* t = done.find(outputs[i].name);
      if (!t || t->bytes.size() != outputs[i].bytes) throw std::runtime_error(std::string("no output ") + outputs[i].name);
      std::memcpy(outputs[i].data, t->bytes.data(), t->bytes.size());
    }
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, capacity, "%s", e.what());
    return 1;
  }
}

}  // namespace lowbit::plugin
