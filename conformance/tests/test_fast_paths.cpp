// The fast paths of the arithmetic library (vectorized, multi-threaded: fp8_cast.hpp, the *_into
// functions of blockwise.hpp) against the scalar definitions, byte for byte: codes and the bit
// patterns of scales and dequantized values. For every instruction set the CPU has
// (simd_level.hpp) and 1, 2, 3 and 7 threads, on
//   - every input of the 16-bit sources (bf16, f16) through the FP8 casts, every format and policy
//     (all 2^32 float32 inputs: the exhaustive sweep, test_fp8_sweep_f32, compares the fast cast too);
//   - the generated battery verify runs (edges, scaled-edges, special, normal, outliers, lognormal)
//     of each block-wise format, random bit patterns (NaN payloads, subnormals, infinities) and
//     ragged lengths (tails, fewer blocks than threads);
//   - the input of every golden case of the block-wise and FP8 cast formats.
// The mutants at the end show that the inputs separate the arithmetic variants a wrong fast path
// would have (ties, x / s against x * (1 / s)), so equality here is not vacuous.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fast_path_fixture.hpp"
#include "golden_fixture.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8_cast.hpp"
#include "lowbit/generators.hpp"
#include "lowbit/simd_level.hpp"

using namespace lowbit;
using namespace lowbit::test;  // fast_path_fixture.hpp: thread counts, levels, PinnedLevel, bits

namespace {

template <class T>
std::size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  return a.size();
}


// ---- the block-wise quantizers ---------------------------------------------------------------

struct Quantizer {
  std::string name;
  bool whole_blocks;  // torchao: x.size() a multiple of the block size
  std::function<void(std::span<const float>, std::size_t, std::span<std::uint8_t>, std::span<float>)> scalar;
  std::function<void(std::span<const float>, std::size_t, std::span<std::uint8_t>, std::span<float>, int)> fast;
};

std::vector<Quantizer> quantizers() {
  using namespace blockwise;
  static const std::vector<float> s8 = codebook::signed8(), u8 = codebook::unsigned8(),
                                  s4 = codebook::torchao_signed4(), u4 = codebook::torchao_unsigned4(),
                                  bnb_dyn = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true),
                                  bnb_lin = codebook::bnb_linear_map(true);
  std::vector<Quantizer> out;
  // init-captures ([q = q]): clang before 16 cannot capture a structured binding itself
  for (const auto& [name, q] : {std::pair{"signed8", &s8}, {"unsigned8", &u8}, {"signed4", &s4}, {"unsigned4", &u4}})
    out.push_back({std::string("torchao.codebook.") + name, true,
                   [q = q](auto x, auto bs, auto c, auto s) { scalar::torchao_quantize(x, *q, bs, c, s); },
                   [q = q](auto x, auto bs, auto c, auto s, int t) { torchao_quantize_into(x, *q, bs, c, s, t); }});
  for (const auto& [name, p] : {std::pair{"torch", fp8::torch_eager<fp8::E4M3FN>()},
                                {"torch-legacy", fp8::torch_eager_legacy<fp8::E4M3FN>()},
                                {"cuda-satfinite", fp8::cuda_satfinite()},
                                {"ml_dtypes", fp8::ml_dtypes<fp8::E4M3FN>()}})
    out.push_back({std::string("torchao.fp8.") + name, true,
                   [p = p](auto x, auto bs, auto c, auto s) { scalar::torchao_fp8_quantize(x, bs, p, c, s); },
                   [p = p](auto x, auto bs, auto c, auto s, int t) { torchao_fp8_quantize_into(x, bs, p, c, s, t); }});
  out.push_back({"fp8.perblock.e4m3", false, [](auto x, auto bs, auto c, auto s) { scalar::fp8_perblock_quantize(x, bs, c, s); },
                 [](auto x, auto bs, auto c, auto s, int t) { fp8_perblock_quantize_into(x, bs, c, s, t); }});
  for (const auto& [name, q] : {std::pair{"dynamic", &bnb_dyn}, {"linear", &bnb_lin}})
    for (const auto& [backend_name, backend] : {std::pair{"cpu", BnbBackend::CpuLut}, {"cuda-ieee", BnbBackend::CudaIeee},
                                                {"default", BnbBackend::Default}})
      for (bool vec : {true, false}) {
        if (!vec && backend != BnbBackend::Default) continue;
        out.push_back({std::string("bnb.") + name + "." + backend_name + (vec ? "" : ".scalar-max"), false,
                       [q = q, backend = backend, vec](auto x, auto bs, auto c, auto s) { scalar::bnb_quantize(x, *q, bs, backend, vec, c, s); },
                       [q = q, backend = backend, vec](auto x, auto bs, auto c, auto s, int t) {
                         bnb_quantize_into(x, *q, bs, backend, vec, c, s, t);
                       }});
      }
  return out;
}

// Thread counts, and torchao's search with its bucket table or without (blockwise.hpp
// search_table_min_elements: the other quantizers ignore it).
struct Run {
  int threads;
  bool search_table;
};
constexpr Run kRuns[] = {{1, false}, {2, false}, {3, false}, {7, false}, {1, true}, {3, true}};

// One input through every quantizer: fast (each level, each run) == scalar.
void check_quantizers(const std::string& what, std::span<const float> input, std::size_t block_size) {
  const std::size_t saved_threshold = blockwise::search_table_min_elements;
  for (const Quantizer& qz : quantizers()) {
    std::span<const float> x = input;
    if (qz.whole_blocks) x = x.first(x.size() / block_size * block_size);
    const std::size_t blocks = blockwise::block_count(x.size(), block_size);
    std::vector<std::uint8_t> want_codes(x.size());
    std::vector<float> want_scale(blocks);
    qz.scalar(x, block_size, want_codes, want_scale);
    for (simd::Level level : levels()) {
      PinnedLevel pin(level);
      for (const Run& run : kRuns) {
        blockwise::search_table_min_elements = run.search_table ? 0 : SIZE_MAX;
        std::vector<std::uint8_t> codes(x.size(), 0xA5);  // not zero: every code must be written
        std::vector<float> scale(blocks, -7.0f);
        qz.fast(x, block_size, codes, scale, run.threads);
        blockwise::search_table_min_elements = saved_threshold;
        const std::size_t dc = first_difference(codes, want_codes), ds = first_difference(scale, want_scale);
        INFO(what << ", " << qz.name << ", block " << block_size << ", " << x.size() << " elements, "
                  << simd::level_name(level) << ", " << run.threads << " threads"
                  << (run.search_table ? ", search table" : ""));
        if (dc < codes.size())
          FAIL_CHECK("code " << dc << ": fast " << int(codes[dc]) << ", scalar " << int(want_codes[dc]) << " (x bits " << bits(x[dc]) << ")");
        if (ds < scale.size())
          FAIL_CHECK("scale " << ds << ": fast " << bits(scale[ds]) << ", scalar " << bits(want_scale[ds]));
      }
    }
  }
}

// The dequantizers with a second definition (FP8 decoding), and the thread split of all of them.
void check_dequantizers(std::span<const float> x, std::size_t block_size) {
  using namespace blockwise;
  const std::size_t whole = x.size() / block_size * block_size;
  const Quantized t = torchao_fp8_quantize(x.first(whole), block_size, fp8::torch_eager<fp8::E4M3FN>());
  const Quantized p = fp8_perblock_quantize(x, block_size);
  const std::vector<float> q = codebook::signed8();
  const Quantized c = bnb_quantize(x, q, block_size, BnbBackend::CpuLut);
  for (NanWidening w : {NanWidening::Payload, NanWidening::Quiet})
    for (bool vectorized : {true, false}) {  // torch's CPU capability: whose NaN a NaN code times a NaN scale gives
      std::vector<float> want(whole), got(whole);
      scalar::torchao_fp8_dequantize(t.codes, t.scale, block_size, w, want, vectorized);
      for (int threads : kThreadCounts) {
        torchao_fp8_dequantize_into(t.codes, t.scale, block_size, w, got, threads, vectorized);
        CHECK(first_difference(got, want) == got.size());
      }
    }
  std::vector<float> want(x.size()), got(x.size());
  scalar::fp8_perblock_dequantize(p.codes, p.scale, block_size, want);
  for (int threads : kThreadCounts) {
    fp8_perblock_dequantize_into(p.codes, p.scale, block_size, got, threads);
    CHECK(first_difference(got, want) == got.size());
  }
  bnb_dequantize_into(c.codes, c.scale, q, block_size, want, 1);
  for (int threads : kThreadCounts) {
    bnb_dequantize_into(c.codes, c.scale, q, block_size, got, threads);
    CHECK(first_difference(got, want) == got.size());
  }
}

std::vector<float> random_patterns(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  for (float& v : out) {
    const auto u = static_cast<std::uint32_t>(rng());
    std::memcpy(&v, &u, 4);
  }
  return out;
}

}  // namespace

TEST_CASE("block-wise fast paths equal the scalar definitions on random bit patterns, ragged sizes") {
  const std::vector<float> x = random_patterns(100'003, 17);
  for (std::size_t block : {32, 64, 128, 256, 2048}) {
    check_quantizers("random bits", x, block);
    check_dequantizers(x, block);
  }
  // fewer blocks than threads, a lone partial block, nothing at all
  for (std::size_t n : {0, 1, 7, 255, 257, 1000}) {
    const std::vector<float> small(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    check_quantizers("small", small, 256);
    check_dequantizers(small, 256);
  }
  // blocks of one element: torchao's FP8 dequantize multiplies two same-shape tensors, whose NaN rule
  // places each element by its index among all of them (torch_cpu_mul.hpp), across the threads' ranges
  for (std::size_t n : {1, 7, 23, 255, 1000, 4099}) check_dequantizers(std::span<const float>(x).first(n), 1);
  // Normal data scaled into the FP8 subnormals and past the codebook's smallest entries
  std::vector<float> scaled = random_patterns(65'536, 3);
  std::mt19937_64 rng(5);
  for (float& v : scaled) v = static_cast<float>(standard_normal(rng) * 1e-3);
  check_quantizers("normal x 1e-3", scaled, 128);
}

TEST_CASE("block-wise fast paths equal the scalar definitions on verify's generated battery") {
  for (const char* format : {"torchao.codebook8.signed", "torchao.codebook4.signed", "torchao.fp8", "fp8.perblock.e4m3",
                             "bnb.blockwise8.dynamic", "bnb.blockwise8.linear"}) {
    const FormatSpec* f = find_format(format);
    REQUIRE(f != nullptr);
    const std::size_t block = f->default_params.at("block_size").get<std::size_t>();
    // verify's default battery (tools/lowbit/verify_command.cpp default_inputs), and small normal data
    std::vector<std::string> specs = {"special", "special:n=" + std::to_string(block), "normal:n=4096,seed=1",
                                      "outliers:n=4096,seed=2", "lognormal:n=4096,seed=3", "normal:n=65536,seed=4,std=1e-3"};
    if (f->edge_inputs) specs.insert(specs.begin(), {"edges", "scaled-edges"});
    for (const std::string& spec : specs) {
      const std::vector<float> x = generate_inputs(parse_input_spec(spec), *f, f->default_params);
      check_quantizers(std::string(format) + " " + spec, x, block);
      check_dequantizers(x, block);
    }
  }
}

TEST_CASE("block-wise fast paths equal the scalar definitions on every golden case's input") {
  int cases = 0;
  for (const char* glob : {"torchao.codebook*", "torchao.fp8", "bnb.blockwise8.*", "fp8.perblock*"})
    for (const ManifestEntry* e : test::golden_entries(glob)) {
      const Case c = test::golden_case(*e);
      const Tensor& input = c.require("input");  // F32, or bf16/f16 (bnb.blockwise8.*), widened exactly
      std::vector<float> x(input.element_count());
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = input.value_as_float(i);
      const std::size_t block = c.params().at("block_size").get<std::size_t>();
      check_quantizers(e->path, x, block);
      ++cases;
    }
  CHECK(cases >= 150);
}

TEST_CASE("FP8 casts: every bf16 and f16 input, every format and policy") {
  std::vector<std::uint16_t> all(1 << 16);
  for (std::size_t h = 0; h < all.size(); ++h) all[h] = static_cast<std::uint16_t>(h);
  for (fp8::FormatId format : fp8::kFormats)
    for (fp8::Overflow o : {fp8::Overflow::SatFinite, fp8::Overflow::NaN, fp8::Overflow::Inf})
      for (const char* nan : {"torch", "cuda", "ml_dtypes"}) {
        const fp8::Policy p{o, *fp8::parse_nan_encoding(nan, format)};
        std::vector<std::uint8_t> want_bf16(all.size()), want_f16(all.size()), got(all.size());
        fp8::scalar::encode_array_bf16(format, all, want_bf16, p);
        fp8::scalar::encode_array_f16(format, all, want_f16, p);
        for (simd::Level level : levels()) {
          PinnedLevel pin(level);
          for (int threads : kThreadCounts) {
            INFO(fp8::format_info(format).name << " " << fp8::overflow_name(o) << " " << nan << " "
                                               << simd::level_name(level) << " " << threads << " threads");
            fp8::encode_array_bf16(format, all, got, p, threads);
            CHECK(first_difference(got, want_bf16) == got.size());
            fp8::encode_array_f16(format, all, got, p, threads);
            CHECK(first_difference(got, want_f16) == got.size());
          }
        }
      }
}

TEST_CASE("FP8 casts of float32: random bit patterns, ragged sizes and every golden cast case") {
  std::vector<std::vector<float>> inputs = {random_patterns(1 << 20, 9), random_patterns(999, 10), {}};
  for (const char* glob : {"fp8.*"})
    for (const ManifestEntry* e : test::golden_entries(glob)) {
      const Case c = test::golden_case(*e);
      if (const Tensor* t = c.find("input"); t && t->dtype == DType::F32) inputs.push_back(t->f32());
    }
  CHECK(inputs.size() > 3);
  for (fp8::FormatId format : fp8::kFormats)
    for (fp8::Overflow o : {fp8::Overflow::SatFinite, fp8::Overflow::NaN, fp8::Overflow::Inf})
      for (const char* nan : {"torch", "cuda", "ml_dtypes"}) {
        const fp8::Policy p{o, *fp8::parse_nan_encoding(nan, format)};
        for (const std::vector<float>& x : inputs) {
          std::vector<std::uint8_t> want(x.size()), got(x.size());
          fp8::scalar::encode_array(format, x, want, p);
          for (simd::Level level : levels()) {
            PinnedLevel pin(level);
            for (int threads : kThreadCounts) {
              fp8::encode_array(format, x, got, p, threads);
              const std::size_t d = first_difference(got, want);
              INFO(fp8::format_info(format).name << " " << fp8::overflow_name(o) << " " << nan << " "
                                                 << simd::level_name(level) << " " << threads << " threads");
              if (d < got.size()) FAIL_CHECK("input " << bits(x[d]) << ": fast " << int(got[d]) << ", scalar " << int(want[d]));
            }
          }
        }
      }
}

// The benchmarks' floor (fp8_cast.hpp streaming_floor) runs the casts' loop and narrowing with no
// arithmetic: each output byte is its input's top byte, read here off the bits, so a narrowing that
// put bytes out of order (or a tail written short) shows on random patterns of every length.
TEST_CASE("the streaming floor writes each input's top byte, in order") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{33}, std::size_t{1000},
                        std::size_t{2 * 65536 + 77}}) {
    const std::vector<float> x = random_patterns(n, 11);
    std::vector<std::uint8_t> want(n), got(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, &x[i], 4);
      want[i] = static_cast<std::uint8_t>(u >> 24);
    }
    for (simd::Level level : levels()) {
      PinnedLevel pin(level);
      for (int threads : kThreadCounts) {
        INFO(n << " elements, " << simd::level_name(level) << ", " << threads << " threads");
        std::fill(got.begin(), got.end(), std::uint8_t{0});
        fp8::streaming_floor(x, got, threads);
        CHECK(first_difference(got, want) == n);
      }
    }
  }
  const std::vector<float> x(8, 1.0f);
  std::vector<std::uint8_t> short_out(7);
  CHECK_THROWS_AS(fp8::streaming_floor(x, short_out), std::invalid_argument);
}

// The dequantizers' floor (fp8_cast.hpp widening_floor): each output's bits are its input byte
// shifted to the top, computed here by the shift alone, so a widening that reads bytes out of
// order or writes a tail short shows on random bytes of every length.
TEST_CASE("the widening floor writes each input byte as a float32's top byte, in order") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{9}, std::size_t{1000},
                        std::size_t{2 * 65536 + 77}}) {
    const std::vector<float> patterns = random_patterns(n, 12);
    std::vector<std::uint8_t> in(n);
    std::vector<std::uint32_t> want(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, &patterns[i], 4);
      in[i] = static_cast<std::uint8_t>(u);
      want[i] = std::uint32_t{in[i]} << 24;
    }
    for (simd::Level level : levels()) {
      PinnedLevel pin(level);
      for (int threads : kThreadCounts) {
        INFO(n << " elements, " << simd::level_name(level) << ", " << threads << " threads");
        std::vector<float> got(n, 1.0f);
        fp8::widening_floor(in, got, threads);
        std::vector<std::uint32_t> bits(n);
        if (n) std::memcpy(bits.data(), got.data(), n * 4);
        CHECK(first_difference(bits, want) == n);
      }
    }
  }
  const std::vector<std::uint8_t> in(8, 1);
  std::vector<float> short_out(7);
  CHECK_THROWS_AS(fp8::widening_floor(in, short_out), std::invalid_argument);
}

TEST_CASE("the fast paths refuse outputs of the wrong size and a thread count below 1") {
  const std::vector<float> x(512, 1.0f), q = codebook::signed8();
  std::vector<std::uint8_t> codes(512);
  std::vector<float> scale(2), few(1);
  CHECK_THROWS_AS(blockwise::torchao_quantize_into(x, q, 256, codes, few), std::invalid_argument);
  CHECK_THROWS_AS(blockwise::torchao_quantize_into(x, q, 256, std::span(codes).first(511), scale), std::invalid_argument);
  CHECK_THROWS_AS(blockwise::torchao_quantize_into(x, q, 256, codes, scale, 0), std::invalid_argument);
  CHECK_THROWS_AS(fp8::encode_array(fp8::FormatId::E4M3FN, x, std::span(codes).first(3), fp8::cuda_satfinite()),
                  std::invalid_argument);
  CHECK_NOTHROW(blockwise::torchao_quantize_into(x, q, 256, codes, scale, 3));
}

// Mutants: arithmetic variants a wrong fast path could have. Each must give other bytes than the
// scalar definition on the inputs above, or the equality tests could not see it.
TEST_CASE("mutants: the battery separates the variants a wrong fast path would have") {
  const FormatSpec* f = find_format("torchao.codebook8.signed");
  REQUIRE(f != nullptr);
  const std::vector<float> edges = generate_inputs(parse_input_spec("scaled-edges"), *f, f->default_params);
  const std::vector<float> q = codebook::signed8();
  const std::size_t block = 256, whole = edges.size() / block * block;
  const std::span<const float> x = std::span(edges).first(whole);
  std::vector<std::uint8_t> want(whole), mutant(whole);
  std::vector<float> scale(whole / block);
  blockwise::scalar::torchao_quantize(x, q, block, want, scale);
  // x * (1 / s) instead of x / s
  for (std::size_t i = 0; i < whole; ++i) mutant[i] = codebook::torchao_search(x[i] * (1.0f / scale[i / block]), q);
  CHECK(first_difference(mutant, want) < whole);
  // ties away from zero instead of to even: every midpoint of neighbouring E4M3 values
  std::vector<float> r;
  for (int c = 0; c < fp8::E4M3FN::max_finite; ++c)
    r.push_back((fp8::decode<fp8::E4M3FN>(static_cast<std::uint8_t>(c)) + fp8::decode<fp8::E4M3FN>(static_cast<std::uint8_t>(c + 1))) / 2);
  std::vector<std::uint8_t> even(r.size()), away(r.size());
  fp8::scalar::encode_array(fp8::FormatId::E4M3FN, r, even, fp8::cuda_satfinite());
  for (std::size_t i = 0; i < r.size(); ++i)
    away[i] = fp8::detail::encode_with<fp8::E4M3FN>(r[i], fp8::cuda_satfinite(), [](const fp8::detail::Truncated& t) {
      return t.shift < 64 && t.rem >= (std::uint64_t{1} << (t.shift - 1));
    });
  std::vector<std::uint8_t> fast(r.size());
  fp8::encode_array(fp8::FormatId::E4M3FN, r, fast, fp8::cuda_satfinite());
  CHECK(first_difference(fast, even) == r.size());
  CHECK(first_difference(away, even) < r.size());
}

// The registry's runs (conform, verify, golden generate) pass their thread count to the fast paths:
// every registered format's outputs on a case large enough to use them (2^17 elements: worth_threads)
// are the same bytes with 1 and 3 threads, inputs made with as many.
TEST_CASE("run_reference: every format's case is the same bytes with 1 and 3 threads") {
  const MadeBy made_by{"lowbit test", "test_fast_paths"};
  std::size_t compared = 0;
  for (const FormatSpec& f : registered_formats()) {
    if (!takes_input(f)) continue;
    CAPTURE(f.name);
    std::vector<std::vector<std::uint8_t>> made[2];
    for (int k = 0; k < 2; ++k)
      for_each_reference_case(
          f, {"normal:n=131072,seed=7,std=0.5", f.default_params}, 1, made_by, true,
          [&](const std::string&, const Case& c) { made[k].push_back(serialize_case(c)); },
          [](const std::string&, const std::string&) {}, k == 0 ? 1 : 3);
    CHECK(made[0].size() == made[1].size());
    for (std::size_t i = 0; i < made[0].size() && i < made[1].size(); ++i) CHECK(made[0][i] == made[1][i]);
    compared += made[0].size();
  }
  CHECK(compared >= 15);  // the block-wise formats, the casts, the optimizers (COAT's 2-D activations skip this input)
}
