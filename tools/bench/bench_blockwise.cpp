// Timing of the reference's block-wise quantizers and dequantizers and its FP8 cast, each as the
// scalar definition (one thread) and as the fast path (vectorized, --threads), plus a plain
// streaming pass (read float32, write one byte per element: the memory-bound floor of a quantizer),
// on data read from a raw little-endian float32 file. One run of every operation per repetition,
// in a fixed order; every time is printed (the driver, tools/bench/bench_codebook.py, alternates this
// program with the peers and takes medians). Prints one JSON object; with --dump DIR, also writes
// the fast paths' codes there (DIR/NAME.u8, scales DIR/NAME.scale.f32) for the driver to compare
// with the peers' bytes. Exit 1 when fast and scalar bytes differ. --no-search-table: torchao's
// search without its bucket table; --simd: pin an instruction set.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/fp8_cast.hpp"
#include "lowbit/simd_level.hpp"

using namespace lowbit;

namespace {

double seconds(const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The floor: every element read once as float32 and one byte written, split like the fast paths.
void stream_copy(std::span<const float> x, std::span<std::uint8_t> out, int threads) {
  auto part = [&](std::size_t a, std::size_t b) {
    for (std::size_t i = a; i < b; ++i) {
      std::uint32_t u;
      std::memcpy(&u, &x[i], 4);
      out[i] = static_cast<std::uint8_t>(u >> 24);
    }
  };
  std::vector<std::thread> pool;
  const std::size_t n = x.size(), t = static_cast<std::size_t>(threads);
  for (std::size_t k = 1; k < t; ++k) pool.emplace_back(part, n * k / t, n * (k + 1) / t);
  part(0, n / t);
  for (auto& th : pool) th.join();
}

template <class T>
void dump(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

int usage() {
  std::cerr << "usage: bench_blockwise FILE.f32 [--threads N] [--repeats R] [--simd sse2|avx2] [--dump DIR] [--no-scalar] [--no-search-table]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) return usage();
  int threads = 1, repeats = 1;
  bool scalar_too = true;
  std::string dump_dir;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else if (a == "--dump" && i + 1 < argc) dump_dir = argv[++i];
    else if (a == "--no-scalar") scalar_too = false;
    else if (a == "--no-search-table") blockwise::search_table_min_elements = SIZE_MAX;
    else if (a == "--simd" && i + 1 < argc) {
      const std::string l = argv[++i];
      simd::set_level(l == "sse2" ? simd::Level::Sse2 : simd::Level::Avx2);
    } else return usage();
  }
  if (threads < 1 || repeats < 1) return usage();
  std::ifstream in(argv[1], std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0));
  in.seekg(0);
  std::vector<float> x(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  if (!in || x.empty() || x.size() % 256) {
    std::cerr << "bench_blockwise: cannot read " << argv[1] << " as a whole number of 256-element blocks of float32\n";
    return 2;
  }
  const std::size_t n = x.size();
  const auto s8 = codebook::signed8(), s4 = codebook::torchao_signed4();
  const auto bnb_map = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true);
  const fp8::Policy torch_e4m3 = fp8::torch_eager<fp8::E4M3FN>();

  // Outputs allocated and touched once: the timed calls write into them.
  struct Out {
    std::vector<std::uint8_t> codes;
    std::vector<float> scale;
  };
  auto make = [&](std::size_t block) { return Out{std::vector<std::uint8_t>(n, 1), std::vector<float>(n / block, 1.0f)}; };
  Out t8 = make(256), t4 = make(128), tf8 = make(256), bnb = make(256), cast = make(256), copy = make(256);
  Out t8s = make(256), t4s = make(128), tf8s = make(256), bnbs = make(256), casts = make(256);
  std::vector<float> deq(n, 1.0f);

  struct Op {
    std::string name;
    std::function<void()> fast, scalar;
  };
  const std::vector<Op> ops = {
      {"torchao8_quantize", [&] { blockwise::torchao_quantize_into(x, s8, 256, t8.codes, t8.scale, threads); },
       [&] { blockwise::scalar::torchao_quantize(x, s8, 256, t8s.codes, t8s.scale); }},
      {"torchao4_quantize", [&] { blockwise::torchao_quantize_into(x, s4, 128, t4.codes, t4.scale, threads); },
       [&] { blockwise::scalar::torchao_quantize(x, s4, 128, t4s.codes, t4s.scale); }},
      {"torchao_fp8_quantize", [&] { blockwise::torchao_fp8_quantize_into(x, 256, torch_e4m3, tf8.codes, tf8.scale, threads); },
       [&] { blockwise::scalar::torchao_fp8_quantize(x, 256, torch_e4m3, tf8s.codes, tf8s.scale); }},
      {"bnb_quantize",
       [&] { blockwise::bnb_quantize_into(x, bnb_map, 256, blockwise::BnbBackend::CpuLut, true, bnb.codes, bnb.scale, threads); },
       [&] { blockwise::scalar::bnb_quantize(x, bnb_map, 256, blockwise::BnbBackend::CpuLut, true, bnbs.codes, bnbs.scale); }},
      {"cast_e4m3fn", [&] { fp8::encode_array(fp8::FormatId::E4M3FN, x, cast.codes, torch_e4m3, threads); },
       [&] { fp8::scalar::encode_array(fp8::FormatId::E4M3FN, x, casts.codes, torch_e4m3); }},
      {"torchao8_dequantize", [&] { blockwise::torchao_dequantize_into(t8.codes, t8.scale, s8, 256, deq, threads); }, nullptr},
      {"torchao_fp8_dequantize",
       [&] { blockwise::torchao_fp8_dequantize_into(tf8.codes, tf8.scale, 256, fp8::NanWidening::Payload, deq, threads); },
       [&] { blockwise::scalar::torchao_fp8_dequantize(tf8.codes, tf8.scale, 256, fp8::NanWidening::Payload, deq); }},
      {"bnb_dequantize", [&] { blockwise::bnb_dequantize_into(bnb.codes, bnb.scale, bnb_map, 256, deq, threads); }, nullptr},
      {"stream_copy", [&] { stream_copy(x, copy.codes, threads); }, nullptr},
  };
  nlohmann::json j;
  j["elements"] = n;
  j["threads"] = threads;
  j["simd"] = std::string(simd::level_name(simd::active()));
  for (int r = 0; r < repeats; ++r)
    for (const Op& op : ops) {
      j["fast_s"][op.name].push_back(seconds(op.fast));
      if (scalar_too && op.scalar) j["scalar_s"][op.name].push_back(seconds(op.scalar));
    }
  bool same = true;
  if (scalar_too) {
    same = t8.codes == t8s.codes && t4.codes == t4s.codes && tf8.codes == tf8s.codes && bnb.codes == bnbs.codes &&
           cast.codes == casts.codes && std::memcmp(t8.scale.data(), t8s.scale.data(), t8.scale.size() * 4) == 0 &&
           std::memcmp(tf8.scale.data(), tf8s.scale.data(), tf8.scale.size() * 4) == 0 &&
           std::memcmp(bnb.scale.data(), bnbs.scale.data(), bnb.scale.size() * 4) == 0;
    j["fast_equals_scalar"] = same;
  }
  if (!dump_dir.empty()) {
    dump(dump_dir + "/torchao8.u8", t8.codes);
    dump(dump_dir + "/torchao8.scale.f32", t8.scale);
    dump(dump_dir + "/torchao4.u8", t4.codes);
    dump(dump_dir + "/torchao_fp8.u8", tf8.codes);
    dump(dump_dir + "/torchao_fp8.scale.f32", tf8.scale);
    dump(dump_dir + "/bnb.u8", bnb.codes);
    dump(dump_dir + "/bnb.scale.f32", bnb.scale);
    dump(dump_dir + "/cast_e4m3fn.u8", cast.codes);
  }
  std::cout << j.dump() << "\n";
  return same ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "bench_blockwise: " << e.what() << "\n";
  return 2;
}
