// bitsandbytes' own CPU library as a kernel under review: an adapter over the pinned wheel's
// libbitsandbytes_cpu.so (scripts/setup-bnb-cpu.sh fetches it; it needs no torch), loaded with
// dlopen from $LOWBIT_BNB_CPU_LIB (else the loader's search path). Its exported block-wise
// 8-bit functions, as bitsandbytes 0.50 csrc/pythonInterface.cpp declares them:
//   void cquantize_blockwise_cpu_fp32(float* code, float* A, float* absmax, unsigned char* out,
//                                     long long blocksize, long long n);
//   void cdequantize_blockwise_cpu_fp32(float* code, unsigned char* A, const float* absmax, float* out,
//                                       long long blocksize, long long n);
// and their _bf16 and _fp16 twins, whose A (quantize) and out (dequantize) are bf16_t* and fp16_t*
// (structs of one uint16_t: the 16-bit patterns; nm -C shows quantize_cpu_bf16(float*, bf16_t*, float*,
// unsigned char*, long long, long long) and dequantizeBlockwise8bitCpu<bf16_t>(float*, unsigned char*,
// float const*, bf16_t*, long long, long long) behind them). The input's dtype picks the pair.
// One kernel per format (bnb.blockwise8.dynamic, bnb.blockwise8.linear): the qmap comes with the case,
// so the two differ only in the format they claim. The library is bitsandbytes' CPU back end: a case
// that asks for another backend is refused with a message, never computed.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "lowbit/kernel_plugin.h"

namespace {

// the element pointers as void*: float* for fp32, the 16-bit patterns for bf16 and fp16 (same ABI)
using QuantizeFn = void (*)(float*, void*, float*, unsigned char*, long long, long long);
using DequantizeFn = void (*)(float*, unsigned char*, const float*, void*, long long, long long);

struct Entry {
  QuantizeFn quantize = nullptr;
  DequantizeFn dequantize = nullptr;
};

struct Library {
  Entry fp32, bf16, fp16;
};

Entry entry(void* handle, const std::string& path, const std::string& suffix) {
  Entry e;
  e.quantize = reinterpret_cast<QuantizeFn>(dlsym(handle, ("cquantize_blockwise_cpu_" + suffix).c_str()));
  e.dequantize = reinterpret_cast<DequantizeFn>(dlsym(handle, ("cdequantize_blockwise_cpu_" + suffix).c_str()));
  if (!e.quantize || !e.dequantize)
    throw std::runtime_error(path + " exports no cquantize_blockwise_cpu_" + suffix + " / cdequantize_blockwise_cpu_" + suffix);
  return e;
}

const Library& library() {
  static const Library lib = [] {
    const char* env = std::getenv("LOWBIT_BNB_CPU_LIB");
    const std::string path = env && *env ? env : "libbitsandbytes_cpu.so";  // the loader's search path otherwise
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw std::runtime_error("cannot load " + path + ": " + dlerror() + " (scripts/setup-bnb-cpu.sh fetches it)");
    return Library{entry(handle, path, "fp32"), entry(handle, path, "bf16"), entry(handle, path, "fp16")};
  }();
  return lib;
}

lowbit_tensor* find(lowbit_tensor* tensors, int32_t count, const char* name) {
  for (int32_t i = 0; i < count; ++i)
    if (std::strcmp(tensors[i].name, name) == 0) return &tensors[i];
  return nullptr;
}

int32_t run(const lowbit_tensor* inputs, int32_t input_count, const char* params, lowbit_tensor* outputs,
            int32_t output_count, char* error, uint64_t capacity) {
  try {
    const nlohmann::json p = nlohmann::json::parse(params);
    const std::string backend = p.at("backend").get<std::string>();
    if (backend != "cpu")
      throw std::runtime_error("backend '" + backend + "': this adapter runs bitsandbytes' CPU library only");
    const auto block = p.at("block_size").get<long long>();
    auto* in = const_cast<lowbit_tensor*>(inputs);  // the library takes non-const pointers; it reads them only
    const lowbit_tensor* x = find(in, input_count, "input");
    const lowbit_tensor* qmap = find(in, input_count, "qmap");
    lowbit_tensor* codes = find(outputs, output_count, "codes");
    lowbit_tensor* scale = find(outputs, output_count, "scale");
    lowbit_tensor* dequant = find(outputs, output_count, "dequant");
    if (!x || !qmap || !codes || !scale || !dequant || qmap->bytes != 256 * sizeof(float) ||
        (x->dtype != LOWBIT_F32 && x->dtype != LOWBIT_BF16 && x->dtype != LOWBIT_F16) || dequant->dtype != x->dtype)
      throw std::runtime_error("needs a float32, bf16 or f16 input and a 256-entry qmap, and writes codes, scale and "
                               "dequant (in the input's dtype)");
    const std::size_t element = x->dtype == LOWBIT_F32 ? sizeof(float) : 2;
    const auto n = static_cast<long long>(x->bytes / element);
    if (block <= 0 || codes->bytes != static_cast<uint64_t>(n) ||
        scale->bytes != static_cast<uint64_t>((n + block - 1) / block) * sizeof(float) || dequant->bytes != x->bytes)
      throw std::runtime_error("output sizes do not match the input and block_size");
    const Library& lib = library();
    const Entry& f = x->dtype == LOWBIT_F32 ? lib.fp32 : x->dtype == LOWBIT_BF16 ? lib.bf16 : lib.fp16;
    auto* code = static_cast<float*>(qmap->data);
    f.quantize(code, x->data, static_cast<float*>(scale->data), static_cast<unsigned char*>(codes->data), block, n);
    f.dequantize(code, static_cast<unsigned char*>(codes->data), static_cast<const float*>(scale->data), dequant->data,
                 block, n);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, capacity, "%s", e.what());
    return 1;
  }
}

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_v1(void) {
  static const lowbit_kernel kernels[] = {{"bnb_cpu.dynamic", "bnb.blockwise8.dynamic", LOWBIT_MEMORY_HOST, run},
                                          {"bnb_cpu.linear", "bnb.blockwise8.linear", LOWBIT_MEMORY_HOST, run}};
  static const lowbit_plugin plugin = {LOWBIT_PLUGIN_ABI_VERSION, 2, kernels};
  return &plugin;
}
