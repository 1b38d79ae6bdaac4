#pragma once
// The `file:PATH[:TENSOR]` input kind: the user's own tensors from a safetensors file, for golden
// generate, verify and the audit. A quantizer's `input` keeps the tensor's dtype and shape (COAT's
// activation quantizers need rows and columns); an optimizer takes the file's `param` and `grad`
// (the same gradient at every step). The file is parsed as any case file is (every field checked),
// and the chosen tensor is checked again by the format's schema before any arithmetic.
#include <string>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/generators.hpp"

namespace lowbit {

// Whether `text` is a file spec ("file:" and a path).
bool is_file_spec(const std::string& text);

// "file:PATH" or "file:PATH:TENSOR": kind "file", args "path" and, when given, "tensor". The text
// after the last ':' names the tensor unless it holds a '/' (then it is part of the path).
// std::invalid_argument on an empty path or tensor name.
InputSpec parse_file_spec(const std::string& text);

// The whole file, read and parsed (CaseError naming the file on any fault) through the manifest check
// (read_case_guarded: a golden file that disagrees with its MANIFEST.json is refused); first, from
// the header alone, every tensor is held to 2^28 elements (std::invalid_argument naming it).
Case read_file_input(const InputSpec& spec);

// The tensor a quantizer takes: the one named, else the file's only tensor, else its `input`;
// renamed `input`. std::invalid_argument naming the file and its tensors when there is no choice.
Tensor file_input_tensor(const InputSpec& spec);

// The values of that tensor, flattened: F32 as it is, BF16 and F16 widened (exactly); other dtypes
// refused. For the audit and other users of plain values.
std::vector<float> file_input_values(const InputSpec& spec);

}  // namespace lowbit
