// The marshalling of bnb_optimizer_call.hpp: which case tensor goes to which pointer of bitsandbytes'
// block-wise entry point, and which params are its scalars (bitsandbytes 0.50.2 csrc/pythonInterface.cpp
// MAKE_CBLOCKWISE8, optim/optimizer.py Optimizer1State/Optimizer2State.update_step, optim/ademamix.py).
#include "bnb_optimizer_call.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <stdexcept>

#include "lowbit/optimizer_bnb_rules.hpp"

namespace lowbit::gpu {

namespace {

struct Entry {
  const char* format;
  const char* symbol;
  const char* beta1;  // the param the optimizer passes as betas[0] (null: 0.0)
  const char* beta2;  // as betas[1]
  std::vector<std::string> state1_rows;
  const char* state2;  // null: a one-state rule
};

// SGD8bit passes (momentum, dampening 0), RMSprop8bit (alpha, momentum 0), Adagrad8bit (0, 0):
// our one-state formats carry only the param that reaches the kernel (docs/formats/bnb-cuda-rules.md).
const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"bnb.adam8bit.cuda", "cadam_8bit_blockwise_grad_fp32", "beta1", "beta2", {"exp_avg"}, "exp_avg_sq"},
      {"bnb.lion8bit.cuda", "clion_8bit_blockwise_grad_fp32", "beta1", "beta2", {"exp_avg"}, nullptr},
      {"bnb.momentum8bit.cuda", "cmomentum_8bit_blockwise_grad_fp32", "momentum", nullptr, {"momentum_buffer"}, nullptr},
      {"bnb.rmsprop8bit.cuda", "crmsprop_8bit_blockwise_grad_fp32", "alpha", nullptr, {"square_avg"}, nullptr},
      {"bnb.adagrad8bit.cuda", "cadagrad_8bit_blockwise_grad_fp32", nullptr, nullptr, {"sum"}, nullptr},
      {"bnb.ademamix8bit.cuda", "cademamix_8bit_blockwise_grad_fp32", "beta1", "beta2", {"exp_avg", "exp_avg_slow"},
       "exp_avg_sq"},
  };
  return e;
}

float param_f32(const nlohmann::json& p, const char* key) {
  if (!key || !p.contains(key)) return 0.0f;
  return static_cast<float>(p.at(key).get<double>());  // Python's float as ct.c_float
}

void append(std::vector<std::uint8_t>& to, const std::vector<std::uint8_t>& from) { to.insert(to.end(), from.begin(), from.end()); }
void append(std::vector<float>& to, const std::vector<float>& from) { to.insert(to.end(), from.begin(), from.end()); }

}  // namespace

const std::vector<std::string>& bnb_optimizer_cuda_formats() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& e : entries()) out.push_back(e.format);
    return out;
  }();
  return names;
}

namespace {

const Entry& entry_of(const std::string& format) {
  for (const Entry& e : entries())
    if (format == e.format) return e;
  throw std::invalid_argument(fmt::format("bnb_optimizer_call: no bitsandbytes entry point for format {}", format));
}

}  // namespace

std::string bnb_optimizer_symbol(const std::string& format) { return entry_of(format).symbol; }

BnbOptimizerCall bnb_optimizer_call(const std::string& format, const Case& in, const nlohmann::json& params) {
  const Entry* entry = &entry_of(format);
  BnbOptimizerCall c;
  c.symbol = entry->symbol;
  c.p = in.require("param").f32();
  c.g = in.require("grad").f32();
  if (c.p.size() > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(fmt::format("{}: {} elements: the entry point counts them in an int", in.origin, c.p.size()));
  c.n = static_cast<std::int32_t>(c.p.size());
  const std::vector<std::int64_t> step = in.require("step").i64();
  if (step.size() != 1 || step[0] < 1 || step[0] > INT32_MAX)
    throw std::invalid_argument(fmt::format("{}: step must be one int32 >= 1 (the entry point's int)", in.origin));
  c.step = static_cast<std::int32_t>(step[0]);
  c.state1_rows = entry->state1_rows;
  for (const std::string& row : entry->state1_rows) {
    append(c.state1, in.require(row + ".codes").u8());
    append(c.absmax1, in.require(row + ".scale").f32());
    const std::vector<float> q = in.require(row + ".qmap").f32();
    if (c.quantiles1.empty()) c.quantiles1 = q;
    else if (q.size() != c.quantiles1.size() || std::memcmp(q.data(), c.quantiles1.data(), q.size() * sizeof(float)) != 0)
      throw std::invalid_argument(fmt::format("{}: {}.qmap differs from {}.qmap: bitsandbytes passes one quantiles1 for both rows",
                                              in.origin, row, entry->state1_rows.front()));
  }
  if (entry->state2) {
    c.state2_name = entry->state2;
    c.state2 = in.require(c.state2_name + ".codes").u8();
    c.absmax2 = in.require(c.state2_name + ".scale").f32();
    c.quantiles2 = in.require(c.state2_name + ".qmap").f32();
  }
  c.beta1 = param_f32(params, entry->beta1);
  c.beta2 = param_f32(params, entry->beta2);
  c.eps = param_f32(params, "eps");
  c.lr = param_f32(params, "lr");
  c.weight_decay = param_f32(params, "weight_decay");
  if (format == "bnb.ademamix8bit.cuda") {
    // alpha and beta3 as AdEMAMix.update_step schedules them (in double, then float32)
    optimizer::BnbAdemamixHyper h;  // what the schedulers read: alpha, beta3, beta1 (beta3's), t_alpha, t_beta3
    h.alpha = params.at("alpha").get<double>();
    h.beta3 = params.at("beta3").get<double>();
    h.beta1 = params.at("beta1").get<double>();
    h.t_alpha = params.at("t_alpha").get<std::int64_t>();
    h.t_beta3 = params.at("t_beta3").get<std::int64_t>();
    const optimizer::BnbAdemamixScalars s = optimizer::bnb_ademamix_scalars(h, c.step);
    c.alpha = static_cast<float>(s.alpha_t);
    c.beta3 = static_cast<float>(s.beta3_t);
  }
  return c;
}

std::vector<Tensor> bnb_optimizer_outputs(const BnbOptimizerCall& call, const Case& in) {
  std::vector<Tensor> out = {Tensor::from_f32("param.next", in.require("param").shape, call.p)};
  const std::size_t n = call.p.size();
  std::size_t block_offset = 0;
  for (std::size_t r = 0; r < call.state1_rows.size(); ++r) {
    const std::string& row = call.state1_rows[r];
    const Tensor& codes = in.require(row + ".codes");
    const Tensor& scale = in.require(row + ".scale");
    const std::size_t blocks = scale.element_count();
    if (call.state1.size() < (r + 1) * n || call.absmax1.size() < block_offset + blocks)
      throw std::invalid_argument("bnb_optimizer_outputs: state1 or absmax1 is shorter than the case's rows");
    out.push_back(Tensor::from_bytes(row + ".codes.next", DType::U8, codes.shape,
                                     std::span(call.state1).subspan(r * n, n)));
    out.push_back(Tensor::from_f32(row + ".scale.next", scale.shape, std::span(call.absmax1).subspan(block_offset, blocks)));
    block_offset += blocks;
  }
  if (!call.state2_name.empty()) {
    out.push_back(Tensor::from_bytes(call.state2_name + ".codes.next", DType::U8, in.require(call.state2_name + ".codes").shape,
                                     call.state2));
    out.push_back(Tensor::from_f32(call.state2_name + ".scale.next", in.require(call.state2_name + ".scale").shape, call.absmax2));
  }
  return out;
}

}  // namespace lowbit::gpu
