// The marshalling of the GPU step that runs bitsandbytes' own 8-bit block-wise optimizer kernels
// (device/checks/bnb_optimizer_call.hpp): for each format, which case tensor goes to which pointer of
// c<rule>_8bit_blockwise_grad_fp32, which params are its scalars, the step, and the way back from
// the updated buffers to the case's outputs. The expected names and orders are written here from
// bitsandbytes 0.50.2 csrc/pythonInterface.cpp (MAKE_CBLOCKWISE8) and optim/*.py, and the expected
// values are the case's own tensors, compared bit for bit.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bnb_optimizer_call.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/formats.hpp"

using namespace lowbit;
using lowbit::gpu::BnbOptimizerCall;

namespace {

struct Expected {
  const char* format;
  const char* symbol;
  const char* beta1;  // the param that must arrive as beta1 (null: 0)
  const char* beta2;
  std::vector<std::string> state1_rows;
  const char* state2;
};

const std::vector<Expected> kExpected = {
    {"bnb.adam8bit.cuda", "cadam_8bit_blockwise_grad_fp32", "beta1", "beta2", {"exp_avg"}, "exp_avg_sq"},
    {"bnb.lion8bit.cuda", "clion_8bit_blockwise_grad_fp32", "beta1", "beta2", {"exp_avg"}, nullptr},
    {"bnb.momentum8bit.cuda", "cmomentum_8bit_blockwise_grad_fp32", "momentum", nullptr, {"momentum_buffer"}, nullptr},
    {"bnb.rmsprop8bit.cuda", "crmsprop_8bit_blockwise_grad_fp32", "alpha", nullptr, {"square_avg"}, nullptr},
    {"bnb.adagrad8bit.cuda", "cadagrad_8bit_blockwise_grad_fp32", nullptr, nullptr, {"sum"}, nullptr},
    {"bnb.ademamix8bit.cuda", "cademamix_8bit_blockwise_grad_fp32", "beta1", "beta2", {"exp_avg", "exp_avg_slow"}, "exp_avg_sq"},
};

// The reference's case of the given step (1-based) on a 512-element parameter (two blocks of 256).
Case case_at(const std::string& name, int step, nlohmann::json params = nullptr) {
  const FormatSpec* f = find_format(name);
  REQUIRE(f != nullptr);
  if (params.is_null()) params = f->default_params;
  Case out;
  int seen = 0;
  for_each_reference_case(
      *f, {"normal:n=512,seed=7,std=0.5", params}, step, {"test", "test"}, false,
      [&](const std::string&, const Case& c) {
        if (++seen == step) out = c;
      },
      [](const std::string&, const std::string&) {});
  REQUIRE(seen == step);
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool same_tensor(const Tensor& a, const Tensor& b) { return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes; }

float f32_param(const nlohmann::json& p, const char* key) { return key ? static_cast<float>(p.at(key).get<double>()) : 0.0f; }

}  // namespace

TEST_CASE("the six formats and nothing else have an entry point") {
  REQUIRE(gpu::bnb_optimizer_cuda_formats().size() == kExpected.size());
  for (std::size_t i = 0; i < kExpected.size(); ++i) {
    CHECK(gpu::bnb_optimizer_cuda_formats()[i] == kExpected[i].format);
    CHECK(gpu::bnb_optimizer_symbol(kExpected[i].format) == kExpected[i].symbol);
  }
  CHECK_THROWS_AS(gpu::bnb_optimizer_symbol("bnb.adam8bit.cpu"), std::invalid_argument);
}

TEST_CASE("each case tensor goes to its pointer, each param to its scalar") {
  for (const Expected& e : kExpected) {
    CAPTURE(e.format);
    const Case in = case_at(e.format, 3);  // step 3: a state that is not the fresh one (at step 2 AdEMAMix's two rows still share their codes)
    const nlohmann::json p = resolve_params(*find_format(e.format), in.params());
    const BnbOptimizerCall c = gpu::bnb_optimizer_call(e.format, in, p);
    CHECK(c.symbol == e.symbol);
    CHECK(same_bits(c.p, in.require("param").f32()));
    CHECK(same_bits(c.g, in.require("grad").f32()));
    CHECK(c.n == 512);
    CHECK(c.step == 3);
    std::vector<std::uint8_t> state1;
    std::vector<float> absmax1;
    for (const std::string& row : e.state1_rows) {
      const std::vector<std::uint8_t> codes = in.require(row + ".codes").u8();
      const std::vector<float> scale = in.require(row + ".scale").f32();
      state1.insert(state1.end(), codes.begin(), codes.end());
      absmax1.insert(absmax1.end(), scale.begin(), scale.end());
    }
    CHECK(same_bits(c.state1, state1));  // AdEMAMix: row 0 then row 1, as bitsandbytes' (2, n) state1
    CHECK(same_bits(c.absmax1, absmax1));
    CHECK(same_bits(c.quantiles1, in.require(e.state1_rows.front() + ".qmap").f32()));
    if (e.state2) {
      CHECK(same_bits(c.state2, in.require(std::string(e.state2) + ".codes").u8()));
      CHECK(same_bits(c.absmax2, in.require(std::string(e.state2) + ".scale").f32()));
      CHECK(same_bits(c.quantiles2, in.require(std::string(e.state2) + ".qmap").f32()));
    } else {
      CHECK((c.state2.empty() && c.absmax2.empty() && c.quantiles2.empty()));  // null pointers
    }
    CHECK(c.beta1 == f32_param(p, e.beta1));
    CHECK(c.beta2 == f32_param(p, e.beta2));
    CHECK(c.lr == f32_param(p, "lr"));
    CHECK(c.weight_decay == f32_param(p, "weight_decay"));
    CHECK(c.eps == (p.contains("eps") ? f32_param(p, "eps") : 0.0f));
    CHECK(c.gnorm_scale == 1.0f);
    CHECK_FALSE(c.skip_zeros);
    if (std::string(e.format) != "bnb.ademamix8bit.cuda") CHECK((c.alpha == 0.0f && c.beta3 == 0.0f));
  }
}

TEST_CASE("AdEMAMix's alpha and beta3: the params without schedulers, alpha_t with them") {
  const Case plain = case_at("bnb.ademamix8bit.cuda", 1);
  const BnbOptimizerCall c = gpu::bnb_optimizer_call("bnb.ademamix8bit.cuda", plain, resolve_params(*find_format("bnb.ademamix8bit.cuda"), plain.params()));
  CHECK(c.alpha == 5.0f);
  CHECK(c.beta3 == 0.9999f);
  nlohmann::json scheduled = find_format("bnb.ademamix8bit.cuda")->default_params;
  scheduled["t_alpha"] = 4;
  scheduled["t_beta3"] = 4;
  const Case s = case_at("bnb.ademamix8bit.cuda", 1, scheduled);
  const BnbOptimizerCall cs = gpu::bnb_optimizer_call("bnb.ademamix8bit.cuda", s, scheduled);
  CHECK(cs.alpha == 1.25f);  // min(step * alpha / t_alpha, alpha) = 1 * 5 / 4
  CHECK(cs.beta3 < 0.9999f);  // the scheduler starts beta3 low
}

TEST_CASE("the updated buffers become the case's outputs, each in its place") {
  for (const Expected& e : kExpected) {
    CAPTURE(e.format);
    const Case done = case_at(e.format, 3);
    const nlohmann::json p = resolve_params(*find_format(e.format), done.params());
    BnbOptimizerCall c = gpu::bnb_optimizer_call(e.format, done, p);
    // a library that computed what the reference did: its buffers hold the reference's outputs
    c.p = done.require("param.next").f32();
    c.state1.clear();
    c.absmax1.clear();
    for (const std::string& row : e.state1_rows) {
      const std::vector<std::uint8_t> codes = done.require(row + ".codes.next").u8();
      const std::vector<float> scale = done.require(row + ".scale.next").f32();
      c.state1.insert(c.state1.end(), codes.begin(), codes.end());
      c.absmax1.insert(c.absmax1.end(), scale.begin(), scale.end());
    }
    if (e.state2) {
      c.state2 = done.require(std::string(e.state2) + ".codes.next").u8();
      c.absmax2 = done.require(std::string(e.state2) + ".scale.next").f32();
    }
    const std::vector<Tensor> out = gpu::bnb_optimizer_outputs(c, done);
    CHECK(out.size() == 1 + 2 * (e.state1_rows.size() + (e.state2 ? 1 : 0)));
    for (const Tensor& t : out) {
      CAPTURE(t.name);
      CHECK(same_tensor(t, done.require(t.name)));
    }
    if (e.state1_rows.size() == 2) {
      // the rows swapped (a marshalling that put the slow moment first) must not pass
      std::rotate(c.state1.begin(), c.state1.begin() + 512, c.state1.end());
      std::rotate(c.absmax1.begin(), c.absmax1.begin() + 2, c.absmax1.end());
      const std::vector<Tensor> swapped = gpu::bnb_optimizer_outputs(c, done);
      bool differs = false;
      for (const Tensor& t : swapped) differs = differs || !same_tensor(t, done.require(t.name));
      CHECK(differs);
    }
  }
}

TEST_CASE("cases the entry point cannot take are refused, not passed on") {
  Case c = case_at("bnb.lion8bit.cuda", 1);
  const nlohmann::json p = find_format("bnb.lion8bit.cuda")->default_params;
  const std::int64_t zero = 0;
  c.add(Tensor::from_i64("step", {}, std::span(&zero, 1)));
  CHECK_THROWS_AS(gpu::bnb_optimizer_call("bnb.lion8bit.cuda", c, p), std::invalid_argument);
  const std::int64_t big = std::int64_t{1} << 31;
  c.add(Tensor::from_i64("step", {}, std::span(&big, 1)));
  CHECK_THROWS_AS(gpu::bnb_optimizer_call("bnb.lion8bit.cuda", c, p), std::invalid_argument);
  CHECK_THROWS_AS(gpu::bnb_optimizer_call("bnb.blockwise8.dynamic", c, p), std::invalid_argument);
  // AdEMAMix's two rows with different qmaps: bitsandbytes has one quantiles1
  Case a = case_at("bnb.ademamix8bit.cuda", 1);
  std::vector<float> q = a.require("exp_avg_slow.qmap").f32();
  q[3] = -q[3];
  a.add(Tensor::from_f32("exp_avg_slow.qmap", a.require("exp_avg_slow.qmap").shape, q));
  CHECK_THROWS_AS(gpu::bnb_optimizer_call("bnb.ademamix8bit.cuda", a, find_format("bnb.ademamix8bit.cuda")->default_params),
                  std::invalid_argument);
  Case missing = case_at("bnb.ademamix8bit.cuda", 1);
  missing.remove("exp_avg_sq.codes");
  CHECK_THROWS_AS(gpu::bnb_optimizer_call("bnb.ademamix8bit.cuda", missing, find_format("bnb.ademamix8bit.cuda")->default_params),
                  CaseError);
}
