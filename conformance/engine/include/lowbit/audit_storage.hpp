#pragma once
// What a format stores for one tensor quantized by its round trip, and so its bits per element:
// codes, scales and side tensors (tables amortized over the tensor, expansion exponents, centres,
// the zero padding of a partial block), each sized from the tensor's registered schema (its dtype,
// its shape relation to the quantized tensor) and layout (blocks per tensor) at the block size.
// Nothing here knows a format: a format names what it stores (FormatSpec::round_trip_stores).
#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/dtype.hpp"
#include "lowbit/formats.hpp"

namespace lowbit::audit {

struct StoredTensor {
  std::string name;
  DType dtype;
  std::uint64_t elements = 0;
  std::uint64_t bits() const;
};

struct Storage {
  std::size_t n = 0;                  // the quantized tensor's elements (padding not counted)
  std::vector<StoredTensor> tensors;  // in the order of FormatSpec::round_trip_stores
  std::uint64_t bits = 0;             // their sum
  double bits_per_element = 0;        // bits / n (0 when n is 0)
};

// The storage of an n-element tensor quantized by f's round trip at block_size. std::invalid_argument
// when the round trip does not run at that block size; std::logic_error when the registration cannot
// size a stored tensor (undeclared, several dtypes, a shape rule with no element count).
Storage storage(const FormatSpec& f, std::size_t n, std::size_t block_size);

}  // namespace lowbit::audit
