// The audit's bits per element (audit_storage.hpp), read off the registry: every stored tensor's
// element count follows its shape rule back to the quantized tensor, the one with no relation.
#include "lowbit/audit_storage.hpp"

#include <stdexcept>

#include "lowbit/case.hpp"
#include "lowbit/layout.hpp"
#include "lowbit/schema.hpp"

namespace lowbit::audit {

namespace {

struct Sizer {
  const FormatSpec& f;
  nlohmann::json params;
  std::uint64_t root;  // the quantized tensor's stored elements (with a padded tail)
  int depth = 0;

  const TensorSpec& declared(const std::string& name) const {
    const TensorSpec* t = f.tensor(name);
    if (!t) throw std::logic_error(f.name + ": stored tensor '" + name + "' is not declared");
    return *t;
  }

  std::uint64_t elements(const std::string& name) {
    if (++depth > 16) throw std::logic_error(f.name + ": the shape relations of '" + name + "' form a cycle");
    const TensorSpec& t = declared(name);
    const ShapeRule& rule = t.schema.shape;
    std::uint64_t count = 0;
    switch (rule.kind) {
      case ShapeRule::Kind::Any: count = root; break;  // related to nothing: the quantized tensor itself
      case ShapeRule::Kind::Scalar: count = 1; break;
      case ShapeRule::Kind::Entries: count = rule.entries(params); break;
      case ShapeRule::Kind::SameShape:
      case ShapeRule::Kind::SameCount:
      case ShapeRule::Kind::Transposed: count = elements(rule.of); break;
      case ShapeRule::Kind::Packed: count = (elements(rule.of) + 1) / 2; break;
      case ShapeRule::Kind::BlockEntries: {
        const std::uint64_t of = elements(rule.of);
        const Layout& layout = declared(rule.of).layout;
        if (layout.matrix) throw std::logic_error(f.name + ": '" + rule.of + "' is blocked as a matrix; the audit's tensors are flat");
        count = resolve_layout(layout, {static_cast<std::int64_t>(of)}, params).blocks;
        break;
      }
    }
    --depth;
    return count;
  }
};

}  // namespace

std::uint64_t StoredTensor::bits() const { return elements * dtype_size(dtype) * 8; }

Storage storage(const FormatSpec& f, std::size_t n, std::size_t block_size) {
  if (!f.round_trip) throw std::invalid_argument("format " + f.name + " has no round trip");
  if (const std::string why = f.round_trip_blocks.refusal(block_size); !why.empty())
    throw std::invalid_argument(f.name + " at block size " + std::to_string(block_size) + ": " + why);
  if (f.round_trip_stores.empty()) throw std::logic_error(f.name + ": the registration names no stored tensor");
  nlohmann::json params = resolve_params(f, nlohmann::json::object());
  // the round trip's block size is the format's block_size parameter; without one its blocks are fixed
  if (params.contains("block_size")) params["block_size"] = block_size;
  const std::uint64_t padded = f.round_trip_pads ? (n + block_size - 1) / block_size * block_size : n;
  Sizer sizer{f, params, padded};
  Storage s;
  s.n = n;
  for (const std::string& name : f.round_trip_stores) {
    const Schema& schema = sizer.declared(name).schema;
    if (schema.dtypes.size() != 1)
      throw std::logic_error(f.name + ": stored tensor '" + name + "' must declare exactly one dtype");
    StoredTensor t{name, schema.dtypes.front(), sizer.elements(name)};
    s.bits += t.bits();
    s.tensors.push_back(std::move(t));
  }
  s.bits_per_element = n ? static_cast<double>(s.bits) / static_cast<double>(n) : 0.0;
  return s;
}

}  // namespace lowbit::audit
