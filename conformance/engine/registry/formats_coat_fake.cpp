// Registry entries of COAT's fake quantization: coat.fake.* (docs/formats/coat-fake.md).
#include <cmath>
#include <stdexcept>

#include "fp8_edges.hpp"
#include "formats_optimizer_io.hpp"
#include "lowbit/coat_fake.hpp"
#include "lowbit/formats.hpp"

namespace lowbit {

namespace {

using namespace coat_fake;

fp8::FormatId fp8_of(const nlohmann::json& p) { return fp8::format_from_param(p.at("fp8").get<std::string>(), "fp8"); }

Model model_of(const nlohmann::json& p) {
  const auto s = p.at("model").get<std::string>();
  if (s != "interpreter" && s != "gpu") throw std::runtime_error("model must be interpreter or gpu (got '" + s + "')");
  return s == "interpreter" ? Model::Interpreter : Model::Gpu;
}

// cpu_capability avx2 or avx512 (vectorized kernels), or default (scalar ones): the parse every
// torch-derived format shares (optimizer_io::fused_on)
bool vectorized_mul_from(const nlohmann::json& p) { return optimizer_io::fused_on(p); }

std::vector<float> input_values(const Case& in) {
  const Tensor& t = in.require("input");
  if (t.dtype != DType::F32) throw std::invalid_argument("COAT fake quantization formats take a float32 input");
  return t.f32();
}

const char* kProvenance = "NVlabs/COAT 80ec99f coat/activation/fake_quantization/";

FormatSpec elementwise(std::string name, std::string description, std::string provenance, nlohmann::json defaults,
                       float (*fn)(float, const nlohmann::json&)) {
  FormatSpec f;
  f.name = std::move(name);
  f.description = std::move(description);
  f.provenance = std::string(kProvenance) + provenance;
  f.default_params = std::move(defaults);
  f.inputs = {{"input", {.dtypes = {DType::F32}}}};
  f.outputs = {{"output", {.dtypes = {DType::F32}, .shape = same_shape("input")}}};
  f.run = [fn](const Case& in, const nlohmann::json& p, int /*threads*/) {
    const std::vector<float> x = input_values(in);
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = fn(x[i], p);
    return std::vector<Tensor>{Tensor::from_f32("output", in.require("input").shape, y)};
  };
  // the grid the fake quantizer rounds to: its midpoints decide the tie rule (Triton away, torch even)
  f.edge_inputs = [](const nlohmann::json& p) { return fp8_grid_edges(fp8_of(p)); };
  f.dequantize_reads = {"output"};
  f.dequantize = [](const Case& c, const nlohmann::json&) { return c.require("output").f32(); };
  return f;
}

// SymmQuantizer's boundaries: the fake quantizer's grid edges (every grid value, every midpoint with
// its float32 neighbours, the grid's extremes and subnormals) times 2^-k in blocks each led by the
// absmax A = Qp * 2^-k = 1.75 (k = 8 for E4M3's Qp 448, 15 for E5M2's 57344), whose scale
// 2 (A + epsilon) / (2 Qp) is 2^-k exactly (epsilon below half A's ulp vanishes): x / scale is the
// edge itself, so Q meets every tie and threshold of the grid as the element-wise fake quantizer's
// edges do, now behind the block absmax, the scale and Q * scale. A block is a row_block x col_block
// tile (a whole axis, -1, taken as 1); the generated input's tile is two blocks side by side
// (symm_tile), so each run of 2 x area values is laid out as the two blocks' rows in the tile's
// row-major order, every block led by 1.75 at its own (0, 0).
std::vector<float> symm_edges(const nlohmann::json& p) {
  const fp8::FormatId id = fp8_of(p);
  const float qp = fp8::format_info(id).max_value;
  const float unit = 1.75f / qp;  // 2^-8 or 2^-15
  const auto extent = [&p](const char* key) {
    const std::int64_t e = p.at(key).get<std::int64_t>();
    return e < 0 ? std::int64_t{1} : e;
  };
  const auto area = static_cast<std::size_t>(extent("row_block") * extent("col_block"));
  if (area < 2) throw std::invalid_argument("coat.fake.symm's edges need blocks of 2 or more elements (row_block x col_block)");
  std::vector<float> out;
  for (float v : fp8_grid_edges(id)) {
    if (!std::isfinite(v) || std::fabs(v) > qp) continue;  // above Qp a value would be the block's absmax
    if (out.size() % area == 0) out.push_back(1.75f);
    out.push_back(v * unit);  // exact for every grid edge (a power of two); float32 subnormal specials round
  }
  while (out.size() % area) out.push_back(0.0f);
  if (p.at("col_block").get<std::int64_t>() < 0) return out;  // a whole row a block: the tile is one block
  if (out.size() % (2 * area)) out.push_back(1.75f);  // the tile's second block led by its absmax too
  while (out.size() % (2 * area)) out.push_back(0.0f);
  // block order -> the tile's row-major order: block 2t + side's element j at row j / cols, column
  // side * cols + j % cols of tile t
  const auto cols = static_cast<std::size_t>(extent("col_block"));
  std::vector<float> tiled(out.size());
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::size_t block = k / area, j = k % area, tile = block / 2, side = block % 2;
    tiled[tile * 2 * area + (j / cols) * 2 * cols + side * cols + j % cols] = out[k];
  }
  return tiled;
}

// The tile of coat.fake.symm's generated inputs: two row_block x col_block blocks side by side (a whole
// axis, -1, fits any extent: one row or column), so that a block is not a run of consecutive values
// once it is more than one row high (a kernel that takes rb * cb consecutive values as a block is seen).
InputTile symm_tile(const nlohmann::json& p) {
  const std::int64_t r = extent_param(param_extent_or_whole_axis("row_block"), p);
  const std::int64_t c = extent_param(param_extent_or_whole_axis("col_block"), p);
  return InputTile{r < 0 ? 1 : r, c < 0 ? 1 : 2 * c, "row_block divides M and col_block divides N"};
}

}  // namespace

void register_coat_fake_formats(std::vector<FormatSpec>& out) {
  out.push_back(elementwise(
      "coat.fake.floatexmy.triton",
      "COAT Triton fake FP8 quantization: the value on the ExMy grid, ties away from zero, -0 kept, no saturation",
      "FloatPointQuantizeTriton.py floatExMy_quantize_triton", {{"fp8", "e4m3"}, {"model", "interpreter"}},
      [](float x, const nlohmann::json& p) { return floatexmy_triton(x, fp8_of(p), model_of(p)); }));
  out.push_back(elementwise(
      "coat.fake.floatexmy.torch",
      "COAT torch fake FP8 quantization (CPU torch): ties to even, -0 -> +0, no saturation",
      "FloatPointQuantizeTorch.py floatExMy_quantize_torch", {{"fp8", "e4m3"}},
      [](float x, const nlohmann::json& p) { return floatexmy_torch(x, fp8_of(p)); }));
  {
    FormatSpec f;
    f.name = "coat.fake.symm";
    f.description = "COAT SymmQuantizer: per-block absmax+epsilon scale 2*absmax/(Qp-Qn), Q = Triton fake FP8 of x/scale, RQ = Q*scale";
    f.provenance = std::string(kProvenance) + "quantize_function.py block_cut + SymmQuantizer.forward + block_reshape";
    // cpu_capability: torch's, for RQ = Q * scale of a NaN Q in a NaN block (whose NaN comes back)
    f.default_params = {{"fp8", "e4m3"},   {"model", "interpreter"}, {"row_block", 1},
                        {"col_block", 16}, {"epsilon", 1e-8},        {"cpu_capability", "avx2"}};
    f.inputs = {{"input", {.dtypes = {DType::F32}, .shape = any_shape(2)}}};
    // row_block x col_block tiles (-1: the whole axis), one scale entry each in block_cut's row-major order
    const Layout tile = tiles(param_extent_or_whole_axis("row_block"), param_extent_or_whole_axis("col_block"), {"scale"});
    const Schema like_input = {.dtypes = {DType::F32}, .shape = same_shape("input")};
    f.outputs = {{"rq", tile, like_input},
                 {"q", tile, like_input},
                 {"scale", block_entries(), {.dtypes = {DType::F32}, .shape = entry_per_block_of("rq")}}};
    f.run = [](const Case& in, const nlohmann::json& p, int /*threads*/) {
      const Tensor& t = in.require("input");
      if (t.shape.size() != 2) throw std::invalid_argument("coat.fake.symm takes a 2-D input");
      const std::vector<float> x = input_values(in);
      const auto eps = static_cast<float>(p.at("epsilon").get<double>());  // torch: float32 tensor + Python float
      const Symm s = symm_quantize(x, t.shape[0], t.shape[1], p.at("row_block").get<std::int64_t>(),
                                   p.at("col_block").get<std::int64_t>(), eps, fp8_of(p), model_of(p),
                                   vectorized_mul_from(p));
      return std::vector<Tensor>{Tensor::from_f32("rq", t.shape, s.rq), Tensor::from_f32("q", t.shape, s.q),
                                 Tensor::from_f32("scale", {static_cast<std::int64_t>(s.scale.size())}, s.scale)};
    };
    f.dequantize_reads = {"rq"};
    f.dequantize = [](const Case& c, const nlohmann::json&) { return c.require("rq").f32(); };
    // generated inputs as whole row_block x col_block tiles (a whole axis, -1, fits any extent)
    f.edge_inputs = symm_edges;
    f.input_tile = symm_tile;
    // blocks more than one row high, COAT's 2-D blocks (its golden cases hold 4 x 8 too), on the boundaries,
    // the special values and blocks: a kernel that takes a block as consecutive values is caught there
    f.battery_params = {{{"row_block", 4}, {"col_block", 8}}};
    out.push_back(std::move(f));
  }
}

}  // namespace lowbit
