// The variants of COAT's FP8 AdamW launches (coat.optim.origin.e4m3, coat.optim.expand.e4m3). The
// expansion's: the reference's launch with the group minimum, k or centre formed otherwise
// (coat::ExpandRule; docs/formats/coat-optimizer.md names each departure). Both formats': a partial
// last group whose codes and statistics the kernel never wrote (a launch of n / 128 groups, rounded
// down), left as the harness's zeros.
#include <algorithm>
#include <string>

#include "../registry/coat_optimizer_run.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

// coat.optim.expand.e4m3: the reference's launch on the case's state with the expansion's minimum, k
// or centre formed otherwise; param.next and the moments' update stay the reference's.
void add_expand_variants(std::vector<KnownVariant>& out) {
  const auto rule = [&out](std::string name, std::string description, coat::ExpandRule r) {
    out.push_back({std::move(name), std::move(description), [r](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                     return with_outputs(e, run_coat_adamw(e, p, true, r));
                   }});
  };
  rule("centre-sqrt-of-product",
       "the reference with the group centre sqrt(A B) for sqrt(A) sqrt(B) (COAT's expansion kernel before 715c162)",
       {.floor_k = true, .centre_of_product = true});
  rule("k-not-floored",
       "the reference with k = log2f(100352) / log2f(A / B) as it comes, not floored to a multiple of 1/expand_min",
       {.floor_k = false, .centre_of_product = false});
  rule("min-exact",
       "the reference with the group minimum the smallest nonzero |x| (capped at 1e9), where COAT's shuffle tree misses "
       "what a zero hides",
       {.exact_min = true});
  rule("min-fill-flt-max",
       "the reference with FLT_MAX in the idle lanes of the block-level minimum, where COAT's 1e9 caps the minimum",
       {.fill_flt_max = true});
  rule("unit-ratio-k-one", "the reference with k = 1 for a group of one magnitude (R = 1), where COAT's k is +inf",
       {.unit_ratio_k_one = true});
  rule("log-ratio-as-difference", "the reference with log2f(R) computed as log2f(A) - log2f(B)", {.log_difference = true});
}

// The reference's outputs with the partial last group's codes and per-group statistics of both moments
// zero (every output of a moment but the parameter's); nullopt when the groups are whole.
std::optional<Case> tail_group_unwritten(const Case& e, bool expansion) {
  Case c = e;
  for (const std::string moment : {"exp_avg", "exp_avg_sq"}) {
    std::vector<std::uint8_t> codes = e.require(moment + ".codes.next").u8();
    const std::size_t whole = codes.size() / coat::kGroup * coat::kGroup;
    if (whole == codes.size()) return std::nullopt;
    std::fill(codes.begin() + static_cast<std::ptrdiff_t>(whole), codes.end(), std::uint8_t{0});
    const Tensor& old = e.require(moment + ".codes.next");
    c.add(Tensor::from_bytes(old.name, old.dtype, old.shape, codes));
    std::vector<std::string> stats = {".scale.next"};
    if (expansion) stats.insert(stats.end(), {".expand.next", ".centre.next"});
    for (const std::string& s : stats) {
      const Tensor& t = e.require(moment + s);
      std::vector<float> values = t.f32();
      if (values.empty()) return std::nullopt;
      values.back() = 0.0f;
      c.add(Tensor::from_f32(t.name, t.shape, values));
    }
  }
  return c;
}

}  // namespace

void add_coat_optimizer_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  const bool expansion = f.name == "coat.optim.expand.e4m3";
  if (!expansion && f.name != "coat.optim.origin.e4m3") return;
  if (expansion) add_expand_variants(out);
  out.push_back({"tail-group-not-written",
                 "the reference with a partial last group's codes and statistics left zero (groups = n / 128, rounded "
                 "down)",
                 [expansion](const Case& e, const nlohmann::json&) { return tail_group_unwritten(e, expansion); }});
}

}  // namespace lowbit::diagnosis
