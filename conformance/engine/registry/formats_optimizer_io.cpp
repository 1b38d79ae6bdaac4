#include "formats_optimizer_io.hpp"

#include <cmath>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "lowbit/bf16_round.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"

namespace lowbit::optimizer_io {

Case bnb_fresh_state(std::span<const float> param, const std::vector<BnbStateName>& states) {
  const std::size_t n = param.size(), blocks = (n + 255) / 256;
  Case c;
  c.add(Tensor::from_f32("param", flat(n), param));
  c.add(Tensor::from_f32("grad", flat(n), std::vector<float>(n, 0.0f)));
  c.add(Tensor::from_i64("step", {}, std::vector<std::int64_t>{1}));
  const std::vector<std::uint8_t> zeros(n, 0);
  for (const BnbStateName& s : states) {
    c.add(Tensor::from_bytes(s.name + ".codes", DType::U8, flat(n), zeros));
    c.add(Tensor::from_f32(s.name + ".scale", flat(blocks), std::vector<float>(blocks, 0.0f)));
    c.add(Tensor::from_f32(s.name + ".qmap", flat(256), s.is_signed ? codebook::signed8() : codebook::unsigned8()));
  }
  return c;
}

float scalar(const Case& in, const std::string& name) {
  const std::vector<float> v = in.require(name).f32();
  if (v.size() != 1) throw CaseError(in.origin + ": tensor '" + name + "' must hold one value");
  return v[0];
}

optimizer::Moment read_moment(const Case& in, const std::string& prefix, bool fp8) {
  optimizer::Moment m;
  m.codes = in.require(prefix + ".codes").u8();
  m.scale = in.require(prefix + ".scale").f32();
  if (!fp8) m.qmap = in.require(prefix + ".qmap").f32();
  return m;
}

void write_moment(std::vector<Tensor>& out, const std::string& prefix, const optimizer::Moment& m, bool fp8) {
  out.push_back(Tensor::from_bytes(prefix + ".codes.next", fp8 ? DType::F8_E4M3 : DType::U8, flat(m.codes.size()), m.codes));
  out.push_back(Tensor::from_f32(prefix + ".scale.next", flat(m.scale.size()), m.scale));
}

bool fused_on(const nlohmann::json& params) {
  const std::string c = params.contains("cpu_capability") ? params.at("cpu_capability").get<std::string>() : "avx2";
  if (c == "avx2" || c == "avx512") return true;
  if (c == "default") return false;
  throw std::runtime_error("cpu_capability must be avx2, avx512 or default (got '" + c + "')");
}

optimizer::BnbAdamHyper bnb_adam_hyper(const nlohmann::json& p) {
  optimizer::BnbAdamHyper h;
  for (auto [key, field] : {std::pair{"lr", &h.lr}, {"beta1", &h.beta1}, {"beta2", &h.beta2}, {"eps", &h.eps},
                             {"weight_decay", &h.weight_decay}})
    *field = p.at(key).get<double>();
  h.fused = fused_on(p);
  return h;
}

optimizer::BnbRuleHyper bnb_rule_hyper(const nlohmann::json& p, const char* beta1, const char* beta2) {
  optimizer::BnbRuleHyper h;
  h.lr = p.at("lr").get<double>();
  h.beta1 = beta1 ? p.at(beta1).get<double>() : 0.0;
  h.beta2 = beta2 ? p.at(beta2).get<double>() : 0.0;
  h.eps = p.contains("eps") ? p.at("eps").get<double>() : 0.0;
  h.weight_decay = p.at("weight_decay").get<double>();
  h.fused = fused_on(p);
  return h;
}

optimizer::BnbAdemamixHyper bnb_ademamix_hyper(const nlohmann::json& p) {
  optimizer::BnbAdemamixHyper h;
  for (auto [key, field] : {std::pair{"lr", &h.lr}, {"beta1", &h.beta1}, {"beta2", &h.beta2}, {"beta3", &h.beta3},
                             {"alpha", &h.alpha}, {"eps", &h.eps}, {"weight_decay", &h.weight_decay}})
    *field = p.at(key).get<double>();
  for (auto [key, field] : {std::pair{"t_alpha", &h.t_alpha}, {"t_beta3", &h.t_beta3}}) *field = p.at(key).get<std::int64_t>();
  if (h.t_alpha < 0 || h.t_beta3 < 0) throw std::invalid_argument("t_alpha and t_beta3 must be >= 0 (0: no scheduler)");
  h.fused = fused_on(p);
  return h;
}

const BnbOneState* bnb_one_state(const std::string& format) {
  static const std::pair<const char*, BnbOneState> rules[] = {
      {"bnb.lion8bit.", {optimizer::BnbRule::Lion, "exp_avg", "beta1", "beta2"}},
      {"bnb.momentum8bit.", {optimizer::BnbRule::Momentum, "momentum_buffer", "momentum", nullptr}},
      {"bnb.rmsprop8bit.", {optimizer::BnbRule::Rmsprop, "square_avg", "alpha", nullptr}},
      {"bnb.adagrad8bit.", {optimizer::BnbRule::Adagrad, "sum", nullptr, nullptr}}};
  for (const auto& [prefix, rule] : rules)
    if (format == std::string(prefix) + "cpu" || format == std::string(prefix) + "cuda") return &rule;
  return nullptr;
}

namespace {

// torchao passes lr as a float32 tensor, so the step reads the case's lr tensor; a case whose params
// also name an lr (generated ones do) must hold that value, rounded to float32, in the tensor.
float lr_of(const Case& in) {
  const float lr = scalar(in, "lr");
  const nlohmann::json given = in.params();
  if (given.contains("lr") && (!given.at("lr").is_number() || static_cast<float>(given.at("lr").get<double>()) != lr))
    throw CaseError(in.origin + ": params 'lr' " + given.at("lr").dump() + " disagrees with tensor 'lr' (" +
                    nlohmann::json(lr).dump() + ")");
  return lr;
}

}  // namespace

optimizer::AdamHyper torchao_adam_hyper(const Case& in, const nlohmann::json& p) {
  optimizer::AdamHyper h;
  h.lr = lr_of(in);
  for (auto [key, field] : {std::pair{"beta1", &h.beta1}, {"beta2", &h.beta2}, {"eps", &h.eps},
                             {"weight_decay", &h.weight_decay}})
    *field = p.at(key).get<double>();
  h.adamw = p.at("adamw").get<bool>();
  h.fused = fused_on(p);
  return h;
}

float written(float p32, optimizer::ParamDtype dtype, bool vectorized, const std::vector<std::int32_t>& draws,
              std::size_t i) {
  if (!draws.empty()) return widen_bf16(bf16_stochastic_round(p32, draws[i], vectorized));
  if (dtype != optimizer::ParamDtype::BFloat16) return p32;
  return widen_bf16(vectorized ? bf16_round_nearest_even(p32) : bf16_round_nearest_even_c10(p32));
}

std::vector<float> widened(const Tensor& t) {
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    throw CaseError("tensor '" + t.name + "' must be F32, BF16 or F16, not " + std::string(dtype_name(t.dtype)));
  std::vector<float> out(t.element_count());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.value_as_float(i);
  return out;
}

Tensor narrowed(std::string name, const Tensor& like, const std::vector<float>& values) {
  if (like.dtype == DType::F32) return Tensor::from_f32(std::move(name), like.shape, values);
  std::vector<std::uint8_t> bytes(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint32_t upper = bits_of(values[i]) >> 16;  // the values hold bf16 exactly
    bytes[2 * i] = static_cast<std::uint8_t>(upper);
    bytes[2 * i + 1] = static_cast<std::uint8_t>(upper >> 8);
  }
  return Tensor::from_bytes(std::move(name), DType::BF16, like.shape, bytes);
}

int faithful_sqrt_other(float x) {
  const float r = std::sqrt(x);
  if (!std::isfinite(r) || r == 0.0f) return 0;
  const double square = static_cast<double>(r) * r;  // exact: 24 x 24 bits fit in a double
  if (square < x) return 1;                          // the exact root lies above r
  if (square > x) return -1;
  return 0;
}

bool both_reproduced(std::uint64_t expected_bits, std::uint64_t actual_bits, const std::vector<std::uint64_t>& candidates) {
  auto reproduced = [&](std::uint64_t bits) { return std::ranges::find(candidates, bits) != candidates.end(); };
  return reproduced(expected_bits) && reproduced(actual_bits);
}

}  // namespace lowbit::optimizer_io
