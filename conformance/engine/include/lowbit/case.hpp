#pragma once
// A Case: named tensors (dtype, shape, little-endian bytes) plus string metadata (format, params as
// JSON, source, function, seed, generator), stored as one safetensors file. Reading a file is a
// security boundary: every size, offset and name is validated before it is trusted, and any fault
// is a CaseError whose message names the file and the fault.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lowbit/dtype.hpp"

namespace lowbit {

std::string_view dtype_name(DType d);                     // safetensors spelling: "F32", "F8_E4M3", ...
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType d);
std::string shape_text(const std::vector<std::int64_t>& shape);  // "[2, 3]", for messages and listings

// The value of a floating-point element (F32, F16, BF16) from its bit pattern; throws for other dtypes.
float float_of_bits(DType d, std::uint64_t bits);

struct CaseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // little-endian element data, element_count() * dtype_size

  std::uint64_t element_count() const;

  // Typed copies of the data; each checks that the dtype has that element size and kind.
  std::vector<float> f32() const;
  std::vector<std::uint8_t> u8() const;  // U8, F8_E4M3 and F8_E5M2 (codes)
  std::vector<std::uint16_t> u16() const;  // F16 and BF16 bit patterns
  std::vector<std::int32_t> i32() const;
  std::vector<std::int64_t> i64() const;
  // The element at index i widened to float (F32, F16, BF16) for reports; throws for other dtypes.
  float value_as_float(std::size_t i) const;
  // The raw bit pattern of element i (1, 2, 4 or 8 bytes, zero-extended).
  std::uint64_t bits_at(std::size_t i) const;

  static Tensor from_f32(std::string name, std::vector<std::int64_t> shape, std::span<const float> data);
  static Tensor from_bytes(std::string name, DType dtype, std::vector<std::int64_t> shape,
                           std::span<const std::uint8_t> data);
  static Tensor from_i64(std::string name, std::vector<std::int64_t> shape, std::span<const std::int64_t> data);
};

// Tensors by name: a transparent hash, so that a std::string_view looks a name up without a copy.
struct TensorNameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
};

class Case {
 public:
  std::map<std::string, std::string> metadata;  // safetensors __metadata__: strings only

  // The tensors in the order they were added (a file's in its header's order, which is name order).
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Look-ups by name through the case's own index: O(1), so that a case of thousands of tensors is
  // not quadratic for the comparison, the schema check or a reader of each tensor's side tables.
  const Tensor* find(std::string_view name) const;
  // For changing a tensor's dtype, shape or bytes in place; its name is the index's key and must
  // not change (remove it and add it under the new name).
  Tensor* find(std::string_view name);
  // Throws CaseError("<origin>: required tensor 'name' is missing").
  const Tensor& require(std::string_view name) const;
  void add(Tensor t);  // replaces a tensor of the same name, in its place
  bool remove(std::string_view name);  // false when the case holds no tensor of that name
  std::vector<Tensor> take_tensors();  // moves every tensor out, leaving the case without tensors

  std::string meta(const std::string& key, const std::string& fallback = "") const;
  std::string format() const { return meta("format"); }
  nlohmann::json params() const;  // metadata "params" parsed; {} when absent; CaseError when not JSON

  std::string origin = "<memory>";  // the file it came from, for error messages

 private:
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, std::size_t, TensorNameHash, std::equal_to<>> index_;  // name -> position
};

// Parse a safetensors image. `origin` names it in error messages.
Case parse_case(std::span<const std::uint8_t> file, const std::string& origin);
Case read_case(const std::string& path);
// The tensors a case file declares (name, dtype, shape; no bytes) and its metadata, from its header
// alone, every field checked as parse_case checks it against the file's size: for limits that must
// hold before a byte of data is read (the 2^28 elements of a file: input).
Case read_case_header(const std::string& path);
// Serialize: tensors in name order, contiguous, header padded with spaces to a multiple of 8 bytes
// (the layout of the reference safetensors writer).
std::vector<std::uint8_t> serialize_case(const Case& c);
// Written to a temporary file and renamed: never a partial file.
void write_case(const std::string& path, const Case& c);

// Whole file contents; CaseError naming the path when it cannot be read.
std::vector<std::uint8_t> read_file_bytes(const std::string& path);

}  // namespace lowbit
