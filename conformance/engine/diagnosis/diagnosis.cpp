// diagnose(): every known variant of the format on the inputs of each failing case, held bit for bit
// to the kernel's outputs (diagnosis.hpp); and the helpers the families' variants share (variants.hpp).
#include "lowbit/diagnosis.hpp"

#include <fmt/core.h>

#include <cstring>

#include "lowbit/blockwise.hpp"
#include "lowbit/mismatch.hpp"
#include "variants.hpp"

namespace lowbit {

namespace diagnosis {

std::optional<Case> with_codes(const FormatSpec& f, const Case& expected, const nlohmann::json& params,
                               std::vector<std::uint8_t> codes, std::optional<std::vector<float>> scale, bool keep_dequant) {
  Case c = expected;
  const Tensor& old = expected.require("codes");
  if (codes.size() != old.bytes.size()) return std::nullopt;
  c.add(Tensor::from_bytes("codes", old.dtype, old.shape, codes));
  if (scale) c.add(Tensor::from_f32("scale", expected.require("scale").shape, *scale));
  if (const Tensor* dequant = expected.find("dequant"); dequant && !keep_dequant) {
    if (dequant->dtype != DType::F32 || !f.dequantize) return std::nullopt;
    const std::vector<float> values = f.dequantize(c, params);
    if (values.size() != dequant->element_count()) return std::nullopt;
    c.add(Tensor::from_f32("dequant", dequant->shape, values));
  }
  if (const Tensor* packed = expected.find("codes_packed"))
    c.add(Tensor::from_bytes("codes_packed", packed->dtype, packed->shape, blockwise::pack_nibbles(codes)));
  return c;
}

std::optional<Case> requantized(const FormatSpec& f, const Case& expected, const nlohmann::json& params,
                                const std::function<float(std::span<const float> block)>& scale_of,
                                const std::function<std::uint8_t(float x, float scale)>& code_of) {
  const Tensor* input = expected.find("input");
  if (!input || input->dtype != DType::F32) return std::nullopt;
  const std::vector<float> x = input->f32();
  const std::size_t block = positive_size_param(params, "block_size");
  std::vector<float> scale(expected.require("scale").element_count());
  if (scale.size() * block != x.size()) return std::nullopt;
  std::vector<std::uint8_t> codes(x.size());
  for (std::size_t b = 0; b < scale.size(); ++b) {
    scale[b] = scale_of(std::span<const float>(x).subspan(b * block, block));
    for (std::size_t i = b * block; i < (b + 1) * block; ++i) codes[i] = code_of(x[i], scale[b]);
  }
  return with_codes(f, expected, params, std::move(codes), std::move(scale));
}

Case with_outputs(const Case& expected, std::vector<Tensor> outputs) {
  Case c = expected;
  for (Tensor& t : outputs) c.add(std::move(t));
  return c;
}

Tensor with_subnormals_flushed(const Tensor& t) {
  Tensor out = t;
  const std::size_t n = t.element_count(), size = n ? t.bytes.size() / n : 0;
  if (size == 0) return out;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_subnormal_bits(t.dtype, t.bits_at(i))) continue;
    // a zero of the element's sign: every byte 0 but the sign bit, the top bit of its last byte
    std::uint8_t* e = out.bytes.data() + i * size;
    std::memset(e, 0, size - 1);
    e[size - 1] &= 0x80u;
  }
  return out;
}

// A partial last block whose outputs the kernel never wrote: its codes left as the harness's zeros
// (what a kernel that loops over whole blocks only leaves), the dequantized values made from them.
void add_tail_variants(const FormatSpec& f, std::vector<KnownVariant>& out) {
  const TensorSpec* codes = f.tensor("codes");
  if (!codes || codes->layout.scales.empty() || f.whole_blocks || !f.dequantize) return;
  out.push_back({"tail-not-written", "the reference with the codes of a partial last block left zero",
                 [&f](const Case& e, const nlohmann::json& p) -> std::optional<Case> {
                   const BlockMap map = block_map(e, "codes");
                   std::vector<std::uint8_t> codes = e.require("codes").u8();
                   const std::size_t whole = map.block_elements() ? codes.size() / map.block_elements() * map.block_elements() : 0;
                   if (map.straddling != 1 || map.block_rows != 1 || whole == codes.size()) return std::nullopt;
                   std::fill(codes.begin() + static_cast<std::ptrdiff_t>(whole), codes.end(), std::uint8_t{0});
                   return with_codes(f, e, p, std::move(codes));
                 }});
}

}  // namespace diagnosis

std::vector<KnownVariant> known_variants(const FormatSpec& f) {
  std::vector<KnownVariant> out;
  diagnosis::add_fp8_variants(f, out);
  diagnosis::add_codebook_variants(f, out);
  diagnosis::add_bnb_variants(f, out);
  diagnosis::add_coat_variants(f, out);
  diagnosis::add_coat_optimizer_variants(f, out);
  diagnosis::add_coat_group_variants(f, out);
  diagnosis::add_optimizer_variants(f, out);
  diagnosis::add_coat_symm_variants(f, out);
  diagnosis::add_tail_variants(f, out);
  diagnosis::add_param_variants(f, out);
  return out;
}

namespace {

// How the variant's outputs stand against the kernel's on one case: the kernel's mismatching elements
// it reproduces, and whether it reproduces every output bit.
struct Score {
  std::uint64_t mismatches = 0, reproduced = 0;
  bool every = true;
  // elements where the variant and the kernel hold NaNs of different bits (sign or payload), and
  // whether those are all that keeps the variant from every bit
  std::uint64_t nan_apart = 0;
  bool every_but_nan = true;
};

bool is_nan_bits(DType d, std::uint64_t b) {
  switch (d) {
    case DType::F32: return (b & 0x7FFFFFFFu) > 0x7F800000u;
    case DType::F16: return (b & 0x7FFFu) > 0x7C00u;
    case DType::BF16: return (b & 0x7FFFu) > 0x7F80u;
    case DType::F8_E4M3: return (b & 0x7Fu) == 0x7Fu;
    case DType::F8_E5M2: return (b & 0x7Fu) > 0x7Cu;
    default: return false;
  }
}

Score score(const FormatSpec& f, const Case& expected, const Case& actual, const Case* variant) {
  Score s;
  for (const TensorSpec& spec : f.outputs) {
    const Tensor* e = expected.find(spec.name);
    if (!e) continue;
    const Tensor* a = actual.find(spec.name);
    const Tensor* v = variant ? variant->find(spec.name) : nullptr;
    const bool comparable = a && a->dtype == e->dtype && a->bytes.size() == e->bytes.size();
    const bool variant_comparable = comparable && v && v->dtype == e->dtype && v->bytes.size() == e->bytes.size();
    if (!comparable) {
      s.every = s.every_but_nan = false;
      continue;
    }
    const std::size_t n = e->element_count();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t ab = a->bits_at(i);
      const bool differs = e->bits_at(i) != ab;
      const bool same_as_variant = variant_comparable && v->bits_at(i) == ab;
      s.mismatches += differs;
      s.reproduced += differs && same_as_variant;
      if (same_as_variant) continue;
      s.every = false;
      if (variant_comparable && is_nan_bits(e->dtype, ab) && is_nan_bits(e->dtype, v->bits_at(i))) ++s.nan_apart;
      else s.every_but_nan = false;
    }
  }
  return s;
}

}  // namespace

nlohmann::json Diagnosis::json() const {
  nlohmann::json j = {{"cases", cases},
                      {"mismatches", mismatches},
                      {"variants_tried", variants_tried},
                      {"reproducing", reproducing},
                      {"line", line}};
  if (reference) j["reference"] = true;
  if (!reproducing.empty()) j["description"] = description;
  if (reproducing.empty() && !nan_aside.empty())
    j["reproducing_but_nan"] = {{"variants", nan_aside}, {"description", description}, {"nan_elements", nan_apart},
                                {"reproduced", reproduced}};
  if (reproducing.empty() && nan_aside.empty() && !closest.empty())
    j["closest"] = {{"variant", closest}, {"description", closest_description}, {"reproduced", closest_reproduced}};
  return j;
}

Diagnosis diagnose(const FormatSpec& f, const std::vector<FailingCase>& failing) {
  Diagnosis d;
  for (const FailingCase& c : failing) {
    if (!c.expected || !c.actual) continue;
    ++d.cases;
    d.mismatches += score(f, *c.expected, *c.actual, nullptr).mismatches;
  }
  if (d.cases == 0) return d;
  // The reference itself first: a golden case's outputs are its library's, and where they differ from
  // the reference's (a library rounding under --strict) a kernel that computes as the reference does
  // fails them; no variant is named then.
  if (f.run) {
    bool every = true;
    for (const FailingCase& c : failing) {
      if (!c.expected || !c.actual || !every) continue;
      try {
        const Case ref = diagnosis::with_outputs(*c.expected, f.run(*c.expected, resolve_params(f, c.expected->params()), 1));
        every = score(f, *c.expected, *c.actual, &ref).every;
      } catch (const std::exception&) {
        every = false;
      }
    }
    if (every) {
      d.reproduced = d.mismatches;
      d.reference = true;
      d.line = fmt::format("diagnosis: behaves as the reference itself ({} of {} mismatches, {} failing case{}): the "
                           "expected outputs that differ are a golden case's, where its library differs from the reference",
                           d.mismatches, d.mismatches, d.cases, d.cases == 1 ? "" : "s");
      return d;
    }
  }
  const std::vector<KnownVariant> variants = known_variants(f);
  d.variants_tried = variants.size();
  std::string nan_aside_description;
  for (const KnownVariant& v : variants) {
    Score total;
    for (const FailingCase& c : failing) {
      if (!c.expected || !c.actual) continue;
      std::optional<Case> made;
      try {
        made = v.run(*c.expected, resolve_params(f, c.expected->params()));
      } catch (const std::exception&) {  // a parameter value this case cannot take: the variant does not apply
        made.reset();
      }
      const Score s = score(f, *c.expected, *c.actual, made ? &*made : nullptr);
      total.reproduced += s.reproduced;
      total.nan_apart += s.nan_apart;
      total.every = total.every && s.every;
      total.every_but_nan = total.every_but_nan && s.every_but_nan;
    }
    if (total.every) {
      if (d.reproducing.empty()) d.description = v.description;
      d.reproducing.push_back(v.name);
    } else if (total.every_but_nan && total.reproduced > 0) {  // (none reproduced: every mismatch is a NaN's
      // bits, which any variant that leaves the non-NaN outputs alone "reproduces": it explains nothing)
      if (d.nan_aside.empty()) {
        nan_aside_description = v.description;
        d.nan_apart = total.nan_apart;
        d.reproduced = total.reproduced;
      }
      d.nan_aside.push_back(v.name);
    } else if (total.reproduced > d.closest_reproduced) {
      d.closest = v.name;
      d.closest_description = v.description;
      d.closest_reproduced = total.reproduced;
    }
  }
  const std::string cases = fmt::format("{} failing case{}", d.cases, d.cases == 1 ? "" : "s");
  const auto named = [](const std::vector<std::string>& names) {
    std::string text = names.front();
    for (std::size_t k = 1; k < names.size(); ++k) text += (k == 1 ? "; also " : ", ") + names[k];
    return text;
  };
  if (!d.reproducing.empty()) {
    d.reproduced = d.mismatches;
    d.line = fmt::format("diagnosis: behaves as {} ({}): {} of {} mismatches, {}", d.description, named(d.reproducing),
                         d.mismatches, d.mismatches, cases);
  } else if (!d.nan_aside.empty()) {
    d.description = nan_aside_description;
    d.line = fmt::format("diagnosis: behaves as {} ({}) but for the bits of {} NaN{} (sign or payload): {} of {} mismatches, {}",
                         d.description, named(d.nan_aside), d.nan_apart, d.nan_apart == 1 ? "" : "s", d.reproduced,
                         d.mismatches, cases);
  } else {
    d.line = fmt::format("diagnosis: no known variant of {} ({} tried) reproduces the kernel's outputs on its {}",
                         f.name, d.variants_tried, cases);
    // the closest named only where it accounts for most of the mismatches (a chance match says nothing)
    if (!d.closest.empty() && d.closest_reproduced * 2 >= d.mismatches)
      d.line += fmt::format("; closest: {} ({}), {} of {} mismatches", d.closest_description, d.closest,
                            d.closest_reproduced, d.mismatches);
  }
  return d;
}

}  // namespace lowbit
