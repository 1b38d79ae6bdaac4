// Timing of the reference's block-wise 8-bit quantize and dequantize (torchao and bitsandbytes CPU
// semantics) on data read from a raw little-endian float32 file, single-threaded, best of R runs.
// Driven by tools/bench/bench_codebook.py, which times torchao and bitsandbytes on the same data in
// the same run and reports ratios. Prints one JSON object.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"

using namespace lowbit;

namespace {

double best_seconds(int repeats, const std::function<void()>& work) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: bench_blockwise FILE.f32 BLOCK_SIZE REPEATS\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0));
  in.seekg(0);
  std::vector<float> x(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  const std::size_t block = std::stoul(argv[2]);
  const int repeats = std::stoi(argv[3]);
  if (!in || x.empty() || x.size() % block) {
    std::cerr << "bench_blockwise: cannot read " << argv[1] << " as whole blocks of float32\n";
    return 2;
  }
  const auto q = codebook::signed8();
  blockwise::Quantized ta, bn;
  std::vector<float> out;
  nlohmann::json j;
  j["elements"] = x.size();
  j["block_size"] = block;
  j["torchao_quantize_s"] = best_seconds(repeats, [&] { ta = blockwise::torchao_quantize(x, q, block); });
  j["torchao_dequantize_s"] = best_seconds(repeats, [&] { out = blockwise::torchao_dequantize(ta.codes, ta.scale, q, block); });
  j["bnb_cpu_quantize_s"] = best_seconds(repeats, [&] { bn = blockwise::bnb_quantize(x, q, block, blockwise::BnbBackend::CpuLut); });
  j["bnb_dequantize_s"] = best_seconds(repeats, [&] { out = blockwise::bnb_dequantize(bn.codes, bn.scale, q, block); });
  // checksums, so the work cannot be optimized away and the driver can check agreement
  std::uint64_t sum = 0;
  for (auto c : ta.codes) sum = sum * 31 + c;
  j["torchao_codes_hash"] = sum;
  sum = 0;
  for (auto c : bn.codes) sum = sum * 31 + c;
  j["bnb_codes_hash"] = sum;
  std::cout << j.dump() << "\n";
  return 0;
}
