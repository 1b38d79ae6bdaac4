#pragma once
// For torchao.adam.codebook8 mutants: the step recomputed from the case's inputs with a changed
// element (the bug), around the reference's own pieces: its scalars, its dequantizer, its
// quantizer for the new moments and its write-back of the parameter (float32, or bf16 rounded to
// nearest even or stochastically with the case's draws). What the element returns is what the step
// keeps: the new parameter before the write-back and the unquantized new moments.
#include <cstdint>
#include <functional>

#include "lowbit/bf16_round.hpp"
#include "lowbit/blockwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/optimizer.hpp"

namespace mutant {

using TorchaoElement = std::function<lowbit::optimizer::AdamElement(
    float param, float grad, float m_old, float v_old, const lowbit::optimizer::TorchaoAdamScalars& s)>;

inline void restep_torchao_codebook(lowbit::Case& done, const nlohmann::json& params, const TorchaoElement& element) {
  using namespace lowbit;
  namespace opt = lowbit::optimizer;
  const auto block = params.at("block_size").get<std::size_t>();
  const Tensor& param_in = done.require("param");
  const bool bf16 = param_in.dtype == DType::BF16;
  auto widened = [&](const Tensor& t) {
    if (t.dtype != DType::BF16) return t.f32();
    std::vector<float> out;
    for (std::uint16_t h : t.u16()) out.push_back(widen_bf16(h));
    return out;
  };
  const std::vector<float> param = widened(param_in), grad = widened(done.require("grad"));
  const std::vector<std::int32_t> draws =
      params.at("bf16_stochastic_round").get<bool>() ? done.require("sr_random").i32() : std::vector<std::int32_t>{};
  opt::AdamHyper h;
  h.lr = done.require("lr").f32().at(0);
  h.beta1 = params.at("beta1").get<double>();
  h.beta2 = params.at("beta2").get<double>();
  h.eps = params.at("eps").get<double>();
  h.weight_decay = params.at("weight_decay").get<double>();
  h.adamw = params.at("adamw").get<bool>();
  const opt::TorchaoAdamScalars s = opt::torchao_adam_scalars(h, done.require("step").f32().at(0) + 1.0f);
  opt::Moment moments[2];
  std::vector<float> old[2], updated[2];
  const char* const names[2] = {"exp_avg", "exp_avg_sq"};
  for (int k = 0; k < 2; ++k) {
    const std::string name = names[k];
    moments[k] = {done.require(name + ".codes").u8(), done.require(name + ".scale").f32(),
                  done.require(name + ".qmap").f32(), {}};
    old[k] = opt::dequantize(moments[k], opt::TorchaoState::Codebook, block);
    updated[k].resize(param.size());
  }
  std::vector<std::uint8_t> param_bytes;
  std::vector<float> param_next(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const opt::AdamElement e = element(param[i], grad[i], old[0][i], old[1][i], s);
    updated[0][i] = e.exp_avg;
    updated[1][i] = e.exp_avg_sq;
    param_next[i] = e.param;
    if (bf16) {
      const std::uint16_t b = draws.empty() ? bf16_round_nearest_even(e.param) : bf16_stochastic_round(e.param, draws[i]);
      param_bytes.push_back(static_cast<std::uint8_t>(b & 0xFF));
      param_bytes.push_back(static_cast<std::uint8_t>(b >> 8));
    }
  }
  const std::vector<std::int64_t> shape = done.require("param.next").shape;
  done.add(bf16 ? Tensor::from_bytes("param.next", DType::BF16, shape, param_bytes)
                : Tensor::from_f32("param.next", shape, param_next));
  for (int k = 0; k < 2; ++k) {
    const std::string name = names[k];
    const blockwise::Quantized q = blockwise::torchao_quantize(updated[k], moments[k].qmap, block);
    const Tensor& codes = done.require(name + ".codes.next");
    const std::vector<std::int64_t> code_shape = codes.shape, scale_shape = done.require(name + ".scale.next").shape;
    const DType code_dtype = codes.dtype;
    done.add(Tensor::from_bytes(name + ".codes.next", code_dtype, code_shape, q.codes));
    done.add(Tensor::from_f32(name + ".scale.next", scale_shape, q.scale));
  }
}

}  // namespace mutant
