// Registry entries of the codebook families: the qmap tables of torchao and bitsandbytes, torchao's
// 8-bit, 4-bit and FP8 block-wise states, bitsandbytes' block-wise 8-bit quantization, and lowbit's
// plain per-block E4M3 (fp8.perblock.e4m3); with the audit's round trip of each block-wise format.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <stdexcept>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/bf16_round.hpp"
#include "lowbit/narrow16.hpp"
#include "formats_optimizer_io.hpp"
#include "bnb_table_edges.hpp"
#include "fp8_edges.hpp"

namespace lowbit {

namespace {

using codebook::Linspace;

Linspace linspace_from(const nlohmann::json& p) {
  const std::string v = p.at("linspace").get<std::string>();
  if (v == "fma") return Linspace::Fma;
  if (v == "nofma") return Linspace::NoFma;
  throw std::runtime_error("linspace must be fma or nofma (got '" + v + "')");
}

std::size_t block_size_from(const nlohmann::json& p) { return positive_size_param(p, "block_size"); }

std::vector<std::int64_t> flat_shape(std::size_t n) { return {static_cast<std::int64_t>(n)}; }

// Every element of a block-wise state belongs to block i / block_size (the last one may be partial,
// as bitsandbytes allows), quantized with scale[block]; the scale holds one entry per block.
Layout scaled_blocks() { return blocks(param_extent("block_size"), {"scale"}); }
// codes_dtype: U8 indices into the case's qmap, or FP8 codes (no table).
std::vector<TensorSpec> blockwise_outputs(DType codes_dtype) {
  Schema codes = {.dtypes = {codes_dtype}, .shape = same_count("input")};
  if (codes_dtype == DType::U8) codes.indexes = "qmap";
  return {{"codes", scaled_blocks(), codes},
          {"scale", block_entries(), {.dtypes = {DType::F32}, .shape = entry_per_block_of("codes")}},
          {"dequant", scaled_blocks(), {.dtypes = {DType::F32}, .shape = same_count("input")}}};
}
TensorSpec f32_input() { return {"input", {.dtypes = {DType::F32}}}; }
TensorSpec qmap_input(std::uint64_t entries) { return {"qmap", {.dtypes = {DType::F32}, .shape = table_of(entries)}}; }

Tensor f32_tensor(const std::string& name, const std::vector<float>& v) { return Tensor::from_f32(name, flat_shape(v.size()), v); }
Tensor u8_tensor(const std::string& name, const std::vector<std::uint8_t>& v) {
  return Tensor::from_bytes(name, DType::U8, flat_shape(v.size()), v);
}

// The normalized value the search saw: torchao divides by the scale, bitsandbytes multiplies by the
// reciprocal of the absmax, FP8 divides by amax/448.
using Normalize = float (*)(float x, float scale);
float divide(float x, float scale) { return x / scale; }
float times_reciprocal(float x, float absmax) { return x * (1.0f / absmax); }

// How a block-wise quantizer scales and searches, for its explainer: the reference's normalization
// and the other one a kernel may use instead (x * (1 / s) for a division, x / s for a reciprocal),
// with the format's own search of a normalized value, which says whether that other arithmetic
// reproduces the actual code. No search: the variant is not checked.
struct Arithmetic {
  Normalize normalize;
  Normalize other;
  std::string_view other_name;  // the arithmetic-variant's name
  std::function<int(float y)> search;
  // Where the search decides in float arithmetic whether y lies on the boundary between neighbouring
  // entries lo < hi (torchao: (y - lo) >= (hi - lo) * 0.5f), that test: its tie is the format's own,
  // which may miss the exact midpoint by a rounding. Empty: the exact midpoint.
  std::function<bool(float y, float lo, float hi)> on_boundary;
};
Arithmetic division(std::function<int(float)> search) { return {divide, times_reciprocal, "reciprocal", std::move(search), {}}; }

// What a block-wise quantizer's explainers read once per comparison: the codes of both cases, the
// input, the scales and the block of each code. Only `codes` and `dequant` (element i is code i)
// are explained; a scale, a packed nibble pair or a table entry is not an element of the codes.
struct CodeContext {
  const Tensor* expected = nullptr;
  const Tensor* actual = nullptr;
  const Tensor* input = nullptr;
  std::vector<float> scale;
  BlockMap blocks;

  // The element's input, its block's scale and the normalized input the reference's quantizer saw,
  // when the codes are comparable; otherwise an explanation without them.
  bool context(std::size_t i, const Arithmetic& arith, Explanation& why, float& x, float& s) const {
    if (i >= expected->bytes.size() || i >= input->element_count()) return false;
    const std::size_t block = blocks.block_of(i);
    if (block >= scale.size()) return false;
    x = input->value_as_float(i);
    s = scale[block];
    why.input = x;
    why.scale = s;
    why.scaled = arith.normalize(x, s);
    return true;
  }
  // A kernel that flushes a subnormal input to zero (DAZ): the input is a subnormal of its dtype,
  // and the format's own search gives the actual code for a zero of its sign (and the expected
  // code for the input itself). Without a search there is no claim.
  bool input_flushed(std::size_t i, const Arithmetic& arith, float x, float s, int want, int got) const {
    if (!arith.search || !is_subnormal_bits(input->dtype, input->bits_at(i))) return false;
    return arith.search(arith.normalize(x, s)) == want && arith.search(arith.normalize(std::copysign(0.0f, x), s)) == got;
  }
  // The other arithmetic reproduces the actual code where the reference's gives the expected one.
  bool other_arithmetic(const Arithmetic& arith, float x, float s, int want, int got) const {
    if (!arith.search || !std::isfinite(s) || s == 0.0f) return false;  // a zero block's codes are the format's rule
    return arith.search(arith.normalize(x, s)) == want && arith.search(arith.other(x, s)) == got;
  }
};

// The boundary explanation of neighbouring codes, with the element's input and scale kept.
Explanation with_context(Explanation neighbours, const Explanation& context) {
  neighbours.input = context.input;
  neighbours.scale = context.scale;
  return neighbours;
}

std::optional<CodeContext> code_context(const Case& e, const Case& a, const std::string& tensor) {
  if (tensor != "codes" && tensor != "dequant") return std::nullopt;
  const Tensor* want = e.find("codes");
  const Tensor* got = a.find("codes");
  const Tensor* input = e.find("input");
  const Tensor* scale = e.find("scale");
  if (!want || !got || !input || !scale || want->dtype != got->dtype || want->bytes.size() != got->bytes.size())
    return std::nullopt;
  return CodeContext{want, got, input, scale->f32(), block_map(e, "codes")};
}

// A class names a cause only where that cause alone explains the element (docs/tolerance-policy.md).
// Where two known causes explain it (a tie that the other arithmetic also lands on the other side of;
// a zero next to the smallest subnormal, which a flush and a rounding both give), the element takes
// the one the kernel's unambiguous elements of the same tensor show: the other arithmetic only if it
// explains some differing code that is no tie, a flush only if some zero is one that no rounding
// reaches. A ties-away kernel's codes are then ties, a reciprocal kernel's the variant, a truncating
// kernel's zeros no flush, a flushing kernel's all flushes.
struct Evidence {
  bool other_arithmetic = false;
  bool flush = false;
};

// In this order: codes that agree (a dequantized value that differs from the same code: nothing the
// codes say; the comparison's own check of a flushed value applies), a tie (the reference's y exactly
// on the boundary between the two codes, or on the format's own boundary test) unless the evidence
// says other arithmetic, the other arithmetic, a flushed subnormal input, near-boundary between
// neighbouring codes, else genuine; each with the element's input, scaled value and block scale.
ElementExplainer codebook_explainer(const Case& e, const Case& a, const std::string& tensor, Arithmetic arith) {
  const auto c = code_context(e, a, tensor);
  const Tensor* qmap = e.find("qmap");
  if (!c || !qmap) return {};
  // the element's explanation, and whether the other arithmetic reproduces it off a tie
  auto classify = [c = *c, q = qmap->f32(), arith = std::move(arith)](std::size_t i, const Evidence& ev,
                                                                      bool* other_off_tie) -> Explanation {
    Explanation why;
    float x = 0, s = 0;
    if (!c.context(i, arith, why, x, s)) return why;
    const int ce = c.expected->bytes[i], ca = c.actual->bytes[i];
    if (ce == ca || static_cast<std::size_t>(std::max(ce, ca)) >= q.size()) return why;
    std::optional<Explanation> neighbours;
    if (std::abs(ce - ca) == 1) {
      const float lo = q[std::min(ce, ca)], hi = q[std::max(ce, ca)], y = arith.normalize(x, s);
      neighbours = with_context(explain_neighbours(y, lo, hi), why);
      if (arith.on_boundary && arith.on_boundary(y, lo, hi)) neighbours->cls = MismatchClass::Tie;
    }
    const bool tie = neighbours && neighbours->cls == MismatchClass::Tie;
    const bool other = c.other_arithmetic(arith, x, s, ce, ca);
    if (other_off_tie) *other_off_tie = other && !tie;
    if (tie && !(other && ev.other_arithmetic)) return *neighbours;
    if (other) {
      why.cls = MismatchClass::ArithmeticVariant;
      why.variant = arith.other_name;
    } else if (c.input_flushed(i, arith, x, s, ce, ca)) {
      why.cls = MismatchClass::FlushedSubnormal;
    } else if (neighbours) {
      return *neighbours;
    }
    return why;
  };
  Evidence ev;
  const std::vector<std::uint8_t>& want = c->expected->bytes;
  const std::vector<std::uint8_t>& got = c->actual->bytes;
  for (std::size_t i = 0; i < want.size() && !ev.other_arithmetic; ++i)
    if (want[i] != got[i]) classify(i, ev, &ev.other_arithmetic);
  return [classify = std::move(classify), ev, w = &want, g = &got](std::size_t i) {
    Explanation why = classify(i, ev, nullptr);
    why.from_code = i < w->size() && (*w)[i] != (*g)[i];
    return why;
  };
}

ElementExplainer fp8_state_explainer(const Case& e, const Case& a, const std::string& tensor, fp8::Policy cast) {
  const auto c = code_context(e, a, tensor);
  if (!c) return {};
  using fp8::E4M3FN;
  const Arithmetic arith = division([cast](float y) { return fp8::encode_nearest_even<E4M3FN>(y, cast); });
  auto classify = [c = *c, arith](std::size_t i, const Evidence& ev, Evidence* seen) -> Explanation {
    Explanation why;
    float x = 0, s = 0;
    if (!c.context(i, arith, why, x, s)) return why;
    const std::uint8_t ce = c.expected->bytes[i], ca = c.actual->bytes[i];
    if (ce == ca || E4M3FN::is_nan(ce) || E4M3FN::is_nan(ca)) return why;
    std::optional<Explanation> neighbours;
    if (std::abs(fp8::code_ordinal(ce) - fp8::code_ordinal(ca)) == 1) {
      const double ve = fp8::decode<E4M3FN>(ce), va = fp8::decode<E4M3FN>(ca);
      neighbours = with_context(explain_neighbours(*why.scaled, std::min(ve, va), std::max(ve, va)), why);
    }
    const bool tie = neighbours && neighbours->cls == MismatchClass::Tie;
    const bool other = c.other_arithmetic(arith, x, s, ce, ca);
    const bool alone = flushed_alone(DType::F8_E4M3, ce, ca, fp8::decode<E4M3FN>(ce), *why.scaled);
    const bool zero_for_subnormal = is_zero_bits(DType::F8_E4M3, ca) && is_subnormal_bits(DType::F8_E4M3, ce);
    if (seen) {
      seen->other_arithmetic |= other && !tie;
      seen->flush |= alone;
    }
    const bool flushed = alone || (ev.flush && zero_for_subnormal) || c.input_flushed(i, arith, x, s, ce, ca);
    if (tie && !(other && ev.other_arithmetic) && !(flushed && ev.flush)) return *neighbours;
    if (other) {
      why.cls = MismatchClass::ArithmeticVariant;
      why.variant = arith.other_name;
    } else if (flushed) {
      why.cls = MismatchClass::FlushedSubnormal;  // the dequant tensor's view of a flushed code, or a flushed input
    } else if (neighbours) {
      return *neighbours;
    }
    return why;
  };
  Evidence ev;
  const std::vector<std::uint8_t>& want = c->expected->bytes;
  const std::vector<std::uint8_t>& got = c->actual->bytes;
  for (std::size_t i = 0; i < want.size() && !(ev.other_arithmetic && ev.flush); ++i)
    if (want[i] != got[i]) classify(i, Evidence{}, &ev);
  return [classify = std::move(classify), ev, w = &want, g = &got](std::size_t i) {
    Explanation why = classify(i, ev, nullptr);
    why.from_code = i < w->size() && (*w)[i] != (*g)[i];
    return why;
  };
}

// torchao's packed 4-bit codes (byte j = codes[2j] << 4 | codes[2j + 1]): a byte that is the packing of
// the actual codes, where one of them differs from the expected, only repeats that codes mismatch
// (follows-codes: the codes tensor's own class and verdict are the element's); else genuine.
ElementExplainer packed_explainer(const Case& e, const Case& a) {
  const Tensor* want = e.find("codes");
  const Tensor* got = a.find("codes");
  const Tensor* packed = a.find("codes_packed");
  if (!want || !got || !packed || want->dtype != DType::U8 || got->dtype != DType::U8 || packed->dtype != DType::U8 ||
      got->bytes.size() != want->bytes.size() || packed->bytes.size() * 2 != want->bytes.size())
    return {};
  return [w = &want->bytes, g = &got->bytes, p = &packed->bytes](std::size_t j) -> Explanation {
    Explanation why;
    if (2 * j + 1 >= g->size()) return why;
    const std::uint8_t hi = (*g)[2 * j], lo = (*g)[2 * j + 1];
    const bool repeats = hi < 16 && lo < 16 && (*p)[j] == static_cast<std::uint8_t>(hi << 4 | lo);
    if (repeats && (hi != (*w)[2 * j] || lo != (*w)[2 * j + 1])) why.cls = MismatchClass::FollowsCodes;
    return why;
  };
}

// torchao.fp8's block scale computed as amax * (1 / 448), as a kernel that keeps the rounded reciprocal
// of 448 does, where torchao divides amax by 448: an entry is that arithmetic variant when the expected
// scale is RN(amax / 448) and the actual one RN(amax * RN(1 / 448)), amax being the block's clipped
// absmax (recorded as the entry's input: it is what the scale computation saw).
ElementExplainer torchao_fp8_scale_explainer(const Case& e, const Case& a, std::size_t block) {
  const Tensor* input = e.find("input");
  const Tensor* want = e.find("scale");
  const Tensor* got = a.find("scale");
  if (!input || !want || !got || input->dtype != DType::F32 || got->dtype != DType::F32 ||
      got->bytes.size() != want->bytes.size())
    return {};
  return [x = input->f32(), w = want->f32(), g = got->f32(), block](std::size_t j) -> Explanation {
    Explanation why;
    if (j >= w.size() || block == 0 || x.size() / block <= j) return why;
    const float amax = blockwise::torchao_fp8_clipped_amax(std::span<const float>(x).subspan(j * block, block));
    why.input = amax;
    const float e4m3_max = fp8::decode<fp8::E4M3FN>(fp8::E4M3FN::max_finite);  // 448
    if (bits_of(w[j]) == bits_of(amax / e4m3_max) && bits_of(g[j]) == bits_of(amax * (1.0f / e4m3_max))) {
      why.cls = MismatchClass::ArithmeticVariant;
      why.variant = "reciprocal";
    }
    return why;
  };
}

// ---- round trips (lowbit audit) -------------------------------------------------------------------

// The audit's block sizes: any power of two (the audit asks for 16..65536).
BlockSizes any_power_of_two() { return {1, SIZE_MAX, true, ""}; }

// The audit's round trip of a block-wise format (FormatSpec::round_trip) through its caller-provided
// forms: quantize(x, codes, scale), then dequantize(codes, scale, out), the codes and scales in the
// calling thread's scratch, kept for its next call (the audit calls once per chunk of 2^18 elements;
// a fresh zero-filled vector per call was a tenth of its time). whole_blocks: the format takes whole
// blocks only (torchao); a partial tail block goes through zero-padded to one block (docs/audit.md):
// the zeros leave its absmax, and so every real element's code, as they are; its head is kept. Blocks are independent, so the bytes are those of one call on the padded x.
template <class Quantize, class Dequantize>
void blockwise_round_trip(std::span<const float> x, std::size_t block, bool whole_blocks, std::span<float> out,
                          const Quantize& quantize, const Dequantize& dequantize) {
  thread_local std::vector<std::uint8_t> codes;
  thread_local std::vector<float> scale, tail_in, tail_out;
  const std::size_t head = whole_blocks ? x.size() / block * block : x.size();
  codes.resize(head);
  scale.resize(blockwise::block_count(head, block));
  quantize(x.first(head), std::span(codes), std::span(scale));
  dequantize(std::span<const std::uint8_t>(codes), std::span<const float>(scale), out.first(head));
  if (head == x.size()) return;
  tail_in.assign(block, 0.0f);
  std::copy(x.begin() + static_cast<std::ptrdiff_t>(head), x.end(), tail_in.begin());
  tail_out.resize(block);
  codes.resize(block);
  scale.resize(1);
  quantize(std::span<const float>(tail_in), std::span(codes), std::span(scale));
  dequantize(std::span<const std::uint8_t>(codes), std::span<const float>(scale), std::span(tail_out));
  std::copy_n(tail_out.begin(), x.size() - head, out.begin() + static_cast<std::ptrdiff_t>(head));
}

// ---- tables ----------------------------------------------------------------------------------

std::vector<float> torchao_table(const nlohmann::json& p) {
  const std::string map = p.at("map").get<std::string>();
  const Linspace l = linspace_from(p);
  if (map == "signed8") return codebook::signed8(l);
  if (map == "unsigned8") return codebook::unsigned8(l);
  if (map == "signed4") return codebook::torchao_signed4(l);
  if (map == "unsigned4") return codebook::torchao_unsigned4(l);
  throw std::runtime_error("torchao map must be signed8, unsigned8, signed4 or unsigned4 (got '" + map + "')");
}

std::vector<float> bnb_table(const nlohmann::json& p) {
  const std::string map = p.at("map").get<std::string>();
  const Linspace l = linspace_from(p);
  if (map == "dynamic_signed") return codebook::dynamic_map(true, 7, 8, l, true);
  if (map == "dynamic_unsigned") return codebook::dynamic_map(false, 7, 8, l, true);
  if (map == "dynamic_signed4") return codebook::dynamic_map(true, 3, 4, l, true);
  if (map == "linear_signed") return codebook::bnb_linear_map(true, l);
  if (map == "linear_unsigned") return codebook::bnb_linear_map(false, l);
  throw std::runtime_error("bnb map must be dynamic_signed, dynamic_unsigned, dynamic_signed4, linear_signed or "
                           "linear_unsigned (got '" + map + "')");
}

FormatSpec table_format(std::string name, std::string provenance, std::string default_map,
                        std::vector<float> (*table)(const nlohmann::json&)) {
  FormatSpec f;
  f.name = std::move(name);
  f.description = "the codebook (qmap) table itself, as the library builds it";
  f.provenance = std::move(provenance);
  f.default_params = {{"map", default_map}, {"linspace", "fma"}};
  // the table's size follows its map (8-bit or 4-bit): compared with the reference's, not checked here
  f.outputs = {{"qmap", {.dtypes = {DType::F32}, .shape = any_shape(1)}}};
  f.run = [table](const Case&, const nlohmann::json& p, int /*threads*/) { return std::vector<Tensor>{f32_tensor("qmap", table(p))}; };
  return f;
}

// ---- torchao block-wise codebook states ----------------------------------------------------------

FormatSpec torchao_codebook_format(int bits, bool is_signed) {
  FormatSpec f;
  const std::string sign = is_signed ? "signed" : "unsigned";
  const std::string map = sign + std::to_string(bits);
  f.name = "torchao.codebook" + std::to_string(bits) + "." + sign;
  f.description = "torchao " + std::to_string(bits) + "-bit block-wise state: scale = max(amax, 1e-12), y = x / scale, "
                  "branchless search with ties up; codes (one per element), scale, dequant" +
                  std::string(bits == 4 ? ", and codes_packed (two per byte, first element high)" : "");
  f.provenance = bits == 8 ? "torchao 0.18 optim/quant_utils.py scale_tensor, quantize_8bit_with_qmap, dequant_with_qmap"
                           : "torchao 0.18 optim/quant_utils.py scale_tensor, quantize_4bit_with_qmap, dequant_with_qmap; "
                             "optim/subclass_4bit.py packing";
  f.default_params = {{"block_size", bits == 8 ? 256 : 128}};
  f.inputs = {f32_input(), qmap_input(bits == 8 ? 256 : 16)};
  f.outputs = blockwise_outputs(DType::U8);
  // two codes a byte: byte k holds elements 2k and 2k + 1, of two blocks when block_size is odd
  // (torchao 0.18 subclass_4bit.py packs codes[::2] << 4 | codes[1::2] over the whole flattened state)
  if (bits == 4)
    f.outputs.push_back({"codes_packed", blocks(packed_param_extent("block_size", 2), {"scale"}),
                         {.dtypes = {DType::U8}, .shape = packed_pairs_of("codes")}});
  f.run = [bits](const Case& in, const nlohmann::json& p, int threads) {
    const std::size_t block = block_size_from(p);
    const std::vector<float> x = in.require("input").f32(), q = in.require("qmap").f32();
    if (q.size() != (bits == 8 ? 256u : 16u)) throw std::runtime_error("qmap must have " + std::to_string(bits == 8 ? 256 : 16) + " entries");
    threads = worth_threads(x.size(), threads);
    if (bits == 4 && x.size() % 2 != 0)  // zeros(n) holds n // 2 bytes, and copy_'s packing needs pairs
      throw std::invalid_argument("torchao packs 4-bit codes in pairs over the whole state (codes[::2] << 4 | "
                                  "codes[1::2]): " + std::to_string(x.size()) + " elements is an odd count");
    const auto quantized = blockwise::torchao_quantize(x, q, block, threads);
    std::vector<Tensor> out = {u8_tensor("codes", quantized.codes), f32_tensor("scale", quantized.scale),
                               f32_tensor("dequant", blockwise::torchao_dequantize(quantized.codes, quantized.scale, q, block, threads))};
    if (bits == 4) out.push_back(u8_tensor("codes_packed", blockwise::pack_nibbles(quantized.codes)));
    return out;
  };
  f.explain = [](const Case& e, const Case& a, const std::string& tensor) {
    if (tensor == "codes_packed") return packed_explainer(e, a);
    const std::vector<float> q = e.find("qmap") ? e.find("qmap")->f32() : std::vector<float>{};
    if (q.size() != 16 && q.size() != 256) return ElementExplainer{};
    Arithmetic arith = division([q](float y) { return codebook::torchao_search(y, q); });
    // codebook::torchao_search's own comparison (torchao quantize_8bit_with_qmap): r >= half decides
    arith.on_boundary = [](float y, float lo, float hi) { return y - lo == (hi - lo) * 0.5f; };
    return codebook_explainer(e, a, tensor, std::move(arith));
  };
  f.auxiliary_inputs = [map](const nlohmann::json&) {
    return std::vector<Tensor>{f32_tensor("qmap", torchao_table({{"map", map}, {"linspace", "fma"}}))};
  };
  f.edge_inputs = [map, bits](const nlohmann::json& p) {
    const std::size_t block = block_size_from(p);
    std::vector<float> edges = codebook_edges(torchao_table({{"map", map}, {"linspace", "fma"}}), block);
    // 4-bit codes are packed in pairs over the whole state: at an odd block size, an odd number of
    // blocks gets one more block of zeros
    if (bits == 4 && edges.size() % 2 != 0) edges.resize(edges.size() + block, 0.0f);
    return edges;
  };
  f.dequantize_reads = {"codes", "scale", "qmap"};
  f.dequantize = [](const Case& c, const nlohmann::json& p) {
    return blockwise::torchao_dequantize(c.require("codes").u8(), c.require("scale").f32(), c.require("qmap").f32(),
                                         block_size_from(p));
  };
  f.round_trip = [table = torchao_table({{"map", map}, {"linspace", "fma"}})](std::span<const float> x, std::size_t block,
                                                                             bool, std::span<float> out) {
    blockwise_round_trip(
        x, block, true, out,
        [&](std::span<const float> in, std::span<std::uint8_t> codes, std::span<float> scale) {
          blockwise::torchao_quantize_into(in, table, block, codes, scale);
        },
        [&](std::span<const std::uint8_t> codes, std::span<const float> scale, std::span<float> to) {
          blockwise::torchao_dequantize_into(codes, scale, table, block, to);
        });
  };
  f.round_trip_blocks = any_power_of_two();
  f.round_trip_stores = {bits == 4 ? "codes_packed" : "codes", "scale", "qmap"};  // OptimState{8,4}bit: codes, scale, qmap
  f.round_trip_pads = true;
  f.whole_blocks = true;
  // torchao takes any block size that divides the state: one element a block (4-bit: a byte packs
  // two blocks), an odd one that is no power of two (33: an element's block found by a shift, or a
  // vector loop over whole blocks of 8 or 16, goes wrong; 4-bit: bytes straddle blocks), and a block
  // as large as the battery's random input
  f.battery_block_sizes = {1, 33, 4096};
  if (!is_signed) f.refuses_negative = "n/a (unsigned map: the data has negative values)";
  return f;
}

// cpu_capability (what torch.backends.cpu.get_cpu_capability() reports, lower case): whether torch's
// CPU kernels run vectorized (avx2, avx512) or scalar (default): bitsandbytes' default back end's
// max() of a NaN tail (blockwise.hpp) and 16-bit copies, torchao FP8's dequant NaNs.
bool vectorized_from(const nlohmann::json& p) {
  const std::string c = p.contains("cpu_capability") ? p.at("cpu_capability").get<std::string>() : "avx2";
  if (c == "avx2" || c == "avx512") return true;
  if (c == "default") return false;
  throw std::runtime_error("cpu_capability must be avx2, avx512 or default (got '" + c + "')");
}

fp8::NanWidening widening_from(const nlohmann::json& p) {
  const std::string w = p.contains("nan_widening") ? p["nan_widening"].get<std::string>() : "c10";
  if (const auto rule = fp8::parse_nan_widening(w)) return *rule;
  throw std::runtime_error("nan_widening must be c10, quiet or avx512 (got '" + w + "')");
}

FormatSpec torchao_fp8_format() {
  FormatSpec f;
  f.name = "torchao.fp8";
  f.description = "torchao FP8 block-wise state: scale = max(amax, 1e-12) / 448 (true division), codes = e4m3fn(x / scale) "
                  "with the conversion rules of the torch that ran it; codes, scale, dequant";
  f.provenance = "torchao 0.18 optim/subclass_fp8.py quantize_fp8 and OptimStateFp8.dequantize";
  // torch >= 2.13 casts saturate; nan_widening "c10" is torch's float8 -> float32 (observed at CPU
  // capabilities AVX2 and default), "quiet" (or "avx512") the rule once documented for AVX-512.
  // cpu_capability: torch's, for whose NaN the dequant's code * scale returns where both are NaN
  f.default_params = {{"block_size", 256},        {"overflow", "satfinite"}, {"nan_encoding", "torch"},
                      {"nan_widening", "c10"},    {"cpu_capability", "avx2"}};
  f.inputs = {f32_input()};
  f.outputs = blockwise_outputs(DType::F8_E4M3);
  f.run = [](const Case& in, const nlohmann::json& p, int threads) {
    const std::size_t block = block_size_from(p);
    const auto overflow = fp8::parse_overflow(p.at("overflow").get<std::string>());
    const auto nan = fp8::parse_nan_encoding(p.at("nan_encoding").get<std::string>(), fp8::FormatId::E4M3FN);
    if (!overflow || !nan) throw std::runtime_error("torchao.fp8: bad overflow or nan_encoding parameter");
    const std::vector<float> x = in.require("input").f32();
    threads = worth_threads(x.size(), threads);
    const auto quantized = blockwise::torchao_fp8_quantize(x, block, {*overflow, *nan}, threads);
    return std::vector<Tensor>{
        Tensor::from_bytes("codes", fp8::E4M3FN::code_dtype, flat_shape(quantized.codes.size()), quantized.codes),
        f32_tensor("scale", quantized.scale),
        f32_tensor("dequant", blockwise::torchao_fp8_dequantize(quantized.codes, quantized.scale, block, widening_from(p),
                                                                vectorized_from(p), threads))};
  };
  f.explain = [](const Case& e, const Case& a, const std::string& tensor) {
    const nlohmann::json p = resolve_params(*find_format(e.format()), e.params());
    const auto overflow = fp8::parse_overflow(p.at("overflow").get<std::string>());
    const auto nan = fp8::parse_nan_encoding(p.at("nan_encoding").get<std::string>(), fp8::FormatId::E4M3FN);
    if (!overflow || !nan) return ElementExplainer{};
    if (tensor == "scale") return torchao_fp8_scale_explainer(e, a, block_size_from(p));
    return fp8_state_explainer(e, a, tensor, {*overflow, *nan});
  };
  // The cast's decision thresholds after torchao's own scale computation: blocks led by an absmax of 1
  // (scale RN(1 / 448), not a power of two, so x / s and x * (1 / s) already disagree near some
  // midpoints), and scaled-edges under other absmaxes, where amax / 448 and amax * (1 / 448) differ too.
  f.edge_inputs = [](const nlohmann::json& p) { return codebook_edges(fp8_grid_over_absmax(fp8::FormatId::E4M3FN), block_size_from(p)); };
  f.dequantize_reads = {"codes", "scale"};
  f.dequantize = [](const Case& c, const nlohmann::json& p) {
    return blockwise::torchao_fp8_dequantize(c.require("codes").u8(), c.require("scale").f32(), block_size_from(p),
                                             widening_from(p), vectorized_from(p));
  };
  f.round_trip = [](std::span<const float> x, std::size_t block, bool, std::span<float> out) {
    blockwise_round_trip(  // the default params
        x, block, true, out,
        [&](std::span<const float> in, std::span<std::uint8_t> codes, std::span<float> scale) {
          blockwise::torchao_fp8_quantize_into(in, block, fp8::torch_eager<fp8::E4M3FN>(), codes, scale);
        },
        [&](std::span<const std::uint8_t> codes, std::span<const float> scale, std::span<float> to) {
          blockwise::torchao_fp8_dequantize_into(codes, scale, block, blockwise::NanWidening::Payload, to);
        });
  };
  f.round_trip_blocks = any_power_of_two();
  f.round_trip_stores = {"codes", "scale"};  // OptimStateFp8: codes, scale
  f.round_trip_pads = true;
  f.whole_blocks = true;
  f.battery_block_sizes = {1, 33, 4096};  // as torchao's codebook states
  return f;
}

// ---- plain per-block E4M3 ----------------------------------------------------------------------

FormatSpec fp8_perblock_format() {
  FormatSpec f;
  f.name = "fp8.perblock.e4m3";
  f.description = "plain per-block E4M3 (no library's state; the baseline the audit compares with): per block (partial "
                  "tail allowed) scale = amax / 448 ignoring NaN, codes = e4m3fn(x / scale) round to nearest even with "
                  "CUDA's satfinite, an all-zero block stays zero; codes, scale, dequant";
  f.provenance = "lowbit (docs/formats/fp8.md, Per-block E4M3); the cast is CUDA 12/13 cuda_fp8.hpp "
                 "__nv_cvt_float_to_fp8(__NV_SATFINITE, __NV_E4M3)";
  f.default_params = {{"block_size", 128}};
  f.inputs = {f32_input()};
  f.outputs = blockwise_outputs(DType::F8_E4M3);
  f.run = [](const Case& in, const nlohmann::json& p, int threads) {
    const std::size_t block = block_size_from(p);
    const std::vector<float> x = in.require("input").f32();
    threads = worth_threads(x.size(), threads);
    const auto quantized = blockwise::fp8_perblock_quantize(x, block, threads);
    return std::vector<Tensor>{
        Tensor::from_bytes("codes", DType::F8_E4M3, flat_shape(quantized.codes.size()), quantized.codes),
        f32_tensor("scale", quantized.scale),
        f32_tensor("dequant", blockwise::fp8_perblock_dequantize(quantized.codes, quantized.scale, block, threads))};
  };
  f.explain = [](const Case& e, const Case& a, const std::string& tensor) {
    return fp8_state_explainer(e, a, tensor, fp8::cuda_satfinite());
  };
  f.edge_inputs = [](const nlohmann::json& p) { return codebook_edges(fp8_grid_over_absmax(fp8::FormatId::E4M3FN), block_size_from(p)); };
  f.dequantize_reads = {"codes", "scale"};
  f.dequantize = [](const Case& c, const nlohmann::json& p) {
    return blockwise::fp8_perblock_dequantize(c.require("codes").u8(), c.require("scale").f32(), block_size_from(p));
  };
  f.round_trip = [](std::span<const float> x, std::size_t block, bool, std::span<float> out) {
    blockwise_round_trip(
        x, block, false, out,
        [&](std::span<const float> in, std::span<std::uint8_t> codes, std::span<float> scale) {
          blockwise::fp8_perblock_quantize_into(in, block, codes, scale);
        },
        [&](std::span<const std::uint8_t> codes, std::span<const float> scale, std::span<float> to) {
          blockwise::fp8_perblock_dequantize_into(codes, scale, block, to);
        });
  };
  f.round_trip_blocks = any_power_of_two();
  f.round_trip_stores = {"codes", "scale"};
  f.battery_block_sizes = {1, 33, 4096};  // any block size, a partial tail allowed (at 33: 4096 = 124 · 33 + 4)
  return f;
}

// ---- bitsandbytes block-wise 8-bit --------------------------------------------------------------

blockwise::BnbBackend backend_from(const nlohmann::json& p) {
  const std::string b = p.at("backend").get<std::string>();
  if (b == "cpu") return blockwise::BnbBackend::CpuLut;
  if (b == "cuda-ieee") return blockwise::BnbBackend::CudaIeee;
  if (b == "default") return blockwise::BnbBackend::Default;
  throw std::runtime_error("backend must be cpu, cuda-ieee or default (got '" + b + "')");
}


// torch's f16 -> float32 copy (A.float() in the default back end), as observed with torch 2.15 at
// CPU capabilities AVX-512, AVX2 and default alike (every n from 1 to 70): the elements its vector
// loop converts (8 lanes, at AVX-512 too) get their NaNs quieted with sign and payload kept
// (0x7C01 -> 0x7FC02000); the last n % 8, which the scalar tail converts, get 0x7FFFFFFF for every
// NaN. Only the back end's NaN absmax sees these bits.
void torch_f16_nan_bits(std::vector<float>& x) {
  constexpr std::size_t lanes = 8;
  const std::size_t vector_part = x.size() - x.size() % lanes;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isnan(x[i])) x[i] = float_from_bits(i < vector_part ? (bits_of(x[i]) | 0x00400000u) : 0x7FFFFFFFu);
}

// bitsandbytes' dequantize_blockwise returns the input's dtype (functional.py: QuantState.dtype): the
// float32 q[code] * absmax rounded by the back end's conversion. cpu: the native library's
// float_to_bf16 and F16C float_to_fp16; default: torch's .to(dtype): bf16 vectorized (AVX2, AVX-512:
// a NaN becomes 0xFFFF) or scalar (capability default: c10's 0x7FC0), f16 by F16C at both
// capabilities observed. docs/formats/bnb-blockwise8.md, "16-bit inputs".
Tensor bnb_dequant_tensor(const std::vector<float>& d, const Tensor& input, blockwise::BnbBackend backend,
                          bool vectorized) {
  if (input.dtype == DType::F32) return f32_tensor("dequant", d);
  std::vector<std::uint8_t> bytes(d.size() * 2);
  for (std::size_t i = 0; i < d.size(); ++i) {
    std::uint16_t h = 0;
    if (input.dtype == DType::BF16)
      h = backend == blockwise::BnbBackend::CpuLut ? bnb_cpu_bf16(d[i])
          : vectorized                             ? bf16_round_nearest_even(d[i])
                                                   : bf16_round_nearest_even_c10(d[i]);
    else  // torch converts with F16C at every capability observed (AVX2, default), as the native library does
      h = f16_round_nearest_even(d[i]);
    bytes[2 * i] = static_cast<std::uint8_t>(h);
    bytes[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
  }
  return Tensor::from_bytes("dequant", input.dtype, flat_shape(d.size()), bytes);
}

FormatSpec bnb_blockwise_format(const std::string& variant, const std::string& default_map) {
  FormatSpec f;
  f.name = "bnb.blockwise8." + variant;
  f.description = "bitsandbytes quantize_blockwise / dequantize_blockwise with a " + variant +
                  " qmap: absmax per block (partial tail allowed), y = x * (1 / absmax); the backend parameter picks "
                  "the CPU lookup table (cpu), the CUDA kernel's rule in IEEE arithmetic (cuda-ieee) or the pure-PyTorch "
                  "back end (default); codes, scale (the absmax), dequant";
  f.provenance = "bitsandbytes 0.50 csrc/cpu_ops.cpp quantize_cpu_impl, dequantizeBlockwise8bitCpu; csrc/kernels.cu "
                 "kQuantizeBlockwise; backends/default/ops.py";
  // cpu_capability: torch's, for the pure-PyTorch back end's NaN absmax of a tail block. map: the
  // table (bnb.qmap's names) that golden generate and verify give a case as its qmap input; the
  // reference quantizes with the case's qmap, whatever map says (a golden case's is the library's)
  f.default_params = {{"block_size", 4096}, {"backend", "cpu"}, {"cpu_capability", "avx2"}, {"map", default_map}};
  // quantize_blockwise takes float32, bf16 and f16 (backends/cpu/ops.py: one native entry point each;
  // backends/default/ops.py: A.float()); the dequant comes back in the input's dtype
  const std::vector<DType> floats = {DType::F32, DType::BF16, DType::F16};
  f.inputs = {{"input", {.dtypes = floats}}, qmap_input(256)};
  f.outputs = blockwise_outputs(DType::U8);
  f.outputs[2].schema.dtypes = floats;
  f.outputs[2].schema.dtype_of = "input";
  f.run = [](const Case& in, const nlohmann::json& p, int threads) {
    const std::size_t block = block_size_from(p);
    const Tensor& input = in.require("input");
    const blockwise::BnbBackend backend = backend_from(p);
    if (backend == blockwise::BnbBackend::CudaIeee && input.dtype != DType::F32)
      throw std::runtime_error("backend cuda-ieee takes F32 input only (the CUDA kernel's 16-bit loads and stores are "
                               "not modelled); got " + std::string(dtype_name(input.dtype)));
    // bitsandbytes 0.50.2 backends/cuda/ops.py quantize_blockwise: "blocksize not in (64, 128, 256, 512,
    // 1024, 2048, 4096)" raises (the kernels are compiled for those only)
    if (backend == blockwise::BnbBackend::CudaIeee && (block < 64 || block > 4096 || !std::has_single_bit(block)))
      throw std::runtime_error("backend cuda-ieee takes block sizes 64, 128, 256, 512, 1024, 2048 and 4096 only "
                               "(bitsandbytes' CUDA back end); got " + std::to_string(block));
    // widening bf16 and f16 is exact; a NaN's bits reach only the default back end's absmax
    std::vector<float> x = optimizer_io::widened(input);
    if (backend == blockwise::BnbBackend::Default && input.dtype == DType::F16) torch_f16_nan_bits(x);
    const std::vector<float> q = in.require("qmap").f32();
    if (q.size() != 256) throw std::runtime_error("qmap must have 256 entries");
    threads = worth_threads(x.size(), threads);
    const auto quantized = blockwise::bnb_quantize(x, q, block, backend, vectorized_from(p), threads);
    return std::vector<Tensor>{
        u8_tensor("codes", quantized.codes), f32_tensor("scale", quantized.scale),
        bnb_dequant_tensor(blockwise::bnb_dequantize(quantized.codes, quantized.scale, q, block, threads), input, backend,
                           vectorized_from(p))};
  };
  // the variant checked is a division by the absmax, with the back end's own search (the pure-PyTorch
  // back end mixes both arithmetics by block: no variant there)
  f.explain = [](const Case& e, const Case& a, const std::string& tensor) {
    const nlohmann::json p = resolve_params(*find_format(e.format()), e.params());
    const std::vector<float> q = e.find("qmap") ? e.find("qmap")->f32() : std::vector<float>{};
    Arithmetic arith{times_reciprocal, divide, "division", {}, {}};
    if (q.size() == 256 && backend_from(p) == blockwise::BnbBackend::CpuLut)
      arith.search = [lut = std::make_shared<const codebook::BnbCpuLut>(q)](float y) { return (*lut)(y); };
    else if (q.size() == 256 && backend_from(p) == blockwise::BnbBackend::CudaIeee)
      arith.search = [q](float y) { return codebook::bnb_cuda_search(y, q); };
    return codebook_explainer(e, a, tensor, std::move(arith));
  };
  const auto map_of = [default_map](const nlohmann::json& p) {
    return bnb_table({{"map", p.value("map", default_map)}, {"linspace", "fma"}});
  };
  f.auxiliary_inputs = [map_of](const nlohmann::json& p) { return std::vector<Tensor>{f32_tensor("qmap", map_of(p))}; };
  f.edge_inputs = [map_of](const nlohmann::json& p) { return codebook_edges(map_of(p), block_size_from(p)); };
  f.table_edge_inputs = [map_of](const nlohmann::json& p) { return bnb_cpu_table_edges(map_of(p), block_size_from(p)); };
  // the smallest block size bitsandbytes' CUDA back end takes (64) and its optimizers' (256); 4096, the
  // default, is its largest. The CPU and default back ends take any positive size (backends/cpu/ops.py,
  // backends/default/ops.py; a partial tail allowed): 33, neither a power of two nor even, with a tail
  // of 4 in the random input (4096 = 124 · 33 + 4); backend cuda-ieee refuses it (run above)
  f.battery_block_sizes = {33, 64, 256};
  // bitsandbytes' CPU library splits its blocks over OpenMP threads at any size (0.50 csrc/cpu_ops.cpp
  // quantize_cpu_impl: "omp parallel for" over blocks, each block whole in one thread); a kernel of its
  // own that splits the elements (not the blocks) above some size shows it only there: 2^20 + 1000
  // elements, above the usual thresholds (torch's grain of 32 768, the reference's 2^16), a tail of 1000
  f.battery_large_count = (std::size_t{1} << 20) + 1000;
  // bitsandbytes' 8-bit optimizers keep their second moments with the unsigned dynamic map
  // (optim/optimizer.py: create_dynamic_map(signed=False)); the linear map's unsigned form
  // (functional.py create_linear_map(signed=False): linspace(0, 1, 256)) is the one whose q[0] is not
  // -1, where a table built after bitsandbytes <= 0.49's code[0] = -1 differs (signed: q[0] is -1)
  f.battery_params.push_back({{"map", default_map == "dynamic_signed" ? "dynamic_unsigned" : "linear_unsigned"}});
  f.dequantize_reads = {"codes", "scale", "qmap"};
  f.dequantize = [](const Case& c, const nlohmann::json& p) {
    return blockwise::bnb_dequantize(c.require("codes").u8(), c.require("scale").f32(), c.require("qmap").f32(),
                                     block_size_from(p));
  };
  // quantize_blockwise's default code (its qmap) and the default CPU back end
  f.round_trip = [table = bnb_table({{"map", default_map}, {"linspace", "fma"}})](std::span<const float> x,
                                                                                 std::size_t block, bool,
                                                                                 std::span<float> out) {
    blockwise_round_trip(
        x, block, false, out,
        [&](std::span<const float> in, std::span<std::uint8_t> codes, std::span<float> scale) {
          blockwise::bnb_quantize_into(in, table, block, blockwise::BnbBackend::CpuLut, true, codes, scale);
        },
        [&](std::span<const std::uint8_t> codes, std::span<const float> scale, std::span<float> to) {
          blockwise::bnb_dequantize_into(codes, scale, table, block, to);
        });
  };
  f.round_trip_blocks = {64, 4096, true, "n/a (bitsandbytes block sizes are 64..4096)"};
  f.round_trip_stores = {"codes", "scale", "qmap"};  // QuantState: the codes, absmax and code (qmap)
  return f;
}

}  // namespace

// Inputs at the codebook's boundaries: a block whose absmax is 1 (so y = x exactly, for the
// division and for the reciprocal alike) holding every code value, every midpoint and the binary32
// neighbours of each midpoint, both signs, zeros and subnormals.
std::vector<float> codebook_edges(const std::vector<float>& q, std::size_t block_size) {
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < q.size(); ++i) {
    v.push_back(q[i]);
    if (i + 1 == q.size()) break;
    const float mid = (q[i] + q[i + 1]) * 0.5f;
    v.push_back(std::nextafter(mid, -inf));
    v.push_back(mid);
    v.push_back(std::nextafter(mid, inf));
  }
  for (float s : {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::min(), 1e-30f})
    v.push_back(s);
  // every block gets its own absmax of exactly 1 as the first element
  std::vector<float> out;
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (out.size() % block_size == 0) out.push_back(1.0f);
    out.push_back(v[k]);
  }
  while (out.size() % block_size) out.push_back(0.0f);
  return out;
}

// The FP8 grid in units of a block's absmax (every finite code's value / the largest, 448 or 57344,
// ascending), for the block-wise FP8 formats whose scale is amax / that largest value (torchao.fp8,
// fp8.perblock.e4m3, COAT's group and block quantizers): its midpoints are the cast's decision
// thresholds in a block led by an absmax of 1, where they lie near x / scale = a midpoint; scaled-edges
// moves them under other scales, where x / s and x * (1 / s) disagree.
std::vector<float> fp8_grid_over_absmax(fp8::FormatId id) {
  return fp8::dispatch(id, [](auto traits) {
    using F = decltype(traits);
    const float max = fp8::decode<F>(F::max_finite);
    std::vector<float> q;
    for (unsigned c = F::max_finite; c >= 1; --c) q.push_back(-fp8::decode<F>(static_cast<std::uint8_t>(c)) / max);
    for (unsigned c = 0; c <= F::max_finite; ++c) q.push_back(fp8::decode<F>(static_cast<std::uint8_t>(c)) / max);
    return q;
  });
}

void register_codebook_formats(std::vector<FormatSpec>& out) {
  out.push_back(table_format("torchao.qmap", "torchao 0.18 optim/quant_utils.py create_dynamic_map; subclass_4bit.py", "signed8",
                             torchao_table));
  out.push_back(table_format("bnb.qmap", "bitsandbytes 0.50 functional.py create_dynamic_map, create_linear_map", "dynamic_signed",
                             bnb_table));
  for (int bits : {8, 4})
    for (bool is_signed : {true, false}) out.push_back(torchao_codebook_format(bits, is_signed));
  out.push_back(torchao_fp8_format());
  out.push_back(fp8_perblock_format());
  out.push_back(bnb_blockwise_format("dynamic", "dynamic_signed"));
  out.push_back(bnb_blockwise_format("linear", "linear_signed"));
}

}  // namespace lowbit
