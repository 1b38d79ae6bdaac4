// The bandwidth of our block-wise CUDA kernels (device/kernels/: blockwise_plugin.cu, and any other plugin
// named, e.g. cuda_perblock_plugin.cu) against a plain copy kernel from the block-wise plugin's module, in
// one run: each kernel of each plugin on 2^28 float32 elements, timed
// with CUDA events around the plugin's run() on the legacy default stream (one warm-up, then the median
// of five), reported as GB/s of the bytes it must move (input read; codes, dequantized values, scales
// and packed codes written) and as a fraction of the copy's GB/s (8 bytes an element). The goal is
// 85 %; the figure is a measurement, reported whatever it is. What each check expects: the kernel runs,
// and its outputs for the first 2^20 elements (whole blocks) are the reference's, bit for bit.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "blockwise_bench.h"
#include "check_report.hpp"
#include "gpu_runtime.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/kernel_plugin.h"

namespace lowbit::gpu {

namespace {

constexpr std::uint64_t kElements = std::uint64_t{1} << 28;
constexpr std::uint64_t kChecked = std::uint64_t{1} << 20;  // a multiple of every default block size
constexpr int kRepeats = 5;

struct Plugin {
  const lowbit_plugin* table = nullptr;
  const lowbit_blockwise_bench* bench = nullptr;
};

// The plugin's kernel table, and its bench exports when it has them (the block-wise plugin does).
Plugin open_plugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error(fmt::format("--kernels-plugin {}: {}", path, dlerror()));
  const auto entry = reinterpret_cast<lowbit_plugin_entry_fn>(dlsym(handle, LOWBIT_PLUGIN_ENTRY));
  const auto bench = reinterpret_cast<lowbit_blockwise_bench_fn>(dlsym(handle, LOWBIT_BLOCKWISE_BENCH_ENTRY));
  if (!entry) throw std::runtime_error(fmt::format("--kernels-plugin {}: no {}", path, LOWBIT_PLUGIN_ENTRY));
  return {entry(), bench ? bench() : nullptr};
}

// Milliseconds of one call of `launch` (which launches on the legacy default stream), the median of
// kRepeats after a warm-up.
template <class Launch>
double median_ms(Launch launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();
  finish("the warm-up run");
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r) {
    check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    finish("a timed run");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[kRepeats / 2];
}

void plugin_call(int32_t status, const char* error, const std::string& what) {
  if (status != 0) throw std::runtime_error(fmt::format("{}: {}", what, error));
}

std::vector<std::uint8_t> bytes_of(const void* device, std::uint64_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  check(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  return host;
}

}  // namespace

std::vector<Check> bandwidth_checks(const CheckContext& context) {
  std::vector<Check> checks;
  if (context.kernels_plugins.empty()) return checks;
  std::vector<Plugin> plugins;
  const lowbit_blockwise_bench* bench = nullptr;
  for (const std::string& path : context.kernels_plugins) {
    plugins.push_back(open_plugin(path));
    if (!bench) bench = plugins.back().bench;
  }
  if (!bench) throw std::runtime_error("no --kernels-plugin exports " LOWBIT_BLOCKWISE_BENCH_ENTRY " (cuda_blockwise_plugin.so does)");
  char error[512] = "";
  DeviceBuffer<float> input(kElements), copied(kElements), dequant(kElements);
  DeviceBuffer<std::uint8_t> codes(kElements), packed(kElements / 2);
  DeviceBuffer<float> scale(kElements / 16), qmap(256);
  plugin_call(bench->fill(input.get(), kElements, 1, error, sizeof error), error, "fill");
  finish("fill");

  const double copy_ms =
      median_ms([&] { plugin_call(bench->copy(input.get(), copied.get(), kElements, error, sizeof error), error, "copy"); });
  const double copy_gbs = 8.0 * kElements / copy_ms / 1e6;
  {
    Check c;
    c.name = "bandwidth.copy";
    c.passed = true;
    c.summary = fmt::format("plain copy of 2^28 float32: {:.3f} ms, {:.0f} GB/s (read + write)", copy_ms, copy_gbs);
    c.figures = {{"elements", kElements}, {"ms", copy_ms}, {"gb_per_s", copy_gbs}};
    checks.push_back(std::move(c));
  }

  const std::vector<float> head = [&] {
    std::vector<float> h(kChecked);
    check(cudaMemcpy(h.data(), input.get(), 4 * kChecked, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return h;
  }();
  std::vector<const lowbit_kernel*> kernels;
  for (const Plugin& plugin : plugins)
    for (std::uint32_t k = 0; k < plugin.table->kernel_count; ++k) kernels.push_back(&plugin.table->kernels[k]);
  for (const lowbit_kernel* each : kernels) {
    const lowbit_kernel& kernel = *each;
    const FormatSpec* format = find_format(kernel.format);
    if (!format) throw std::runtime_error(fmt::format("kernel {}: unknown format {}", kernel.name, kernel.format));
    const nlohmann::json params = format->default_params;
    const std::string params_text = params.dump();
    const std::uint64_t block = params.at("block_size").get<std::uint64_t>();
    const std::uint64_t blocks = kElements / block;
    const bool fp8 = std::string(kernel.format).find("fp8") != std::string::npos;  // E4M3 codes
    const bool four_bit = std::string(kernel.format).starts_with("torchao.codebook4");
    // the format's default table (its auxiliary input), as verify gives it
    std::vector<float> table;
    if (format->auxiliary_inputs)
      for (const Tensor& t : format->auxiliary_inputs(params))
        if (t.name == "qmap") table = t.f32();
    if (!table.empty()) check(cudaMemcpy(qmap.get(), table.data(), 4 * table.size(), cudaMemcpyHostToDevice), "cudaMemcpy to device");

    const std::int64_t n_shape[] = {static_cast<std::int64_t>(kElements)}, q_shape[] = {static_cast<std::int64_t>(table.size())},
                       s_shape[] = {static_cast<std::int64_t>(blocks)}, p_shape[] = {static_cast<std::int64_t>(kElements / 2)};
    std::vector<lowbit_tensor> in = {{"input", LOWBIT_F32, 1, n_shape, input.get(), 4 * kElements}};
    if (!table.empty()) in.push_back({"qmap", LOWBIT_F32, 1, q_shape, qmap.get(), 4 * table.size()});
    std::vector<lowbit_tensor> out = {{"codes", fp8 ? LOWBIT_F8_E4M3 : LOWBIT_U8, 1, n_shape, codes.get(), kElements},
                                      {"scale", LOWBIT_F32, 1, s_shape, scale.get(), 4 * blocks},
                                      {"dequant", LOWBIT_F32, 1, n_shape, dequant.get(), 4 * kElements}};
    if (four_bit) out.push_back({"codes_packed", LOWBIT_U8, 1, p_shape, packed.get(), kElements / 2});
    const double ms = median_ms([&] {
      plugin_call(kernel.run(in.data(), static_cast<int32_t>(in.size()), params_text.c_str(), out.data(),
                             static_cast<int32_t>(out.size()), error, sizeof error),
                  error, kernel.name);
    });
    const double bytes = 4.0 * kElements + 1.0 * kElements + 4.0 * kElements + 4.0 * blocks + (four_bit ? kElements / 2.0 : 0.0);
    const double gbs = bytes / ms / 1e6;

    // the first 2^20 elements against the reference
    Case head_case;
    head_case.add(Tensor::from_f32("input", {static_cast<std::int64_t>(kChecked)}, head));
    if (!table.empty()) head_case.add(Tensor::from_f32("qmap", {static_cast<std::int64_t>(table.size())}, table));
    std::uint64_t differ = 0;
    for (const Tensor& want : format->run(head_case, params, 1)) {
      const void* device = want.name == "codes" ? static_cast<const void*>(codes.get())
                           : want.name == "scale" ? static_cast<const void*>(scale.get())
                           : want.name == "dequant" ? static_cast<const void*>(dequant.get())
                                                    : static_cast<const void*>(packed.get());
      const std::vector<std::uint8_t> got = bytes_of(device, want.bytes.size());
      for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want.bytes[i];
    }
    Check c;
    c.name = fmt::format("bandwidth.{}", kernel.format);
    c.passed = differ == 0;
    c.summary = fmt::format("{} (block {}) on 2^28 float32: {:.3f} ms, {:.0f} GB/s, {:.1f} % of the copy (goal 85 %); first 2^20 "
                            "elements {}",
                            kernel.name, block, ms, gbs, 100.0 * gbs / copy_gbs,
                            differ == 0 ? "bit-exact" : fmt::format("NOT bit-exact ({} bytes differ)", differ));
    c.figures = {{"kernel", kernel.name}, {"params", params}, {"elements", kElements}, {"ms", ms}, {"bytes_moved", bytes},
                 {"gb_per_s", gbs}, {"fraction_of_copy", gbs / copy_gbs}, {"goal_met", gbs / copy_gbs >= 0.85},
                 {"checked_elements", kChecked}, {"differing_bytes", differ}};
    checks.push_back(std::move(c));
  }
  return checks;
}

}  // namespace lowbit::gpu
