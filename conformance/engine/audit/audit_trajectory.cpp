// lowbit audit --trajectory: the problem and one optimizer format's run (audit_trajectory.hpp).
#define EIGEN_DONT_PARALLELIZE  // one thread per product: the same bytes for any thread count
#include "lowbit/audit_trajectory.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "lowbit/generators.hpp"

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
    return generate_inputs(
        parse_input_spec("normal:n=" + std::to_string(n) + ",seed=" + std::to_string(s) + ",std=" + fmt_double(std)),
        FormatSpec{}, nlohmann::json::object());
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

// The format's params for the study: its defaults with lr and no weight decay (the fresh state
// carries lr where the format keeps it as a tensor, as torchao does).
nlohmann::json study_params(const FormatSpec& f, double lr) {
  nlohmann::json given = nlohmann::json::object();
  if (f.default_params.contains("lr")) given["lr"] = lr;
  if (f.default_params.contains("weight_decay")) given["weight_decay"] = 0.0;
  return resolve_params(f, given);
}

// One format's run: the parameters and loss before step 1 and after every step, each step one case
// through the format's reference (run), the next state from its ".next" outputs.
std::vector<TrajectoryPoint> run_format(const LeastSquares& p, const FormatSpec& f, int steps, double lr) {
  if (!f.fresh_state || !f.run) throw std::invalid_argument("format " + f.name + " is not an optimizer step");
  constexpr std::size_t n = LeastSquares::kIn * LeastSquares::kOut;
  const nlohmann::json params = study_params(f, lr);
  std::vector<float> w(n, 0.0f), g(n);
  Case state = f.fresh_state(w, params);
  const std::vector<std::int64_t> shape = state.require("param").shape;
  std::vector<TrajectoryPoint> out;
  for (int t = 0; t <= steps; ++t) {
    w = state.require("param").f32();
    const double loss = loss_and_grad(p, w, g);
    out.push_back({loss, w});
    if (t == steps) break;
    state.add(Tensor::from_f32("grad", shape, g));
    for (Tensor& next : f.run(state, params, 1)) state.add(std::move(next));
    state = advanced_state(state);
  }
  return out;
}

}  // namespace

std::vector<const FormatSpec*> trajectory_formats(const std::vector<std::string>& globs) {
  return select_formats(globs, [](const FormatSpec& f) { return f.fresh_state && f.run; });
}

std::vector<TrajectoryPoint> run_trajectory(std::uint64_t seed, const FormatSpec& optimizer, int steps, double lr) {
  return run_format(make_problem(seed), optimizer, steps, lr);
}

}  // namespace lowbit::audit
