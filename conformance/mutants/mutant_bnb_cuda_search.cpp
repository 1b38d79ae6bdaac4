// Bug class: bitsandbytes' CUDA kernel's search (bracket, midpoint in float, ties to the even index)
// standing in for its CPU lookup table (a 65536-entry table indexed by a rounded y): a kernel written
// from kernels.cu run against the CPU back end; codes differ wherever the table's grid and the
// midpoints disagree. Such a kernel is kernels.cu's whole block: its absmax too (fmaxf from -FLT_MAX,
// which an all-NaN block keeps, where the CPU back end stores 0), stored as the scale its dequant uses,
// and its block sizes: kernels.cu is compiled for 64 to 4096 only, so the kernel refuses the battery's
// run at 33 (an error status: that case FAILED), as bitsandbytes' CUDA back end raises.
#include <bit>
#include <stdexcept>
#include <string>

#include "lowbit/blockwise.hpp"
#include "mutant_plugin.hpp"

namespace mutant {
const char* const kFormat = "bnb.blockwise8.dynamic";
const char* const kBug = "cuda-search-instead-of-cpu-table";

void mutate(lowbit::Case& done, const nlohmann::json& params) {
  if (params.at("backend").get<std::string>() != "cpu") return;  // the bug is about the CPU path only
  const auto block = params.at("block_size").get<std::size_t>();
  if (block < 64 || block > 4096 || !std::has_single_bit(block))
    throw std::invalid_argument("invalid blocksize " + std::to_string(block) + " (kernels.cu: 64 to 4096, powers of two)");
  const std::vector<float> x = done.require("input").f32(), qmap = done.require("qmap").f32();
  const auto q = lowbit::blockwise::bnb_quantize(x, qmap, block, lowbit::blockwise::BnbBackend::CudaIeee);
  const lowbit::Tensor& old = done.require("codes");
  const std::vector<std::int64_t> shape = old.shape, dequant_shape = done.require("dequant").shape,
                                  scale_shape = done.require("scale").shape;
  done.add(lowbit::Tensor::from_bytes("codes", old.dtype, shape, q.codes));
  done.add(lowbit::Tensor::from_f32("scale", scale_shape, q.scale));
  done.add(lowbit::Tensor::from_f32("dequant", dequant_shape, lowbit::blockwise::bnb_dequantize(q.codes, q.scale, qmap, block)));
}
}  // namespace mutant
