#pragma once
// The element types a case file can hold, by their safetensors names (case.hpp reads and writes
// them). A header of its own so that the arithmetic (fp8.hpp's traits name the dtype of their codes)
// needs nothing from the case engine.

namespace lowbit {

enum class DType { F32, F16, BF16, U8, I32, I64, F8_E4M3, F8_E5M2 };

}  // namespace lowbit
