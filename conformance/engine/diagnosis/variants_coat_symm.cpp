// The variants of coat.fake.symm's rounding: Q = x / scale rounded to the ExMy grid with ties to even
// (torch.round: COAT's torch fake quantizer, FloatPointQuantizeTorch.py) where the Triton kernel it
// runs rounds half away from zero (libdevice.round), RQ = Q * scale after it. Each block's scale is
// the case's own; only a finite nonzero x / scale is rounded otherwise (the torch quantizer's other
// rules, -0 to +0 and its NaN, are not the tie rule).
#include <cmath>

#include "lowbit/coat_fake.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

void add_coat_symm_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  if (f.name != "coat.fake.symm") return;
  out.push_back({"ties-even",
                 "the reference with Q rounded to the grid with ties to even (torch.round, COAT's torch fake quantizer) "
                 "where COAT's Triton kernel rounds half away from zero",
                 [](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const fp8::FormatId id = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
                   const Tensor& input = e.require("input");
                   if (input.dtype != DType::F32) return std::nullopt;
                   const std::vector<float> x = input.f32(), scale = e.require("scale").f32();
                   std::vector<float> q = e.require("q").f32(), rq = e.require("rq").f32();
                   const BlockMap blocks = block_map(e, "rq");
                   if (scale.size() != blocks.blocks || q.size() != x.size()) return std::nullopt;
                   for (std::size_t i = 0; i < x.size(); ++i) {
                     const float s = scale[blocks.block_of(i)];
                     const float y = x[i] / s;
                     if (std::isfinite(s) && std::isfinite(y) && y != 0.0f) {
                       q[i] = coat_fake::floatexmy_torch(y, id);
                       rq[i] = q[i] * s;
                     }
                   }
                   return with_outputs(e, {Tensor::from_f32("rq", input.shape, rq), Tensor::from_f32("q", input.shape, q)});
                 }});
}

}  // namespace lowbit::diagnosis
