// Bug class: coat.fake.symm's Q = x / scale rounded to the ExMy grid with ties to even (torch.round,
// COAT's torch fake quantizer) where the Triton kernel's libdevice.round rounds half away from zero;
// RQ = Q * scale follows. Random inputs almost never put x / scale on a midpoint: only the edges, whose
// blocks have a power-of-two scale so that x / scale is each midpoint exactly, show it.
#include <cmath>

#include "lowbit/coat_fake.hpp"
#include "lowbit/formats.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.fake.symm";
const char* const kBug = "coat-symm-ties-to-even";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  const fp8::FormatId f = fp8::format_from_param(params.at("fp8").get<std::string>(), "fp8");
  const Tensor& input = done.require("input");
  const std::vector<float> x = input.f32(), scale = done.require("scale").f32();
  std::vector<float> q = done.require("q").f32(), rq = done.require("rq").f32();
  const BlockMap blocks = block_map(done, "rq");
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = scale[blocks.block_of(i)], y = x[i] / s;
    // the torch quantizer's other rules (-0 to +0, NaN and Inf) are not this bug: only finite nonzero y
    if (!std::isfinite(y) || y == 0.0f || !std::isfinite(s)) continue;
    q[i] = coat_fake::floatexmy_torch(y, f);
    rq[i] = q[i] * s;
  }
  done.add(Tensor::from_f32("q", input.shape, q));
  done.add(Tensor::from_f32("rq", input.shape, rq));
}
}  // namespace mutant
