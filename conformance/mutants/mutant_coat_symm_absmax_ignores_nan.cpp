// Bug class: coat.fake.symm's block absmax skipping NaN (fmax) where torch.amax propagates it: a block
// with a NaN gets the finite scale of its other elements, so their q and rq are numbers where COAT's
// are NaN. The NaN element's own q stays its NaN (x / scale returns x's NaN either way).
#include <cmath>

#include "lowbit/formats.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.fake.symm";
const char* const kBug = "coat-symm-absmax-ignores-nan";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  using namespace lowbit;
  // the reference on the input with each NaN as 0 (a zero never raises an absmax): the block scales of
  // an absmax that skips NaN, and every element's q and rq but the NaNs'
  const Tensor& input = done.require("input");
  std::vector<float> x = input.f32();
  for (float& v : x)
    if (std::isnan(v)) v = 0.0f;
  Case masked = done;
  masked.add(Tensor::from_f32("input", input.shape, x));
  std::vector<float> rq, q, scale;
  for (const Tensor& t : find_format(kFormat)->run(masked, params, 1)) {
    if (t.name == "rq") rq = t.f32();
    if (t.name == "q") q = t.f32();
    if (t.name == "scale") scale = t.f32();
  }
  const std::vector<float> reference_q = done.require("q").f32();
  const BlockMap blocks = block_map(done, "rq");
  const std::vector<float> original = input.f32();
  for (std::size_t i = 0; i < original.size(); ++i)
    if (std::isnan(original[i])) {
      q[i] = reference_q[i];  // the NaN element's own NaN, as the reference's
      rq[i] = q[i] * scale[blocks.block_of(i)];
    }
  done.add(Tensor::from_f32("rq", input.shape, rq));
  done.add(Tensor::from_f32("q", input.shape, q));
  done.add(Tensor::from_f32("scale", done.require("scale").shape, scale));
}
}  // namespace mutant
