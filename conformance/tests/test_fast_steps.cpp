// The fast optimizer steps (optimizer.hpp torchao_adam_step, bnb_adam_cpu_step: the block-wise fast
// paths, the vector element kernels, threads) against the scalar definitions (optimizer::scalar), byte
// for byte: the parameter's bits, the step counter, every code, the bits of every scale and of every
// dense state value. For every instruction set the CPU has (simd_level.hpp) and 1, 2, 3 and 7 threads,
// several steps in a row (each from the definition's state after the one before), on
//   - the inputs of every golden case of torchao's steps (8-bit, 4-bit, FP8, dense; bf16, stochastic
//     rounding, AMSGrad, the default CPU capability's unfused arithmetic) and bitsandbytes' CPU step;
//   - verify's generated battery for these formats (a parameter and fresh state, 3 steps);
//   - random bit patterns (NaN payloads, infinities, subnormals) in the parameter, the gradient, the
//     codes, the scales and the dense values, ragged sizes (dense fallback, partial bitsandbytes tail
//     blocks, fewer blocks than threads, several chunks per thread), every option; codebook states
//     with torchao's search table too.
// The scalar steps requantize with the block-wise scalar definitions (blockwise::scalar).
// The mutants at the end show that these inputs separate the variants a wrong fast step would have
// (the lerp unfused, x * (1 / sqrt_bc2) in the denominator), so equality here is not vacuous.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "formats_optimizer_io.hpp"  // the registry's readers of a step case (engine-private)
#include "fast_path_fixture.hpp"
#include "golden_fixture.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/simd_level.hpp"

using namespace lowbit;
using namespace lowbit::test;  // fast_path_fixture.hpp: thread counts, levels, PinnedLevel, bits
using optimizer::Moment;
using optimizer::TorchaoState;

namespace {


// The first difference of two arrays, bit for bit, as a message; empty when they are equal.
template <class T>
std::string difference(const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return what + ": " + std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if constexpr (std::is_same_v<T, float>) return what + "[" + std::to_string(i) + "]: fast " + bits(got[i]) + ", scalar " + bits(want[i]);
      else return what + "[" + std::to_string(i) + "]: fast " + std::to_string(got[i]) + ", scalar " + std::to_string(want[i]);
    }
  return {};
}

std::string moment_difference(const std::string& name, const Moment& got, const Moment& want) {
  for (const std::string& d : {difference(name + ".codes", got.codes, want.codes), difference(name + ".scale", got.scale, want.scale),
                               difference(name + ".values", got.values, want.values)})
    if (!d.empty()) return d;
  return {};
}

float from_bits(std::uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

std::vector<float> random_patterns(std::size_t n, std::mt19937_64& rng) {
  std::vector<float> out(n);
  for (float& v : out) {
    const auto u = static_cast<std::uint32_t>(rng());
    std::memcpy(&v, &u, 4);
  }
  return out;
}

std::vector<float> bf16_values(std::vector<float> x) {  // the bf16 values nearest (NaNs kept as NaNs)
  for (float& v : x) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u &= 0xFFFF0000u;
    std::memcpy(&v, &u, 4);
  }
  return x;
}

// ---- torchao -------------------------------------------------------------------------------------

struct TorchaoState_ {
  std::vector<float> param;
  float step = 0;
  Moment m, v;
  std::optional<Moment> v_max;
};

struct TorchaoProblem {
  std::string name;
  TorchaoState_ state;
  std::vector<std::vector<float>> grads;  // one per step
  optimizer::AdamHyper h;
  optimizer::TorchaoAdamOptions o;
  std::vector<std::int32_t> draws;  // stochastic rounding (empty: nearest even)
};

void torchao_step(TorchaoState_& s, const TorchaoProblem& p, const std::vector<float>& grad, bool fast, int threads,
                  const optimizer::AdamHyper& h) {
  optimizer::TorchaoAdamOptions o = p.o;
  o.stochastic_round_random = p.draws;
  o.threads = threads;
  Moment* v_max = s.v_max ? &*s.v_max : nullptr;
  if (fast) optimizer::torchao_adam_step(s.param, grad, s.step, s.m, s.v, v_max, h, o);
  else optimizer::scalar::torchao_adam_step(s.param, grad, s.step, s.m, s.v, v_max, h, o);
}

std::string torchao_difference(const TorchaoState_& got, const TorchaoState_& want) {
  std::vector<std::string> ds = {difference("param", got.param, want.param),
                                 difference("step", std::vector{got.step}, std::vector{want.step}),
                                 moment_difference("exp_avg", got.m, want.m), moment_difference("exp_avg_sq", got.v, want.v)};
  if (want.v_max) ds.push_back(moment_difference("max_exp_avg_sq", *got.v_max, *want.v_max));
  for (const std::string& d : ds)
    if (!d.empty()) return d;
  return {};
}

// Every step of the problem: fast (each level, each thread count) == scalar, from the scalar's state.
void check_torchao(const TorchaoProblem& p) {
  TorchaoState_ state = p.state;
  const std::size_t saved_threshold = blockwise::search_table_min_elements;
  for (std::size_t k = 0; k < p.grads.size(); ++k) {
    TorchaoState_ want = state;
    torchao_step(want, p, p.grads[k], false, 1, p.h);
    for (simd::Level level : levels()) {
      PinnedLevel pin(level);
      for (int threads : kThreadCounts)
        // torchao's search with its bucket table and without (blockwise.hpp search_table_min_elements)
        for (bool table : {false, true}) {
          if (table && (p.o.kind != TorchaoState::Codebook || threads == 2 || threads == 7)) continue;
          blockwise::search_table_min_elements = table ? 0 : SIZE_MAX;
          TorchaoState_ got = state;
          torchao_step(got, p, p.grads[k], true, threads, p.h);
          blockwise::search_table_min_elements = saved_threshold;
          const std::string d = torchao_difference(got, want);
          INFO(p.name << ", step " << k + 1 << " of " << p.grads.size() << ", " << got.param.size() << " elements, "
                      << simd::level_name(level) << ", " << threads << " threads" << (table ? ", search table" : ""));
          if (!d.empty()) FAIL_CHECK(d);
        }
    }
    state = std::move(want);
  }
}

// The Python floats both optimizers' hyperparameters share.
template <class Hyper>
void read_betas_eps_decay(const nlohmann::json& p, Hyper& h) {
  h.beta1 = p.at("beta1").get<double>();
  h.beta2 = p.at("beta2").get<double>();
  h.eps = p.at("eps").get<double>();
  h.weight_decay = p.at("weight_decay").get<double>();
}

TorchaoState kind_of(const std::string& format) {
  if (format == "torchao.adam.fp8") return TorchaoState::Fp8;
  if (format == "torchao.adam.dense") return TorchaoState::Dense;
  return TorchaoState::Codebook;
}

// A step case's inputs as the registry reads them (formats_optimizer_torchao.cpp).
TorchaoProblem torchao_problem(const std::string& name, const Case& c) {
  using namespace optimizer_io;
  const FormatSpec* f = find_format(c.format());
  REQUIRE(f != nullptr);
  const nlohmann::json p = resolve_params(*f, c.params());
  const TorchaoState kind = kind_of(c.format());
  TorchaoProblem t;
  t.name = name;
  t.h.lr = scalar(c, "lr");
  read_betas_eps_decay(p, t.h);
  t.h.adamw = p.at("adamw").get<bool>();
  t.h.fused = fused_on(p);
  t.o.kind = kind;
  if (kind != TorchaoState::Dense) t.o.block_size = p.at("block_size").get<std::size_t>();
  if (kind == TorchaoState::Fp8)
    t.o.fp8_policy = {*fp8::parse_overflow(p.at("overflow").get<std::string>()),
                      *fp8::parse_nan_encoding(p.at("nan_encoding").get<std::string>(), fp8::FormatId::E4M3FN)};
  t.o.param_dtype = c.require("param").dtype == DType::BF16 ? optimizer::ParamDtype::BFloat16 : optimizer::ParamDtype::Float32;
  if (p.at("bf16_stochastic_round").get<bool>()) t.draws = c.require("sr_random").i32();
  const auto state = [&](const std::string& moment) {
    if (kind != TorchaoState::Dense) return read_moment(c, moment, kind == TorchaoState::Fp8);
    Moment m;
    m.values = widened(c.require(moment));
    return m;
  };
  t.state.param = widened(c.require("param"));
  t.state.step = scalar(c, "step");
  t.state.m = state("exp_avg");
  t.state.v = state("exp_avg_sq");
  if (p.at("amsgrad").get<bool>()) t.state.v_max = state("max_exp_avg_sq");
  t.grads = {widened(c.require("grad"))};
  return t;
}

// ---- bitsandbytes ----------------------------------------------------------------------------------

struct BnbState {
  std::vector<float> param;
  Moment m, v;
};

struct BnbProblem {
  std::string name;
  BnbState state;
  std::int64_t step;  // of the first step; +1 per step
  std::vector<std::vector<float>> grads;
  optimizer::BnbAdamHyper h;
  std::size_t block_size = 256;
};

void check_bnb(const BnbProblem& p) {
  BnbState state = p.state;
  for (std::size_t k = 0; k < p.grads.size(); ++k) {
    const std::int64_t step = p.step + static_cast<std::int64_t>(k);
    BnbState want = state;
    optimizer::scalar::bnb_adam_cpu_step(want.param, p.grads[k], step, want.m, want.v, p.h, p.block_size);
    for (simd::Level level : levels()) {
      PinnedLevel pin(level);
      for (int threads : kThreadCounts) {
        BnbState got = state;
        optimizer::bnb_adam_cpu_step(got.param, p.grads[k], step, got.m, got.v, p.h, p.block_size, threads);
        INFO(p.name << ", step " << k + 1 << " of " << p.grads.size() << ", " << got.param.size() << " elements, "
                    << simd::level_name(level) << ", " << threads << " threads");
        for (const std::string& d : {difference("param", got.param, want.param), moment_difference("exp_avg", got.m, want.m),
                                     moment_difference("exp_avg_sq", got.v, want.v)})
          if (!d.empty()) FAIL_CHECK(d);
      }
    }
    state = std::move(want);
  }
}

BnbProblem bnb_problem(const std::string& name, const Case& c) {
  using namespace optimizer_io;
  const nlohmann::json p = resolve_params(*find_format(c.format()), c.params());
  BnbProblem b;
  b.name = name;
  b.h.lr = p.at("lr").get<double>();
  read_betas_eps_decay(p, b.h);
  b.h.fused = fused_on(p);
  b.block_size = p.at("block_size").get<std::size_t>();
  b.state.param = widened(c.require("param"));
  b.state.m = read_moment(c, "exp_avg", false);
  b.state.v = read_moment(c, "exp_avg_sq", false);
  b.step = c.require("step").i64().at(0);
  b.grads = {widened(c.require("grad"))};
  return b;
}

// A problem's input case, golden or generated, through the checker of its format.
void check_case(const std::string& name, const Case& c) {
  if (c.format() == "bnb.adam8bit.cpu") check_bnb(bnb_problem(name, c));
  else check_torchao(torchao_problem(name, c));
}

constexpr const char* kFormats[] = {"torchao.adam.codebook8", "torchao.adam.codebook4", "torchao.adam.fp8",
                                    "torchao.adam.dense", "bnb.adam8bit.cpu"};

// ---- random states ----------------------------------------------------------------------------------

// A quantized moment of n elements with random codes and scales: finite scales mostly, with NaN, Inf,
// zero and subnormal scales among them.
Moment random_moment(std::size_t n, std::size_t block, std::vector<float> qmap, std::mt19937_64& rng) {
  Moment m;
  m.qmap = std::move(qmap);
  const std::size_t codes = m.qmap.empty() ? 256 : m.qmap.size();
  m.codes.resize(n);
  for (std::uint8_t& c : m.codes) c = static_cast<std::uint8_t>(rng() % codes);
  m.scale.resize(n / block + (n % block != 0));
  for (float& s : m.scale) {
    switch (rng() % 8) {
      case 0: s = random_patterns(1, rng)[0]; break;  // any bits: NaN payloads, infinities, subnormals
      case 1: s = rng() % 2 ? 0.0f : -0.0f; break;
      case 2: s = from_bits(0x7FC00000u | static_cast<std::uint32_t>(rng() & 0x803FFFFFu)); break;  // a NaN
      default: s = std::ldexp(static_cast<float>(rng() % 1000 + 1), -static_cast<int>(rng() % 40) - 10);
    }
  }
  return m;
}

// Gradients, parameters and dense moments: ordinary values mixed with random bit patterns and, often
// enough that they meet in one element, NaNs of random payloads and signs, signed zeros and infinities
// (which NaN an operation returns when two meet, and std::max's choice between -0 and +0, are bytes too).
std::vector<float> mixed(std::size_t n, std::mt19937_64& rng, float scale) {
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.0f, scale);
  for (float& v : x) {
    const auto u = static_cast<std::uint32_t>(rng());
    switch (rng() % 12) {
      case 0: v = from_bits((u & 0x803FFFFFu) | 0x7F800001u | ((u >> 9) & 0x00400000u)); break;  // NaN, quiet or signalling
      case 1: v = from_bits(u & 0x80000000u); break;                                          // +-0
      case 2: v = from_bits((u & 0x80000000u) | 0x7F800000u); break;                          // +-Inf
      case 3: v = from_bits(u); break;
      default: v = normal(rng);
    }
  }
  return x;
}

}  // namespace

TEST_CASE("fast optimizer steps equal the scalar definitions on every golden step case's inputs") {
  int cases = 0;
  for (const char* format : kFormats)
    for (const ManifestEntry* e : test::golden_entries(format)) {
      check_case(e->path, test::golden_case(*e));
      ++cases;
    }
  CHECK(cases >= 50);
  MESSAGE(cases << " golden step cases");
}

TEST_CASE("fast optimizer steps equal the scalar definitions on verify's generated battery") {
  const MadeBy made_by{"test", "test_fast_steps"};
  int cases = 0;
  for (const char* format : kFormats) {
    const FormatSpec* f = find_format(format);
    REQUIRE(f != nullptr);
    for (const InputRun& run : default_input_runs(*f))
      for_each_reference_case(*f, run, 3, made_by, true,
                              [&](const std::string& stem, const Case& c) { check_case(std::string(format) + " " + stem, c); ++cases; },
                              [](const std::string&, const std::string&) {});
  }
  CHECK(cases >= 30);
  MESSAGE(cases << " generated step cases");
}

TEST_CASE("fast torchao steps equal the scalar definition on random bit patterns, every option, ragged sizes") {
  std::mt19937_64 rng(23);
  const std::vector<float> s8 = codebook::signed8(), u8 = codebook::unsigned8(), s4 = codebook::torchao_signed4(),
                           u4 = codebook::torchao_unsigned4();
  struct Layout {
    TorchaoState kind;
    std::size_t block, n;
  };
  // whole blocks of 8-bit, 4-bit and FP8 states (fewer blocks than threads among them); dense states of
  // any size (torchao's fallback: under 4096 elements or not a multiple of the block), with a tail lane
  const Layout layouts[] = {{TorchaoState::Codebook, 256, 8192}, {TorchaoState::Codebook, 128, 4096 + 128},
                            {TorchaoState::Codebook, 32, 64},    {TorchaoState::Fp8, 256, 4096},
                            {TorchaoState::Fp8, 32, 96},         {TorchaoState::Dense, 0, 4099},
                            {TorchaoState::Dense, 0, 16384 * 2 + 5}, {TorchaoState::Dense, 0, 7},
                            // more than one chunk per thread (optimizer_torchao.cpp kChunk: 8192 elements), a short last one
                            {TorchaoState::Codebook, 32, 8192 * 2 + 32 * 5}, {TorchaoState::Codebook, 128, 128 * 200},
                            {TorchaoState::Fp8, 4096, 4096 * 5}};
  int problems = 0;
  for (const Layout& l : layouts)
    for (bool bf16 : {false, true})
      for (bool stochastic : {false, true})
        for (bool amsgrad : {false, true})
          for (bool fused : {false, true}) {
            if (stochastic && !bf16) continue;
            if (!fused && (stochastic || amsgrad)) continue;  // fewer combinations: the unfused lerp alone
            const bool four = l.kind == TorchaoState::Codebook && l.block == 128;
            TorchaoProblem p;
            p.name = "random, kind " + std::to_string(static_cast<int>(l.kind)) + " block " + std::to_string(l.block) +
                     (bf16 ? ", bf16" : "") + (stochastic ? ", stochastic" : "") + (amsgrad ? ", amsgrad" : "") +
                     (fused ? "" : ", unfused");
            p.o.kind = l.kind;
            p.o.block_size = l.kind == TorchaoState::Dense ? 256 : l.block;
            p.o.param_dtype = bf16 ? optimizer::ParamDtype::BFloat16 : optimizer::ParamDtype::Float32;
            p.h.fused = fused;
            p.h.adamw = rng() % 2 == 0;
            p.h.weight_decay = 0.01;
            p.h.lr = 1e-2f;
            p.state.step = static_cast<float>(rng() % 5);
            p.state.param = mixed(l.n, rng, 1.0f);
            if (bf16) p.state.param = bf16_values(p.state.param);
            const auto moment = [&](bool is_signed) {
              if (l.kind == TorchaoState::Dense) {
                Moment m;
                m.values = mixed(l.n, rng, is_signed ? 1e-2f : 1e-4f);
                if (!is_signed)  // exp_avg_sq is >= 0 or NaN, but -0 stays (-0 against +0 in AMSGrad's maximum)
                  for (float& v : m.values) v = v == 0.0f ? v : std::abs(v);
                if (bf16) m.values = bf16_values(m.values);
                return m;
              }
              std::vector<float> q;
              if (l.kind == TorchaoState::Codebook) q = four ? (is_signed ? s4 : u4) : (is_signed ? s8 : u8);
              return random_moment(l.n, l.block, q, rng);
            };
            p.state.m = moment(true);
            p.state.v = moment(false);
            if (amsgrad) p.state.v_max = moment(false);
            for (int k = 0; k < 3; ++k) p.grads.push_back(bf16 ? bf16_values(mixed(l.n, rng, 1e-2f)) : mixed(l.n, rng, 1e-2f));
            if (stochastic)
              for (std::size_t i = 0; i < l.n; ++i) p.draws.push_back(static_cast<std::int32_t>(rng() % 65536));
            check_torchao(p);
            ++problems;
          }
  CHECK(problems >= 80);
}

TEST_CASE("fast bitsandbytes steps equal the scalar definition on random bit patterns, partial tail blocks") {
  std::mt19937_64 rng(29);
  const std::vector<float> dyn_signed = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true),
                           dyn_unsigned = codebook::dynamic_map(false, 7, 8, codebook::Linspace::Fma, true);
  int problems = 0;
  // (optimizer_bnb.cpp kChunk, 8192 elements: several chunks per thread, the last with the partial tail block)
  for (std::size_t n : {std::size_t{8192}, std::size_t{1000}, std::size_t{256 * 9 + 17}, std::size_t{5}, std::size_t{0},
                        std::size_t{8192 * 3 + 300}})
    for (bool fused : {true, false})
      for (double wd : {0.0, 0.01}) {
        BnbProblem p;
        p.name = "random, " + std::to_string(n) + " elements" + (fused ? "" : ", unfused") + (wd > 0 ? ", decay" : "");
        p.h.fused = fused;
        p.h.weight_decay = wd;
        p.h.lr = 1e-2;
        p.step = 1 + static_cast<std::int64_t>(rng() % 4);
        p.state.param = mixed(n, rng, 1.0f);
        p.state.m = random_moment(n, 256, dyn_signed, rng);
        p.state.v = random_moment(n, 256, dyn_unsigned, rng);
        for (int k = 0; k < 3; ++k) p.grads.push_back(mixed(n, rng, 1e-2f));
        check_bnb(p);
        ++problems;
      }
  CHECK(problems == 24);
}

TEST_CASE("fast steps refuse a thread count below 1 before they change anything") {
  std::vector<float> param(256, 1.0f), grad(256, 0.5f);
  Moment m, v;
  m.values = v.values = std::vector<float>(256, 0.0f);
  float step = 0;
  optimizer::TorchaoAdamOptions o;
  o.kind = TorchaoState::Dense;
  o.threads = 0;
  CHECK_THROWS_AS(optimizer::torchao_adam_step(param, grad, step, m, v, nullptr, {}, o), std::invalid_argument);
  CHECK(step == 0.0f);
  Moment bm, bv;
  bm.codes = bv.codes = std::vector<std::uint8_t>(256, 0);
  bm.scale = bv.scale = {0.0f};
  bm.qmap = bv.qmap = codebook::signed8();
  CHECK_THROWS_AS(optimizer::bnb_adam_cpu_step(param, grad, 1, bm, bv, {}, 256, 0), std::invalid_argument);
  CHECK(param[0] == 1.0f);
}

// ---- mutants -----------------------------------------------------------------------------------------
// Written out here on purpose (a copy of torchao_adam_element without AMSGrad, with one operation that
// can change): x * (1 / sqrt_bc2) where the definition divides; without the change it must give the
// definition's bytes. The parameter after one step, element by element.
namespace {
float denominator_variant_param(float p, float g, float m_old, float v_old, const optimizer::TorchaoAdamScalars& s,
                                bool reciprocal) {
  if (s.adamw) p = p - (s.lr * s.wd) * p;
  else g = g + s.wd * p;
  const float m = s.fused ? std::fma(s.w1, g - m_old, m_old) : m_old + s.w1 * (g - m_old);
  const float v = s.fused ? std::fma(s.w2, g * g - v_old, v_old) : v_old + s.w2 * (g * g - v_old);
  const float denom = (reciprocal ? std::sqrt(v) * (1.0f / s.sqrt_bc2) : std::sqrt(v) / s.sqrt_bc2) + s.eps;
  const float u = (s.lr * (m / s.bc1)) / denom;
  return std::isnan(u) ? u : p - u;  // torch's sub: a NaN u as it is, also over a NaN p
}
}  // namespace

TEST_CASE("mutants: the inputs separate an unfused lerp and a reciprocal denominator from the definition") {
  const MadeBy made_by{"test", "test_fast_steps"};
  int unfused_caught = 0, reciprocal_caught = 0, runs = 0;
  for (const char* format : {"torchao.adam.codebook8", "torchao.adam.fp8", "torchao.adam.dense"}) {
    const FormatSpec* f = find_format(format);
    for (const InputRun& run : default_input_runs(*f))
      for_each_reference_case(*f, run, 2, made_by, true, [&](const std::string&, const Case& c) {
        const TorchaoProblem p = torchao_problem("mutant", c);
        REQUIRE(p.h.fused);
        TorchaoState_ want = p.state, unfused = p.state;
        torchao_step(want, p, p.grads[0], false, 1, p.h);
        optimizer::AdamHyper h = p.h;
        h.fused = false;  // the fast path with its lerp unfused
        torchao_step(unfused, p, p.grads[0], true, 2, h);
        unfused_caught += !difference("param", unfused.param, want.param).empty();
        // x * (1 / sqrt_bc2): from the same dequantized moments the definition starts from
        const optimizer::TorchaoAdamScalars s = optimizer::torchao_adam_scalars(p.h, p.state.step + 1.0f);
        const std::vector<float> m_old = optimizer::dequantize(p.state.m, p.o.kind, p.o.block_size),
                                 v_old = optimizer::dequantize(p.state.v, p.o.kind, p.o.block_size);
        std::vector<float> right(p.state.param.size()), mutant(right.size());
        for (std::size_t i = 0; i < mutant.size(); ++i) {
          right[i] = denominator_variant_param(p.state.param[i], p.grads[0][i], m_old[i], v_old[i], s, false);
          mutant[i] = denominator_variant_param(p.state.param[i], p.grads[0][i], m_old[i], v_old[i], s, true);
        }
        CHECK(difference("param", right, want.param).empty());  // the copy divides as the definition does
        reciprocal_caught += !difference("param", mutant, want.param).empty();
        ++runs;
      }, [](const std::string&, const std::string&) {});
  }
  MESSAGE("unfused lerp caught in " << unfused_caught << " of " << runs << " steps, reciprocal denominator in "
                                    << reciprocal_caught);
  CHECK(runs >= 12);
  CHECK(unfused_caught >= runs / 2);
  CHECK(reciprocal_caught >= runs / 2);
}
