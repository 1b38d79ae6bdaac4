#pragma once
// The diagnosis of a kernel that fails verify: the known variants of its format's arithmetic (another
// tie rule, the reciprocal for a division, a flush, double rounding, another NaN rule, another back
// end of the format, ...) run on the inputs of each failing case, and the variant that reproduces the
// kernel's outputs bit for bit on every one of them named, or none. An element's class
// (mismatch.hpp) says what may explain one element; the diagnosis says what explains the kernel.
//
// The variants are written here, from each case's inputs, apart from the reference's code paths
// except where the reference takes the knob itself (a parameter value, fp8's rounding predicate,
// COAT's expansion rule for k and the centre, the slot update and the scalars of bitsandbytes' CUDA
// optimizer launches), and
// apart from the mutants in conformance/mutants/, which are the wrong kernels they must recognise.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"

namespace lowbit {

// One known variant of a format's arithmetic.
struct KnownVariant {
  std::string name;         // "ties-away", "backend=cuda-ieee"
  std::string description;  // "the reference with ties away from zero"
  // This variant's outputs on the inputs of `expected` (a complete case of the format, with the
  // reference's outputs), as that case with its outputs replaced; params are the case's over the
  // format's defaults. nullopt where the variant does not apply to the case.
  std::function<std::optional<Case>(const Case& expected, const nlohmann::json& params)> run;
};

// The variants the diagnosis tries for a format, most specific first (none for a format it knows no
// variant of: the diagnosis then says so).
std::vector<KnownVariant> known_variants(const FormatSpec& f);

// A case the kernel completed and that does not conform: the reference's case and the kernel's.
struct FailingCase {
  const Case* expected = nullptr;
  const Case* actual = nullptr;
};

struct Diagnosis {
  std::size_t cases = 0;         // the failing cases read (those where the kernel completed)
  std::uint64_t mismatches = 0;  // their mismatching output elements
  std::size_t variants_tried = 0;
  // The reference itself reproduces the kernel: the failing cases' expected outputs are golden ones
  // that differ from the reference (a library's rounding, under --strict); no variant is tried.
  bool reference = false;
  // The variants that reproduce every output bit of every failing case, in known_variants' order,
  // with the first one's description
  std::vector<std::string> reproducing;
  // None does, but these reproduce every bit except NaNs of another sign or payload (nan_apart
  // elements, over all cases), the first one's description in `description`
  std::vector<std::string> nan_aside;
  std::uint64_t nan_apart = 0;
  std::string description;
  std::uint64_t reproduced = 0;  // the mismatching elements the named variant reproduces
  // No variant reproduces all: the one that reproduces the most mismatching elements, and how many
  std::string closest, closest_description;
  std::uint64_t closest_reproduced = 0;
  // "diagnosis: behaves as the reference with ties away from zero (ties-away): 2276 of 2276
  // mismatches, 2 failing cases", or "diagnosis: no known variant of fp8.e4m3fn.satfinite (14 tried)
  // reproduces the kernel's outputs; closest ...", or empty when there was nothing to read.
  std::string line;
  nlohmann::json json() const;
};

Diagnosis diagnose(const FormatSpec& f, const std::vector<FailingCase>& failing);

}  // namespace lowbit
