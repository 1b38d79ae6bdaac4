// The variants of how COAT's group activation quantizers (coat.act.pergroup, coat.act.perblock) reduce
// a group or tile to its absmax and treat a zero one: a reduction started from 0 (a group of NaNs alone
// then gets the floor's scale where COAT's tl.max gives NaN), one that stops one element short, one
// over the first 16 elements whatever QB is (COAT's default group size hard-coded), and the zero group
// written as code 0x00 (fp8.perblock.e4m3's rule) where COAT divides and keeps -0.0's sign. Each is
// the reference run on the input with the elements the variant's reduction sees otherwise: an element
// it skips made NaN (which COAT's absmax ignores), the first of a NaN group made 0; those elements'
// codes are then made again from their own value and the variant's fp32 scale. The NaN slips (a group
// absmax that keeps NaN, one started from 0) apply to the per-tensor kernel's 1 x 16 groups
// (coat.act.pertensor.groupscale) and to both sides of the transposed one too, which reduce alike, as
// does a fold from the first |x| with > (a group led by a NaN keeps it). Per tensor, the tensor scale
// as a running maximum from the first group's scale (a NaN kept only from the first group).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "../registry/formats_optimizer_io.hpp"
#include "lowbit/coat_activation.hpp"
#include "lowbit/float_bits.hpp"
#include "variants.hpp"

namespace lowbit::diagnosis {

namespace {

// The codes and scale tensors a variant makes again: x's own (codes, scale), or x^T's (codes_t, scale_t
// of coat.act.pergroup.transposed, stored N x M: its element i is x[i % M][i / M]).
struct Side {
  const char* codes;
  const char* scale;
  bool transposed;
  const char* group_scale = nullptr;  // coat.act.pertensor.groupscale's per-group scales, made again too
  std::size_t input_of(std::size_t i, const Tensor& input) const {
    if (!transposed) return i;
    const auto m = static_cast<std::size_t>(input.shape[0]), n = static_cast<std::size_t>(input.shape[1]);
    return (i % m) * n + i / m;
  }
};
constexpr Side kRows{"codes", "scale", false}, kTransposed{"codes_t", "scale_t", true},
    kPerTensor{"codes", "scale", false, "group_scale"};

// A codes tensor's groups (row groups or tiles) and each element's place in its group in memory order.
struct Groups {
  BlockMap map;
  std::vector<std::size_t> place;  // of each element
  std::vector<std::size_t> size;   // of each group
};

Groups groups_of(const Case& e, const Side& side = kRows) {
  Groups g{block_map(e, side.codes), {}, {}};
  g.size.assign(g.map.blocks, 0);
  const std::size_t n = e.require(side.codes).bytes.size();
  g.place.resize(n);
  for (std::size_t i = 0; i < n; ++i) g.place[i] = g.size.at(g.map.block_of(i))++;
  return g;
}

// What a variant's reduction sees of element i of the side's codes (of value x): nullopt for x itself,
// else its stand-in.
using Seen = std::function<std::optional<float>(std::size_t i, float x)>;

// The reference on the input as the variant's reduction sees it: the side's scales are the variant's;
// the codes of the elements seen otherwise are made again from their own value and the variant's fp32
// S. The other side's outputs stay the reference's.
std::optional<Case> reduced_otherwise(const FormatSpec& f, const Case& e, const nlohmann::json& p, const Seen& seen,
                                      const Side& side = kRows) {
  const Tensor& input = e.require("input");
  if (input.shape.size() != 2 || e.require(side.codes).bytes.size() != input.element_count()) return std::nullopt;
  std::vector<float> x(input.element_count());
  for (std::size_t j = 0; j < x.size(); ++j) x[j] = input.value_as_float(j);
  std::vector<std::size_t> changed;  // in the side's codes
  for (std::size_t i = 0; i < x.size(); ++i)
    if (const std::optional<float> other = seen(i, input.value_as_float(side.input_of(i, input)))) {
      x[side.input_of(i, input)] = *other;
      changed.push_back(i);
    }
  if (changed.empty()) return std::nullopt;  // the reference's own reduction on this case
  Case as_seen = e;
  as_seen.add(Tensor::from_f32("input", input.shape, x));
  std::vector<Tensor> made;
  for (Tensor& t : f.run(as_seen, p, 1))
    if (t.name == side.codes || t.name == side.scale || (side.group_scale && t.name == side.group_scale))
      made.push_back(std::move(t));
  Case c = with_outputs(e, std::move(made));
  nlohmann::json f32 = p;
  f32["scale_dtype"] = "f32";
  std::vector<float> s;
  for (const Tensor& t : f.run(as_seen, f32, 1))  // (per tensor: bf16 whatever scale_dtype says, exact as a float)
    if (t.name == side.scale)
      for (std::size_t k = 0; k < t.element_count(); ++k) s.push_back(t.value_as_float(k));
  const BlockMap map = block_map(e, side.codes);
  if (s.size() != map.blocks) return std::nullopt;
  const fp8::FormatId id = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
  const auto casts = p.at("casts") == "gpu" ? coat_act::Casts::Gpu : coat_act::Casts::TritonInterpreter;
  const auto division = p.at("division") == "ieee" ? coat_act::Division::Ieee : coat_act::Division::DivFull;
  const Tensor& codes = c.require(side.codes);
  std::vector<std::uint8_t> bytes = codes.bytes;
  for (std::size_t i : changed)
    bytes[i] = coat_act::cast_fp8(coat_act::div(input.value_as_float(side.input_of(i, input)), s[map.block_of(i)], division),
                                  id, casts);
  c.add(Tensor::from_bytes(side.codes, codes.dtype, codes.shape, bytes));
  return c;
}

const float kSkipped = std::numeric_limits<float>::quiet_NaN();  // what COAT's absmax ignores

// A variant whose reduction of the side's groups skips the elements at the places skip(place in
// group, group size) gives.
decltype(KnownVariant::run) skipping(const FormatSpec* spec, std::function<bool(std::size_t place, std::size_t size)> skip,
                                     Side side = kRows) {
  return [spec, skip, side](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
    const Groups g = groups_of(e, side);
    return reduced_otherwise(
        *spec, e, p,
        [&](std::size_t i, float) -> std::optional<float> {
          if (!skip(g.place[i], g.size[g.map.block_of(i)])) return std::nullopt;
          return kSkipped;
        },
        side);
  };
}

// The groups an absmax is reduced over, of each element of the side's codes: the codes' own row groups
// or tiles, or (per tensor) the 1 x 16 groups along x's rows whose bf16 scales the tensor scale is the max of.
std::vector<std::size_t> reduction_groups(const Case& e, const Side& side) {
  const std::size_t n = e.require(side.codes).bytes.size();
  std::vector<std::size_t> group(n);
  const BlockMap map = block_map(e, side.codes);
  for (std::size_t i = 0; i < n; ++i) group[i] = side.group_scale ? i / 16 : map.block_of(i);
  return group;
}

// A variant of the reduction that sees the elements of some groups otherwise: seen_in(group's
// elements, place in the group) gives an element's stand-in, nullopt for x itself.
using GroupSeen = std::function<std::optional<float>(std::span<const float> group, std::size_t place)>;

// The side's reduction with each group seen as the variant sees it.
std::optional<Case> groups_seen(const FormatSpec& f, const Case& e, const nlohmann::json& p, const GroupSeen& seen,
                                const Side& side) {
  const Tensor& input = e.require("input");
  if (input.shape.size() != 2 || e.require(side.codes).bytes.size() != input.element_count()) return std::nullopt;
  const std::vector<std::size_t> group = reduction_groups(e, side);
  std::vector<std::vector<float>> values(*std::max_element(group.begin(), group.end()) + 1);
  std::vector<std::size_t> place(group.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    place[i] = values[group[i]].size();
    values[group[i]].push_back(input.value_as_float(side.input_of(i, input)));
  }
  return reduced_otherwise(f, e, p, [&](std::size_t i, float) { return seen(values[group[i]], place[i]); }, side);
}

// The variant on both of the transposed format's sides (its one reduction rule quantizes x and x^T):
// nullopt where neither side changes.
std::optional<Case> on_both_sides(const FormatSpec& f, const Case& e, const nlohmann::json& p, const GroupSeen& seen) {
  std::optional<Case> rows = groups_seen(f, e, p, seen, kRows);
  std::optional<Case> both = groups_seen(f, rows ? *rows : e, p, seen, kTransposed);
  return both ? both : rows;
}

bool has_nan(std::span<const float> group) {
  return std::any_of(group.begin(), group.end(), [](float v) { return std::isnan(v); });
}
bool all_nan(std::span<const float> group) {
  return std::all_of(group.begin(), group.end(), [](float v) { return std::isnan(v); });
}
// torch.amax's rule: a group holding a NaN reduces to NaN, as COAT's tl.max gives a group of NaNs alone
std::optional<float> keeping_nan(std::span<const float> group, std::size_t) {
  if (!has_nan(group)) return std::nullopt;
  return kSkipped;
}
// a loop bound one short: the group's last element skipped
std::optional<float> missing_last(std::span<const float> group, std::size_t place) {
  if (place + 1 != group.size()) return std::nullopt;
  return kSkipped;
}
// a reduction started from 0: a group of NaNs alone reduces to 0, as one whose first element is 0
std::optional<float> from_zero(std::span<const float> group, std::size_t place) {
  if (place != 0 || !all_nan(group)) return std::nullopt;
  return 0.0f;
}

// a reduction folded from the first |x| with a > comparison: a group led by a NaN keeps it (no number
// compares greater), one led by a number skips its NaNs as COAT's tl.max does
std::optional<float> led_by_nan(std::span<const float> group, std::size_t) {
  if (group.empty() || !std::isnan(group.front())) return std::nullopt;
  return kSkipped;
}

// coat.act.pertensor.groupscale with the tensor scale folded from the first group's bf16 scale with a >
// comparison, so that a NaN group scale is kept only when it is the first, where torch.max propagates
// any; the codes divided by that scale. nullopt where the fold gives the reference's scale.
std::optional<Case> tensor_max_from_first_group(const Case& e, const nlohmann::json& p) {
  const Tensor& input = e.require("input");
  const Tensor& groups = e.require("group_scale");
  const Tensor& scale = e.require("scale");
  const Tensor& codes = e.require("codes");
  if (groups.element_count() == 0 || scale.element_count() != 1 || codes.bytes.size() != input.element_count())
    return std::nullopt;
  float s = groups.value_as_float(0);
  for (std::size_t g = 1; g < groups.element_count(); ++g)
    if (groups.value_as_float(g) > s) s = groups.value_as_float(g);
  if (bits_of(s) == bits_of(scale.value_as_float(0)) || (std::isnan(s) && std::isnan(scale.value_as_float(0))))
    return std::nullopt;
  const fp8::FormatId id = fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8");
  const auto casts = p.at("casts") == "gpu" ? coat_act::Casts::Gpu : coat_act::Casts::TritonInterpreter;
  const auto division = p.at("division") == "ieee" ? coat_act::Division::Ieee : coat_act::Division::DivFull;
  std::vector<std::uint8_t> bytes(codes.bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = coat_act::cast_fp8(coat_act::div(input.value_as_float(i), s, division), id, casts);
  Case c = e;
  c.add(Tensor::from_bytes("codes", codes.dtype, codes.shape, bytes));
  c.add(optimizer_io::narrowed("scale", scale, {s}));  // a group's bf16 scale: exact
  return c;
}

// fp8.perblock.e4m3's rule for a zero block on the side's groups: every code of a group whose absmax (COAT's
// tl.max) is 0 written 0x00; nullopt where no group is zero.
std::optional<Case> zero_groups_coded_zero(const Case& e, const Side& side) {
  const Groups g = groups_of(e, side);
  const Tensor& input = e.require("input");
  const Tensor& old = e.require(side.codes);
  std::vector<float> amax(g.map.blocks, kSkipped);
  for (std::size_t i = 0; i < old.bytes.size(); ++i)
    amax[g.map.block_of(i)] = coat_act::absmax_step(amax[g.map.block_of(i)], input.value_as_float(side.input_of(i, input)));
  std::vector<std::uint8_t> codes = old.bytes;
  bool any = false;
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (amax[g.map.block_of(i)] == 0.0f) {
      codes[i] = 0;
      any = true;
    }
  if (!any) return std::nullopt;
  Case c = e;
  c.add(Tensor::from_bytes(side.codes, old.dtype, old.shape, codes));
  return c;
}
const char* const zero_group_description =
    "the reference with every code of a group whose absmax is 0 written 0x00 (fp8.perblock.e4m3's rule for a zero "
    "block), where COAT divides by the floor's scale and -0.0 keeps its sign";

}  // namespace

void add_coat_group_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  const FormatSpec* spec = &f;
  const bool per_group = f.name == "coat.act.pergroup" || f.name == "coat.act.perblock";
  const bool per_tensor = f.name == "coat.act.pertensor.groupscale", transposed = f.name == "coat.act.pergroup.transposed";
  if (!per_group && !per_tensor && !transposed) return;
  if (transposed)
    out.push_back({"transposed-absmax-first-16",
                   "the reference with each group of x^T (codes_t, along M) reduced to its absmax over its first 16 "
                   "elements whatever group_size is (COAT's default QB hard-coded in the transposed reduction)",
                   skipping(spec, [](std::size_t place, std::size_t) { return place >= 16; }, kTransposed)});
  // The four kernels reduce with the same tl.max: its NaN rules' slips and its loop bound apply to each,
  // on the per-tensor kernel's 1 x 16 groups and on both of the transposed kernel's sides (x's and x^T's)
  const auto per_format = [spec, per_tensor, transposed](GroupSeen seen) -> decltype(KnownVariant::run) {
    return [spec, seen, per_tensor, transposed](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
      if (per_tensor) return groups_seen(*spec, e, p, seen, kPerTensor);
      if (transposed) return on_both_sides(*spec, e, p, seen);
      return groups_seen(*spec, e, p, seen, kRows);
    };
  };
  if (!per_group)  // (the per-group kernels' absmax-keeps-nan is variants_coat.cpp's, from their fp32 scales)
    out.push_back({"absmax-keeps-nan",
                   "the reference with a group absmax that keeps NaN (torch.amax's rule), " +
                       std::string(per_tensor ? "so that the tensor scale, their max, is NaN" : "for x's and x^T's groups"),
                   per_format(keeping_nan)});
  out.push_back({"absmax-from-zero",
                 "the reference with a group absmax started from 0 (a group of NaNs alone gets the floor's scale "
                 "1e-10 / fp8_max, where COAT's tl.max gives NaN)",
                 per_format(from_zero)});
  out.push_back({"absmax-led-by-nan",
                 "the reference with a group absmax folded from its first |x| with a > comparison (a group led by a "
                 "NaN keeps it, where COAT's tl.max skips NaN)",
                 per_format(led_by_nan)});
  if (per_tensor)
    out.push_back({"tensor-max-from-first-group",
                   "the reference with the tensor scale folded from the first group's scale with a > comparison (a NaN "
                   "group scale kept only when it is the first, where torch.max propagates any)",
                   tensor_max_from_first_group});
  out.push_back({"absmax-misses-last",
                 "the reference with a group absmax over all but the group's last element (a loop bound one short)",
                 per_format(missing_last)});
  if (per_group)
    out.push_back({"absmax-first-16",
                   "the reference with a group absmax over the group's first 16 elements whatever group_size is "
                   "(COAT's default QB hard-coded in the reduction)",
                   skipping(spec, [](std::size_t place, std::size_t) { return place >= 16; })});
  if (per_group)
    out.push_back({"zero-group-codes-zero", zero_group_description,
                   [](const Case& e, const nlohmann::json&) { return zero_groups_coded_zero(e, kRows); }});
  if (transposed)  // (per tensor: a zero group is divided by the tensor's scale)
    out.push_back({"zero-group-codes-zero", zero_group_description + std::string(", on x's and x^T's groups"),
                   [](const Case& e, const nlohmann::json&) -> std::optional<Case> {
                     std::optional<Case> rows = zero_groups_coded_zero(e, kRows);
                     std::optional<Case> both = zero_groups_coded_zero(rows ? *rows : e, kTransposed);
                     return both ? both : rows;
                   }});
}

}  // namespace lowbit::diagnosis
