// Bug class: coat.act.pergroup.transposed's y_t as the transpose of y (its groups along x's rows, N)
// where COAT quantizes x^T with its own 1 x QB groups along M (y_t != y^T), and s_y's entries written
// into s_y_t in their own order (both hold M * N / QB entries).
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "coat.act.pergroup.transposed";
const char* const kBug = "coat-transposed-groups-along-rows";

void mutate(lowbit::Case& done, const nlohmann::json&) {
  using namespace lowbit;
  const Tensor& codes = done.require("codes");
  const std::int64_t m = codes.shape.at(0), n = codes.shape.at(1);
  std::vector<std::uint8_t> t(codes.bytes.size());
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < n; ++c) t[c * m + r] = codes.bytes[r * n + c];
  const Tensor& scale_t = done.require("scale_t");
  Tensor moved = done.require("scale");
  moved.name = "scale_t";
  moved.shape = scale_t.shape;
  done.add(Tensor::from_bytes("codes_t", codes.dtype, done.require("codes_t").shape, t));
  done.add(std::move(moved));
}
}  // namespace mutant
