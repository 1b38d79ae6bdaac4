// lowbit audit --trajectory: the problem and one variant's run (audit_trajectory.hpp).
#define EIGEN_DONT_PARALLELIZE  // one thread per product: the same bytes for any thread count
#include "lowbit/audit_trajectory.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "lowbit/audit.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/optimizer.hpp"

namespace lowbit::audit {

namespace {

std::string fmt_double(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// min_W 0.5 mean((X W - Y)^2), X 512x64 with column scales exp(z_j) (ill-conditioned), W 64x64
// (4096 parameters: torchao quantizes tensors of at least 4096 elements), Y = X W* + 0.01 noise.
struct LeastSquares {
  static constexpr int kRows = 512, kIn = 64, kOut = 64;
  Eigen::MatrixXf x, y;
};

LeastSquares make_problem(std::uint64_t seed) {
  const auto values = [&](std::size_t n, std::uint64_t s, double std) {
    return audit::make_input("normal:n=" + std::to_string(n) + ",seed=" + std::to_string(s) + ",std=" + fmt_double(std));
  };
  LeastSquares p;
  const auto xs = values(LeastSquares::kRows * LeastSquares::kIn, seed, 1.0);
  const auto cols = values(LeastSquares::kIn, seed + 1, 1.0);
  const auto w = values(LeastSquares::kIn * LeastSquares::kOut, seed + 2, 1.0);
  const auto noise = values(LeastSquares::kRows * LeastSquares::kOut, seed + 3, 0.01);
  p.x = Eigen::Map<const Eigen::MatrixXf>(xs.data(), LeastSquares::kRows, LeastSquares::kIn);
  for (int j = 0; j < LeastSquares::kIn; ++j) p.x.col(j) *= static_cast<float>(std::exp(cols[static_cast<std::size_t>(j)]));
  const Eigen::MatrixXf w_star = Eigen::Map<const Eigen::MatrixXf>(w.data(), LeastSquares::kIn, LeastSquares::kOut);
  p.y = p.x * w_star + Eigen::Map<const Eigen::MatrixXf>(noise.data(), LeastSquares::kRows, LeastSquares::kOut);
  return p;
}

// The loss (double) and the float32 gradient X^T (X W - Y) / (rows * out).
double loss_and_grad(const LeastSquares& p, const std::vector<float>& w, std::vector<float>& grad) {
  const Eigen::Map<const Eigen::MatrixXf> wm(w.data(), LeastSquares::kIn, LeastSquares::kOut);
  const Eigen::MatrixXf r = p.x * wm - p.y;
  const float inv = 1.0f / static_cast<float>(LeastSquares::kRows * LeastSquares::kOut);
  Eigen::Map<Eigen::MatrixXf>(grad.data(), LeastSquares::kIn, LeastSquares::kOut) = (p.x.transpose() * r) * inv;
  return 0.5 * r.cast<double>().squaredNorm() / static_cast<double>(LeastSquares::kRows * LeastSquares::kOut);
}

// One variant's run: the parameters and loss before step 1 and after every step.
std::vector<TrajectoryPoint> run_variant(const LeastSquares& p, const std::string& variant, int steps, double lr) {
  if (std::find(trajectory_variants().begin(), trajectory_variants().end(), variant) == trajectory_variants().end())
    throw std::invalid_argument("unknown trajectory variant '" + variant + "'");
  constexpr std::size_t n = LeastSquares::kIn * LeastSquares::kOut;
  std::vector<float> w(n, 0.0f), g(n);
  std::vector<TrajectoryPoint> out;
  optimizer::AdamHyper th;
  th.lr = static_cast<float>(lr);
  optimizer::TorchaoAdamOptions to;
  optimizer::Moment m, v;
  float torchao_step = 0;
  const auto codebook_state = [&](std::vector<float> qm, std::vector<float> qv, std::size_t block) {
    m = {std::vector<std::uint8_t>(n, 0), std::vector<float>(n / block, 0.0f), std::move(qm), {}};
    v = {std::vector<std::uint8_t>(n, 0), std::vector<float>(n / block, 0.0f), std::move(qv), {}};
  };
  if (variant == "fp32") {
    to.kind = optimizer::TorchaoState::Dense;
    m.values.assign(n, 0.0f);
    v.values.assign(n, 0.0f);
  } else if (variant == "torchao-8bit") {
    to.block_size = 256;
    codebook_state(codebook::signed8(), codebook::unsigned8(), 256);
  } else if (variant == "torchao-4bit") {
    to.block_size = 128;
    codebook_state(codebook::torchao_signed4(), codebook::torchao_unsigned4(), 128);
  } else if (variant == "torchao-fp8") {
    to.kind = optimizer::TorchaoState::Fp8;
    to.block_size = 256;
    codebook_state({}, {}, 256);
  } else if (variant == "bnb-8bit") {
    codebook_state(codebook::signed8(), codebook::unsigned8(), 256);
  }
  const bool coat_expand = variant == "coat-fp8-expand", coat = coat_expand || variant == "coat-fp8";
  coat::Moment cm = coat::fresh_moment(n, coat_expand), cv = coat::fresh_moment(n, coat_expand);
  coat::Hyper ch;
  ch.lr = static_cast<float>(lr);
  ch.weight_decay = 0.0f;
  optimizer::BnbAdamHyper bh;
  bh.lr = lr;
  for (int t = 0; t <= steps; ++t) {
    const double loss = loss_and_grad(p, w, g);
    out.push_back({loss, w});
    if (t == steps) break;
    if (coat) coat::adamw_step(w, g, t + 1, cm, cv, ch, coat_expand);
    else if (variant == "bnb-8bit") optimizer::bnb_adam_cpu_step(w, g, t + 1, m, v, bh, 256);
    else optimizer::torchao_adam_step(w, g, torchao_step, m, v, nullptr, th, to);
  }
  return out;
}

}  // namespace

const std::vector<std::string>& trajectory_variants() {
  static const std::vector<std::string> v = {"fp32", "torchao-8bit", "torchao-4bit", "torchao-fp8", "bnb-8bit",
                                             "coat-fp8", "coat-fp8-expand"};
  return v;
}

std::vector<TrajectoryPoint> run_trajectory_variant(std::uint64_t seed, const std::string& variant, int steps, double lr) {
  return run_variant(make_problem(seed), variant, steps, lr);
}

}  // namespace lowbit::audit
