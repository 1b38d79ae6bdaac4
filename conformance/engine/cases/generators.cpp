#include "lowbit/generators.hpp"

#include "lowbit/bf16_round.hpp"
#include "lowbit/block_inputs.hpp"
#include "lowbit/file_input.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/narrow16.hpp"
#include "lowbit/strict_number.hpp"
#include "lowbit/parallel_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>

namespace lowbit {

namespace {

const std::map<std::string, std::set<std::string>>& known_keys() {
  static const std::map<std::string, std::set<std::string>> keys = {
      {"normal", {"n", "seed", "mean", "std"}},       {"uniform", {"n", "seed", "lo", "hi"}},
      {"lognormal", {"n", "seed", "mu", "sigma"}},    {"student-t", {"n", "seed", "nu"}},
      {"constant", {"n", "seed", "value"}},           {"outliers", {"n", "seed", "std", "scale", "block"}},
      {"special", {"n", "seed"}},                     {"edges", {"n", "seed"}},
      {"scaled-edges", {"n", "seed"}},                {"table-edges", {"n", "seed"}},
      {"tiny-blocks", {"n", "seed"}},                 {"special-blocks", {"n", "seed"}},
      {"nan-tiles", {"n", "seed"}},
      {"adam-m", {"n", "seed", "steps", "std", "spread"}}, {"adam-v", {"n", "seed", "steps", "std", "spread"}},
      {"gradient-blocks", {"n", "seed", "std"}},
      {"all-bf16", {"n", "seed"}},                    {"all-f16", {"n", "seed"}},
  };
  return keys;
}

// Every bit pattern of a 16-bit float, 0x0000 to 0xFFFF in order, as its float32 value (exact): at
// every exponent every pattern of the mantissa bits a 16-bit input holds (the round bit of a narrower
// format with its sticky bits alone, the values random floats never hit), the subnormals, Inf and
// every NaN payload.
std::vector<float> every_16bit_value(DType d) {
  std::vector<float> v(65536);
  for (std::uint32_t h = 0; h < v.size(); ++h)
    v[h] = d == DType::BF16 ? widen_bf16(static_cast<std::uint16_t>(h)) : widen_f16(static_cast<std::uint16_t>(h));
  return v;
}


std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  return {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
          std::numeric_limits<float>::min(), std::nextafter(std::numeric_limits<float>::min(), 0.0f),
          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), inf, -inf,
          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f, 1e-30f,
          -1e-30f, 1e30f, -1e30f};
}

// A fixed list as n values: the whole list without n, else its first n values, repeated from the
// start when n is longer than the list.
std::vector<float> cycled(std::vector<float> list, const InputSpec& spec) {
  if (!spec.args.count("n")) return list;
  const std::size_t n = spec.count();
  if (list.empty() && n) throw std::invalid_argument("input spec '" + spec.text + "': the list is empty");
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = list[i % list.size()];
  return out;
}

double uniform_of(std::uint64_t draw) { return static_cast<double>(draw >> 11) * 0x1.0p-53; }

// Box-Muller's cosine branch from two consecutive draws.
double standard_normal_of(const std::uint64_t* d) {
  const double u1 = 1.0 - uniform_of(d[0]);  // (0, 1]
  const double u2 = uniform_of(d[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// n values, each made by value(i, d) from its own `draws` consecutive outputs of rng (every kind draws
// a fixed number per value). The draws come from the one generator in order, a run at a time, on the
// calling thread; the values of a run, pure functions of their draws, are made on `threads` threads,
// so the bytes are those of one loop drawing as it goes, for any thread count. (The transforms, log,
// cos and sqrt, were most of a 2^26-value input's time; the draws are a tenth of it.)
template <class Value>
std::vector<float> drawn(std::mt19937_64& rng, std::size_t n, std::size_t draws, int threads, const Value& value) {
  const std::size_t run = std::max<std::size_t>(1, (std::size_t{1} << 19) / draws);  // 4 MiB of draws at a time
  std::vector<float> out(n);
  std::vector<std::uint64_t> d(std::min(n, run) * draws);
  for (std::size_t start = 0; start < n; start += run) {
    const std::size_t len = std::min(run, n - start);
    for (std::size_t k = 0; k < len * draws; ++k) d[k] = rng();
    // std::threads, not OpenMP: its idle workers spin while this thread draws the next run
    parallel::for_block_ranges(len, len * draws >= 8192 ? std::max(1, threads) : 1, [&](std::size_t first, std::size_t end) {
      for (std::size_t j = first; j < end; ++j) out[start + j] = static_cast<float>(value(start + j, d.data() + j * draws));
    });
  }
  return out;
}

AdamSpec adam_spec_of(const InputSpec& spec) {
  AdamSpec a;
  a.second = spec.kind == "adam-v";
  a.n = spec.count();
  a.seed = spec.seed();
  a.steps = static_cast<int>(spec.whole("steps", a.steps, 1, 100000));
  a.std = spec.number("std", a.std);
  a.spread = spec.number("spread", a.spread);
  return a;
}

}  // namespace

DType InputSpec::dtype() const {
  const auto it = args.find("dtype");
  if (it == args.end() || it->second == "f32") return DType::F32;
  if (it->second == "bf16") return DType::BF16;
  if (it->second == "f16") return DType::F16;
  throw std::invalid_argument("input spec '" + text + "': dtype must be f32, bf16 or f16 (got '" + it->second + "')");
}

std::uint16_t narrowed_bits(DType d, float x) {
  const std::uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: its sign and the top of its payload, still a NaN
    const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint16_t payload = d == DType::BF16 ? (u >> 16) & 0x7Fu : (u >> 13) & 0x3FFu;
    const std::uint16_t ones = d == DType::BF16 ? 0x7F80u : 0x7C00u, quiet = d == DType::BF16 ? 0x40u : 0x200u;
    return static_cast<std::uint16_t>(sign | ones | (payload ? payload : quiet));
  }
  return d == DType::BF16 ? bf16_round_nearest_even(x) : f16_round_nearest_even(x);
}

std::uint64_t InputSpec::seed() const { return static_cast<std::uint64_t>(whole("seed", 1, 0, kMaxSeed)); }
std::size_t InputSpec::count() const { return static_cast<std::size_t>(whole("n", 4096, 0, kMaxCount)); }

double InputSpec::whole(const std::string& key, double fallback, double lo, double hi) const {
  const auto it = args.find(key);
  if (it == args.end()) return fallback;
  try {  // every range here is of whole numbers a double holds exactly (at most 2^53)
    return static_cast<double>(
        parse_whole(it->second, key, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi)));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("input spec '" + text + "': " + e.what());
  }
}

double InputSpec::number(const std::string& key, double fallback) const {
  const auto it = args.find(key);
  if (it == args.end()) return fallback;
  try {
    return parse_real(it->second, key, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("input spec '" + text + "': " + e.what());
  }
}

InputSpec parse_input_spec(const std::string& text) {
  if (is_file_spec(text)) return parse_file_spec(text);
  InputSpec s;
  s.text = text;
  const auto colon = text.find(':');
  s.kind = text.substr(0, colon);
  const auto keys = known_keys().find(s.kind);
  if (keys == known_keys().end()) {
    std::string kinds;
    for (const auto& [k, v] : known_keys()) kinds += (kinds.empty() ? "" : ", ") + k;
    kinds += ", file:PATH[:TENSOR]";
    throw std::invalid_argument("input spec '" + text + "': unknown kind '" + s.kind + "' (known: " + kinds + ")");
  }
  if (colon != std::string::npos) {
    std::string rest = text.substr(colon + 1);
    std::size_t start = 0;
    while (start <= rest.size() && !rest.empty()) {
      const auto comma = rest.find(',', start);
      const std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        throw std::invalid_argument("input spec '" + text + "': '" + item + "' is not key=value");
      const std::string key = item.substr(0, eq);
      if (!keys->second.count(key) && key != "dtype")
        throw std::invalid_argument("input spec '" + text + "': kind " + s.kind + " takes no '" + key + "'");
      s.args[key] = item.substr(eq + 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  // Every number is checked here, before any value is made (each throws naming the key and range).
  s.count();
  s.seed();
  s.whole("steps", 10, 1, 100000);
  s.whole("nu", 3, 1, kMaxNu);
  s.whole("block", 256, 1, kMaxCount);
  s.dtype();
  for (const auto& [key, value] : s.args)
    if (key != "dtype") s.number(key, 0);  // the real-valued keys: finite numbers
  return s;
}

std::string edge_block_param(const nlohmann::json& params) {
  for (const char* key : {"block_size", "group_size"})
    if (params.contains(key)) return key;
  return "";
}

// The format's boundary values (its edges: blocks led by an absmax of 1) under block scales that are
// not powers of two, each value also nudged 1 and 2 ulps either way (not the absmax): where under a
// scale of 1 x / s and x * (1 / s) agree, here they, fused and unfused products, and the tie rules
// disagree somewhere, so a kernel with one of these variants cannot pass.
std::vector<float> scaled_edges(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  const std::string block_param = edge_block_param(params);
  if (!format.edge_inputs || block_param.empty())
    throw std::invalid_argument("input spec '" + spec.text + "': scaled-edges needs a block-wise format with an edge-case "
                                "generator" + (format.name.empty() ? std::string() : " (" + format.name + " is not one)"));
  const std::size_t block = positive_size_param(params, block_param.c_str());
  const std::vector<float> base = format.edge_inputs(params);  // whole blocks, each led by its absmax 1
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out;
  for (int shift : {0, -1, 1, -2, 2})
    for (float scale : {1.7f, 0.31415927f, 0.0037f, 1234.567f, 3.0f}) {
      for (std::size_t i = 0; i < base.size(); ++i) {
        float x = base[i] * scale;
        const bool movable = i % block != 0 && std::isfinite(x) && std::fabs(base[i]) < 1.0f;
        for (int k = 0; movable && k < std::abs(shift); ++k) x = std::nextafter(x, shift > 0 ? inf : -inf);
        out.push_back(x);
      }
    }
  return out;
}

std::size_t special_padding(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params) {
  if (spec.kind != "special" || spec.args.count("n") || !format.whole_blocks) return 0;
  const std::size_t block = positive_size_param(params, "block_size"), n = special_values().size();
  return (block - n % block) % block;
}

namespace {

std::vector<float> generated_f32(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params, int threads) {
  std::mt19937_64 rng(spec.seed());
  const std::size_t n = spec.count();
  if (spec.kind == "edges") {
    if (!format.edge_inputs)
      throw std::invalid_argument("input spec '" + spec.text + "': " +
                                  (format.name.empty() ? std::string("edges belong to a format, and there is none here")
                                                       : "format " + format.name + " has no edge-case generator"));
    return cycled(format.edge_inputs(params), spec);
  }
  if (spec.kind == "scaled-edges") return cycled(scaled_edges(spec, format, params), spec);
  if (spec.kind == "table-edges") {
    if (!format.table_edge_inputs)
      throw std::invalid_argument("input spec '" + spec.text + "': table-edges needs a format decided by a lookup table" +
                                  (format.name.empty() ? std::string() : " (" + format.name + " is not one)"));
    return cycled(format.table_edge_inputs(params), spec);
  }
  if (spec.kind == "tiny-blocks") return cycled(tiny_blocks(spec, format, params), spec);
  if (spec.kind == "special-blocks") return cycled(special_blocks(spec, format, params), spec);
  if (spec.kind == "nan-tiles") return cycled(nan_tiles(spec, format, params), spec);
  if (spec.kind == "special") {
    std::vector<float> v = cycled(special_values(), spec);
    v.resize(v.size() + special_padding(spec, format, params), 0.0f);
    return v;
  }
  if (spec.kind == "adam-m" || spec.kind == "adam-v") return adam_moment(adam_spec_of(spec), threads);
  if (spec.kind == "gradient-blocks") {  // the normal kind's draws, then its special blocks
    const double std = spec.number("std", 1);
    return gradient_blocks(spec, format, params,
                           drawn(rng, n, 2, threads, [=](std::size_t, const std::uint64_t* d) { return std * standard_normal_of(d); }));
  }
  if (spec.kind == "all-bf16") return cycled(every_16bit_value(DType::BF16), spec);
  if (spec.kind == "all-f16") return cycled(every_16bit_value(DType::F16), spec);
  if (spec.kind == "normal") {
    const double mean = spec.number("mean", 0), std = spec.number("std", 1);
    return drawn(rng, n, 2, threads, [=](std::size_t, const std::uint64_t* d) { return mean + std * standard_normal_of(d); });
  }
  if (spec.kind == "uniform") {
    const double lo = spec.number("lo", -1), hi = spec.number("hi", 1);
    return drawn(rng, n, 1, threads, [=](std::size_t, const std::uint64_t* d) { return lo + (hi - lo) * uniform_of(d[0]); });
  }
  if (spec.kind == "lognormal") {  // the normal's two draws, then one for the sign
    const double mu = spec.number("mu", 0), sigma = spec.number("sigma", 2);
    return drawn(rng, n, 3, threads, [=](std::size_t, const std::uint64_t* d) {
      const double v = std::exp(mu + sigma * standard_normal_of(d));
      return d[2] & 1 ? -v : v;
    });
  }
  if (spec.kind == "student-t") {
    // t = Z / sqrt(chi2_nu / nu), chi2 as a sum of nu squared normals (nu rounded to a whole number)
    const int nu = static_cast<int>(spec.whole("nu", 3, 1, kMaxNu));
    return drawn(rng, n, 2 * (static_cast<std::size_t>(nu) + 1), threads, [=](std::size_t, const std::uint64_t* d) {
      double chi2 = 0;
      for (int k = 0; k < nu; ++k) {
        const double z = standard_normal_of(d + 2 * k);
        chi2 += z * z;
      }
      return standard_normal_of(d + 2 * nu) / std::sqrt(chi2 / nu + 1e-300);
    });
  }
  if (spec.kind == "constant") return std::vector<float>(n, static_cast<float>(spec.number("value", 1)));
  if (spec.kind == "outliers") {
    const auto block = static_cast<std::size_t>(spec.whole("block", 256, 1, kMaxCount));
    const double std = spec.number("std", 1), scale = spec.number("scale", 1e4);
    return drawn(rng, n, 2, threads, [=](std::size_t i, const std::uint64_t* d) {
      const double v = std * standard_normal_of(d);
      return i % block == block / 2 ? v * scale : v;
    });
  }
  throw std::logic_error("generate_inputs: kind '" + spec.kind + "' has no generator");  // parse_input_spec knows every kind
}

}  // namespace

std::vector<float> generate_inputs(const InputSpec& spec, const FormatSpec& format, const nlohmann::json& params,
                                   int threads) {
  if (spec.kind == "file") return file_input_values(spec);
  std::vector<float> v = generated_f32(spec, format, params, threads);
  if (const DType d = spec.dtype(); d != DType::F32)
    for (float& x : v) {
      const std::uint16_t h = narrowed_bits(d, x);
      x = d == DType::BF16 ? widen_bf16(h) : widen_f16(h);
    }
  return v;
}

std::vector<float> adam_moment(const AdamSpec& s, int threads) {
  if (s.steps < 1) throw std::invalid_argument("adam moments need steps >= 1");
  const auto normal = [&](std::uint64_t seed) {
    return generate_inputs(parse_input_spec("normal:n=" + std::to_string(s.n) + ",seed=" + std::to_string(seed)),
                           FormatSpec{}, nlohmann::json::object(), threads);
  };
  const std::vector<float> log_scale = normal(s.seed);
  std::vector<float> scale(s.n);
  for (std::size_t i = 0; i < s.n; ++i) scale[i] = static_cast<float>(s.std * std::exp(s.spread * log_scale[i]));
  // torch.optim.AdamW(betas=(0.9, 0.999)), single-tensor path, float32 states.
  const float w1 = static_cast<float>(1.0 - 0.9), b2 = static_cast<float>(0.999), w2 = static_cast<float>(1.0 - 0.999);
  std::vector<float> m(s.n, 0.0f), v(s.n, 0.0f);
  for (int t = 0; t < s.steps; ++t) {
    const std::vector<float> z = normal(s.seed + 7919u * static_cast<std::uint64_t>(t + 1));
    for (std::size_t i = 0; i < s.n; ++i) {
      const float g = scale[i] * z[i];
      m[i] = m[i] + w1 * (g - m[i]);  // exp_avg.lerp_(g, 1 - beta1): weight < 0.5 form
      v[i] = v[i] * b2;                // exp_avg_sq.mul_(beta2)
      v[i] = v[i] + (w2 * g) * g;      // .addcmul_(g, g, value=1 - beta2)
    }
  }
  return s.second ? v : m;
}

double unit_uniform(std::mt19937_64& rng) { return uniform_of(rng()); }

double standard_normal(std::mt19937_64& rng) {
  const std::uint64_t d[2] = {rng(), rng()};  // in this order: u1's draw, then u2's
  return standard_normal_of(d);
}

}  // namespace lowbit
