#include "case_convert.hpp"

#include <nanobind/stl/string.h>

#include <cstring>
#include <limits>
#include <vector>

namespace lowbit::python {

namespace {

Tensor tensor_from_python(const nb::handle& item, const std::string& origin) {
  const auto t = nb::cast<nb::tuple>(item);
  if (t.size() != 4) throw CaseError(origin + ": a tensor is (name, dtype, shape, data)");
  Tensor out;
  out.name = nb::cast<std::string>(t[0]);
  const std::string dtype = nb::cast<std::string>(t[1]);
  const auto parsed = parse_dtype(dtype);
  if (!parsed) throw CaseError(origin + ": tensor '" + out.name + "': unknown dtype '" + dtype + "'");
  out.dtype = *parsed;
  std::uint64_t count = 1;
  for (nb::handle extent : nb::cast<nb::list>(t[2])) {
    const auto e = nb::cast<std::int64_t>(extent);
    if (e < 0) throw CaseError(origin + ": tensor '" + out.name + "': negative extent");
    if (e != 0 && count > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(e))
      throw CaseError(origin + ": tensor '" + out.name + "': element count overflows");
    count *= static_cast<std::uint64_t>(e);
    out.shape.push_back(e);
  }
  const auto data = nb::cast<Bytes>(t[3]);
  if (data.size() / dtype_size(out.dtype) != count || data.size() % dtype_size(out.dtype) != 0)
    throw CaseError(origin + ": tensor '" + out.name + "': " + std::to_string(data.size()) + " bytes for " +
                    std::to_string(count) + " elements of " + dtype);
  out.bytes.assign(data.data(), data.data() + data.size());
  return out;
}

}  // namespace

Case case_from_python(const nb::handle& tensors, const nb::handle& metadata, const std::string& origin) {
  Case c;
  c.origin = origin;
  for (nb::handle item : nb::cast<nb::list>(tensors)) {
    Tensor t = tensor_from_python(item, origin);
    if (c.find(t.name)) throw CaseError(origin + ": tensor '" + t.name + "' given twice");
    c.add(std::move(t));
  }
  for (auto [k, v] : nb::cast<nb::dict>(metadata)) c.metadata[nb::cast<std::string>(k)] = nb::cast<std::string>(v);
  return c;
}

OwnedBytes owned_bytes(std::span<const std::uint8_t> bytes) {
  auto* heap = new std::vector<std::uint8_t>(bytes.begin(), bytes.end());
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<std::uint8_t>*>(p); });
  return OwnedBytes(heap->data(), {heap->size()}, owner);
}

nb::ndarray<nb::numpy, float, nb::ndim<1>> owned_floats(std::vector<float> values) {
  auto* heap = new std::vector<float>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return nb::ndarray<nb::numpy, float, nb::ndim<1>>(heap->data(), {heap->size()}, owner);
}

nb::tuple case_to_python(const Case& c) {
  nb::list tensors;
  for (const Tensor& t : c.tensors()) {
    nb::list shape;
    for (std::int64_t e : t.shape) shape.append(e);
    tensors.append(nb::make_tuple(t.name, std::string(dtype_name(t.dtype)), shape, owned_bytes(t.bytes)));
  }
  nb::dict metadata;
  for (const auto& [k, v] : c.metadata) metadata[nb::str(k.c_str())] = nb::str(v.c_str());
  return nb::make_tuple(tensors, metadata, c.origin);
}

}  // namespace lowbit::python
