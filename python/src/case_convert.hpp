#pragma once
// Cases across the Python boundary. Python hands a case over as (tensors, metadata, origin): tensors a
// list of (name, dtype, shape, data) with dtype the safetensors name ("F32", "BF16", "F8_E4M3"), shape a
// list of ints and data the element bytes as a 1-D uint8 array (little-endian, C order); metadata a
// dict of strings. The same shape comes back, each data array a NumPy uint8 array that owns a copy.
// The package's Python side (lowbit/_case.py) turns NumPy and DLPack arrays into that shape and back;
// everything else (dtype sizes, shapes against byte counts, the schema) is the engine's to check.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <span>

#include "lowbit/case.hpp"

namespace lowbit::python {

namespace nb = nanobind;

using Bytes = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using OwnedBytes = nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>;

// A case from its Python form; CaseError (naming `origin`) for an unknown dtype, a negative extent or
// a byte count that does not match dtype and shape.
Case case_from_python(const nb::handle& tensors, const nb::handle& metadata, const std::string& origin);
// The Python form of a case: (tensors, metadata, origin).
nb::tuple case_to_python(const Case& c);
// A NumPy uint8 array holding a copy of the bytes.
OwnedBytes owned_bytes(std::span<const std::uint8_t> bytes);
// A NumPy float32 array holding the values.
nb::ndarray<nb::numpy, float, nb::ndim<1>> owned_floats(std::vector<float> values);

}  // namespace lowbit::python
