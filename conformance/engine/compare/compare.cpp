#include "lowbit/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "lowbit/float_bits.hpp"
#include "lowbit/fp8.hpp"

namespace lowbit {

namespace {

constexpr std::uint64_t kNoDistance = std::numeric_limits<std::uint64_t>::max();  // a NaN is involved

bool is_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

std::uint64_t float_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kNoDistance;
  return ulp_distance(a, b);
}

// Values and distances of one mismatching element, by what the dtype holds.
void measure(const Tensor& t, std::uint64_t e, std::uint64_t a, MismatchRecord& m) {
  if (const auto fp8_format = fp8::format_of_dtype(t.dtype)) {
    const auto ec = static_cast<std::uint8_t>(e), ac = static_cast<std::uint8_t>(a);
    const float ev = fp8::decode(*fp8_format, ec), av = fp8::decode(*fp8_format, ac);
    m.expected_value = ev;
    m.actual_value = av;
    m.ulp_distance = float_distance(ev, av);
    m.code_distance = std::isnan(ev) || std::isnan(av)
                          ? kNoDistance
                          : static_cast<std::uint64_t>(std::abs(fp8::code_ordinal(ec) - fp8::code_ordinal(ac)));
  } else if (is_float(t.dtype)) {
    const float ev = float_of_bits(t.dtype, e), av = float_of_bits(t.dtype, a);
    m.expected_value = ev;
    m.actual_value = av;
    m.ulp_distance = float_distance(ev, av);
  } else {  // U8 codebook indices and integers: code order is numeric order
    auto as_signed = [&](std::uint64_t v) -> std::int64_t {
      if (t.dtype == DType::I32) return static_cast<std::int32_t>(v);
      return static_cast<std::int64_t>(v);
    };
    const std::int64_t ev = as_signed(e), av = as_signed(a);
    m.expected_value = static_cast<double>(ev);
    m.actual_value = static_cast<double>(av);
    // in uint64: ev - av overflows int64 for far-apart I64 values (the distance itself always fits)
    m.code_distance = ev > av ? static_cast<std::uint64_t>(ev) - static_cast<std::uint64_t>(av)
                              : static_cast<std::uint64_t>(av) - static_cast<std::uint64_t>(ev);
  }
}

bool allowed_by(const TolerancePolicy& p, const Explanation& why) {
  if (p.strict) return false;
  switch (why.cls) {
    case MismatchClass::Tie: return p.allow_ties;
    case MismatchClass::NearBoundary: return why.boundary_ulps <= p.boundary_ulps;
    case MismatchClass::ScalePropagated: return p.allow_scale_propagated;
    // the codes element it repeats is judged in the codes tensor of the same case: no second verdict
    case MismatchClass::FollowsCodes: return true;
    case MismatchClass::LibraryRounding: return p.allow_library_rounding;
    case MismatchClass::ArithmeticVariant:
    case MismatchClass::FlushedSubnormal:
    case MismatchClass::NanEncoding:
    case MismatchClass::Genuine: return false;
  }
  return false;
}

// For each block of `blocks`, whether an entry of the layout's per-block tensors (scale, expand,
// centre) differs there, so that the block's elements may differ only as a consequence. Empty when
// there is nothing to tell (no per-block tensors, or the actual ones are not comparable).
std::vector<bool> entries_differ(const Layout& layout, const BlockMap& blocks, const std::string& tensor,
                                 const Case& expected, const Case& actual) {
  std::vector<bool> differs;
  for (const std::string& name : layout.scales) {
    const Tensor* e = expected.find(name);
    const Tensor* a = actual.find(name);
    if (!e || !a || e->dtype != a->dtype || e->shape != a->shape) continue;
    if (e->element_count() != blocks.blocks)
      throw CaseError(expected.origin + ": tensor '" + name + "' has " + std::to_string(e->element_count()) +
                      " elements, but '" + tensor + "' has " + std::to_string(blocks.blocks) + " blocks (" +
                      blocks.description + ")");
    differs.resize(blocks.blocks);
    for (std::size_t b = 0; b < blocks.blocks; ++b)
      if (e->bits_at(b) != a->bits_at(b)) differs[b] = true;
  }
  return differs;
}

}  // namespace

ComparisonReport compare_cases(const Case& expected, const Case& actual, const TolerancePolicy& policy,
                               std::size_t max_listed) {
  ComparisonReport r;
  r.expected_origin = expected.origin;
  r.actual_origin = actual.origin;
  r.format = expected.format();
  r.policy = policy;
  const FormatSpec* spec = find_format(r.format);
  if (expected.tensors().empty()) throw CaseError(expected.origin + ": the expected case holds no tensors: nothing to compare");
  // The expected case is held to its format's schema (the tensors it has); the explainers read its
  // inputs and tables, so they run only on a complete one.
  if (spec) validate_case(*spec, expected, CaseScope::Present);
  const bool explainable = spec && spec->explain && missing_tensors(*spec, expected, CaseScope::Complete).empty();

  // per per-block tensor (scale, expand, centre): the scale-propagated mismatches of each block, so
  // that each differing entry is reported once as the root cause with their count
  std::unordered_map<std::string, std::vector<std::uint64_t>> caused;
  for (const Tensor& t : expected.tensors()) {
    const TensorSpec* decl = spec ? spec->tensor(t.name) : nullptr;
    const BlockMap map = block_map(expected, t);
    TensorComparison tc;
    tc.name = t.name;
    tc.dtype = dtype_name(t.dtype);
    tc.shape = t.shape;
    tc.elements = t.element_count();
    tc.block_size = map.block_elements();
    tc.layout = map.description;
    const Tensor* a = actual.find(t.name);
    if (!a) tc.fault = "missing from the actual case";
    else if (a->dtype != t.dtype) tc.fault = "dtype " + std::string(dtype_name(a->dtype)) + ", expected " + tc.dtype;
    else if (a->shape != t.shape) tc.fault = "shape differs from the expected one";
    if (!tc.fault.empty()) {
      r.conformant = false;
      r.tensors.push_back(std::move(tc));
      continue;
    }
    const std::vector<bool> scale_differs =
        decl ? entries_differ(decl->layout, map, t.name, expected, actual) : std::vector<bool>{};
    std::vector<BlockStats> per_block(map.blocks);
    ElementExplainer explainer;  // made at the tensor's first mismatch that needs one
    bool explainer_made = false;
    // Whole runs of identical bytes are counted at once (memcmp); a run that differs is walked element
    // by element. The same counts and records as an element-wise walk, at memory speed where the
    // tensors agree (verify's 2^24-element cases).
    const std::size_t width = dtype_size(t.dtype);
    const bool contiguous = t.bytes.size() == tc.elements * width && a->bytes.size() == t.bytes.size();
    constexpr std::size_t kRun = 1024;
    for (std::size_t start = 0; start < tc.elements; start += kRun) {
      const std::size_t end = std::min<std::size_t>(tc.elements, start + kRun);
      if (contiguous &&
          std::memcmp(t.bytes.data() + start * width, a->bytes.data() + start * width, (end - start) * width) == 0) {
        tc.identical += end - start;
        continue;
      }
      for (std::size_t i = start; i < end; ++i) {
        const std::uint64_t eb = t.bits_at(i), ab = a->bits_at(i);
        if (eb == ab) {
          ++tc.identical;
          continue;
        }
        MismatchRecord m;
        m.index = i;
        m.block = map.block_of(i);
        m.expected_bits = eb;
        m.actual_bits = ab;
        measure(t, eb, ab, m);
        // a differing block scale is the root cause of whatever else differs in its block; NaN against
        // NaN is an encoding difference, never a numeric one
        if (!scale_differs.empty() && scale_differs[m.block]) m.why.cls = MismatchClass::ScalePropagated;
        else if (std::isnan(m.expected_value) && std::isnan(m.actual_value)) m.why.cls = MismatchClass::NanEncoding;
        else {
          if (explainable) {
            if (!explainer_made) {
              explainer = spec->explain(expected, actual, t.name);
              explainer_made = true;
            }
            if (explainer) m.why = explainer(i);
          }
          // what the explainer leaves unexplained may still be a flushed subnormal of the tensor's own dtype
          if (m.why.cls == MismatchClass::Genuine && !m.why.from_code && is_subnormal_bits(t.dtype, eb) &&
              is_zero_bits(t.dtype, ab))
            m.why.cls = MismatchClass::FlushedSubnormal;
        }
        // near a boundary only within the policy's budget: farther off, the input was not near enough
        // for a last-bit difference to explain the code (the distance stays in the record)
        if (m.why.cls == MismatchClass::NearBoundary && m.why.boundary_ulps > tc.max_boundary_ulps)
          tc.max_boundary_ulps = m.why.boundary_ulps;
        if (m.why.cls == MismatchClass::NearBoundary && m.why.boundary_ulps > policy.boundary_ulps)
          m.why.cls = MismatchClass::Genuine;
        m.allowed = allowed_by(policy, m.why);
        if (m.why.cls == MismatchClass::ScalePropagated)
          for (const std::string& scale : decl->layout.scales) {
            std::vector<std::uint64_t>& counts = caused[scale];
            counts.resize(map.blocks);
            ++counts[m.block];
          }

        ++tc.mismatches;
        tc.allowed += m.allowed;
        ++tc.by_class[static_cast<std::size_t>(m.why.cls)];
        auto grow = [](std::uint64_t& slot, std::uint64_t v) {
          if (v != kNoDistance && v > slot) slot = v;
        };
        grow(tc.max_code_distance, m.code_distance);
        grow(tc.max_ulp_distance, m.ulp_distance);
        BlockStats& b = per_block[m.block];
        b.index = m.block;
        ++b.mismatches;
        grow(b.max_code_distance, m.code_distance);
        grow(b.max_ulp_distance, m.ulp_distance);
        if (tc.first_mismatches.size() < max_listed) tc.first_mismatches.push_back(m);
      }
    }
    for (const BlockStats& b : per_block)
      if (b.mismatches > tc.worst_block.mismatches) tc.worst_block = b;
    if (tc.mismatches > tc.allowed) r.conformant = false;
    r.tensors.push_back(std::move(tc));
  }
  for (TensorComparison& tc : r.tensors) {
    const auto found = caused.find(tc.name);
    if (found == caused.end()) continue;
    for (std::uint64_t n : found->second) tc.propagated += n;
    for (MismatchRecord& m : tc.first_mismatches)
      if (m.index < found->second.size()) m.propagated = found->second[m.index];  // entry j is block j
  }
  for (const Tensor& t : actual.tensors())
    if (!expected.find(t.name)) r.extra_in_actual.push_back(t.name);
  return r;
}

}  // namespace lowbit
