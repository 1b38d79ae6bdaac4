#include "lowbit/audit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "lowbit/blockwise.hpp"
#include "lowbit/coat_optimizer.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/generators.hpp"

namespace lowbit::audit {

namespace {

// Work is split into chunks of whole blocks of about this many elements; the split depends on the
// block size only, never on the thread count, so every sum is formed in the same order.
constexpr std::size_t kChunkElements = std::size_t{1} << 18;
constexpr float kE4M3Max = 448.0f;
constexpr int kCoatExpandMin = 16;  // COAT's default expand_min (coat.hpp Hyper)

std::size_t chunk_size(std::size_t block_size) {
  return block_size * std::max<std::size_t>(1, (kChunkElements + block_size - 1) / block_size);
}

bool power_of_two(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

void require_block(std::size_t block_size) {
  if (!power_of_two(block_size) || block_size < kMinBlock || block_size > kMaxBlock)
    throw std::invalid_argument("block size " + std::to_string(block_size) + " must be a power of two in " +
                                std::to_string(kMinBlock) + ".." + std::to_string(kMaxBlock));
}

void require_finite(std::span<const float> x) {
  std::size_t bad = 0;
  for (float v : x) bad += std::isfinite(v) ? 0 : 1;
  if (bad)
    throw std::invalid_argument(std::to_string(bad) + " of " + std::to_string(x.size()) +
                                " input values are NaN or infinite; the audit measures finite data");
}

bool has_negative(std::span<const float> x) {
  return std::any_of(x.begin(), x.end(), [](float v) { return v < 0.0f; });
}

// What a round trip needs that depends on the whole tensor: the map picked by the data's sign.
struct Context {
  Format format;
  std::size_t block;
  bool is_signed;
  std::vector<float> qmap;
};

Context make_context(Format f, std::span<const float> x, std::size_t block_size) {
  require_block(block_size);
  if (const std::string why = unsupported_reason(f, block_size); !why.empty())
    throw std::invalid_argument(std::string(format_name(f)) + " at block size " + std::to_string(block_size) + ": " + why);
  require_finite(x);
  Context c{f, block_size, has_negative(x), {}};
  if (f == Format::Torchao8 || f == Format::Bnb8) c.qmap = c.is_signed ? codebook::signed8() : codebook::unsigned8();
  if (f == Format::Torchao4) c.qmap = c.is_signed ? codebook::torchao_signed4() : codebook::torchao_unsigned4();
  return c;
}

// torchao quantizes whole blocks only: a partial tail block is padded with zeros, which leave its
// absmax, and so every real element's code, as they are.
std::vector<float> padded_to_blocks(std::span<const float> xs, std::size_t block) {
  std::vector<float> p((xs.size() + block - 1) / block * block, 0.0f);
  std::copy(xs.begin(), xs.end(), p.begin());
  return p;
}

// The round trip of one chunk (a run of whole blocks starting at a block boundary; the tensor's
// last chunk may end in a partial block). Writes xs.size() values to out.
void round_trip_chunk(const Context& c, std::span<const float> xs, std::span<float> out) {
  const std::size_t block = c.block;
  switch (c.format) {
    case Format::Torchao8:
    case Format::Torchao4: {
      const std::vector<float> p = padded_to_blocks(xs, block);
      const blockwise::Quantized q = blockwise::torchao_quantize(p, c.qmap, block);
      const std::vector<float> d = blockwise::torchao_dequantize(q.codes, q.scale, c.qmap, block);
      std::copy_n(d.begin(), xs.size(), out.begin());
      return;
    }
    case Format::TorchaoFp8: {
      const std::vector<float> p = padded_to_blocks(xs, block);
      const blockwise::Quantized q = blockwise::torchao_fp8_quantize(p, block, fp8::torch_eager<fp8::E4M3FN>());
      const std::vector<float> d = blockwise::torchao_fp8_dequantize(q.codes, q.scale, block);
      std::copy_n(d.begin(), xs.size(), out.begin());
      return;
    }
    case Format::Bnb8: {
      const blockwise::Quantized q = blockwise::bnb_quantize(xs, c.qmap, block, blockwise::BnbBackend::CpuLut);
      const std::vector<float> d = blockwise::bnb_dequantize(q.codes, q.scale, c.qmap, block);
      std::copy_n(d.begin(), xs.size(), out.begin());
      return;
    }
    case Format::Fp8PerBlock:
      for (std::size_t start = 0; start < xs.size(); start += block) {
        const std::size_t len = std::min(block, xs.size() - start);
        float amax = 0.0f;
        for (std::size_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(xs[start + i]));
        const float scale = amax / kE4M3Max;
        for (std::size_t i = 0; i < len; ++i) {
          if (scale == 0.0f) {  // an all-zero block (or one whose scale underflows) stays zero
            out[start + i] = 0.0f;
            continue;
          }
          const std::uint8_t code = fp8::encode_nearest_even<fp8::E4M3FN>(xs[start + i] / scale, fp8::cuda_satfinite());
          out[start + i] = fp8::decode<fp8::E4M3FN>(code) * scale;
        }
      }
      return;
    case Format::Coat:
    case Format::CoatExpand: {
      const bool expand = c.format == Format::CoatExpand;
      const bool second = !c.is_signed;  // the kernel's second-moment path for non-negative data
      for (std::size_t start = 0; start < xs.size(); start += coat::kGroup) {
        const auto group = xs.subspan(start, std::min(coat::kGroup, xs.size() - start));
        const coat::QuantizedGroup g =
            expand ? coat::expand_quantize_group(group, kCoatExpandMin, second) : coat::origin_quantize_group(group);
        for (std::size_t i = 0; i < group.size(); ++i)
          out[start + i] = expand ? coat::expand_dequantize(g.codes[i], g.scale, g.expand, g.centre, second)
                                  : coat::origin_dequantize(g.codes[i], g.scale);
      }
      return;
    }
  }
}

// Sums over a run of whole blocks, formed block by block in block order.
struct Partial {
  double abs = 0, rel = 0, err2 = 0, x2 = 0, max_abs = 0;
  std::size_t nonzeros = 0, flushed = 0;
  std::size_t worst_block = 0;
  double worst_mean = -1;

  void add(const Partial& o) {  // o covers the blocks after this one's
    abs += o.abs;
    rel += o.rel;
    err2 += o.err2;
    x2 += o.x2;
    max_abs = std::max(max_abs, o.max_abs);
    nonzeros += o.nonzeros;
    flushed += o.flushed;
    if (o.worst_mean > worst_mean) {
      worst_mean = o.worst_mean;
      worst_block = o.worst_block;
    }
  }
};

// first_block: the index of xs's first block in the whole tensor.
Partial measure_chunk(std::span<const float> xs, std::span<const float> xh, std::size_t block, std::size_t first_block) {
  Partial chunk;
  for (std::size_t start = 0, b = first_block; start < xs.size(); start += block, ++b) {
    const std::size_t len = std::min(block, xs.size() - start);
    Partial p;
    for (std::size_t i = start; i < start + len; ++i) {
      const double x = xs[i], e = std::fabs(x - static_cast<double>(xh[i]));
      p.abs += e;
      p.rel += e / std::fabs(x + 1e-8);  // bitsandbytes' test: diff / torch.abs(A1 + 1e-8)
      p.err2 += e * e;
      p.x2 += x * x;
      p.max_abs = std::max(p.max_abs, e);
      if (x != 0) {
        ++p.nonzeros;
        if (xh[i] == 0.0f) ++p.flushed;
      }
    }
    p.worst_block = b;
    p.worst_mean = p.abs / static_cast<double>(len);
    chunk.add(p);
  }
  return chunk;
}

Metrics finish(const Partial& t, std::size_t n, std::size_t block, bool is_signed) {
  Metrics m;
  m.n = n;
  m.blocks = (n + block - 1) / block;
  m.is_signed = is_signed;
  if (n == 0) return m;
  const double dn = static_cast<double>(n);
  m.mean_abs = t.abs / dn;
  m.mean_rel = t.rel / dn;
  m.rel_l2 = t.x2 > 0 ? std::sqrt(t.err2) / std::sqrt(t.x2) : (t.err2 > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  m.max_abs = t.max_abs;
  m.sqnr_db = t.err2 > 0 ? 10.0 * std::log10(t.x2 / t.err2) : std::numeric_limits<double>::infinity();
  m.nonzeros = t.nonzeros;
  m.flushed = t.flushed;
  m.flushed_fraction = t.nonzeros ? static_cast<double>(t.flushed) / static_cast<double>(t.nonzeros) : 0.0;
  m.worst_block = t.worst_block;
  m.worst_block_mean_abs = t.worst_mean;
  return m;
}

// Runs body(chunk index, start, length) over the chunks on `threads` threads; partials in chunk order.
template <class Body>
std::vector<Partial> over_chunks(std::size_t n, std::size_t block, int threads, Body body) {
  const std::size_t chunk = chunk_size(block);
  const std::size_t chunks = (n + chunk - 1) / chunk;
  std::vector<Partial> partials(chunks);
  const auto count = static_cast<long long>(chunks);
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, threads))
  for (long long k = 0; k < count; ++k) {
    const std::size_t start = static_cast<std::size_t>(k) * chunk;
    partials[static_cast<std::size_t>(k)] = body(start, std::min(chunk, n - start));
  }
  return partials;
}

Partial combine(const std::vector<Partial>& partials) {
  Partial t;
  for (const Partial& p : partials) t.add(p);
  return t;
}

}  // namespace

const std::vector<FormatInfo>& formats() {
  static const std::vector<FormatInfo> all = {
      {Format::Torchao8, "torchao-8bit",
       "torchao 0.18 dynamic map (signed for data with a negative value, else unsigned), absmax scale, torchao search"},
      {Format::Torchao4, "torchao-4bit", "torchao 0.18 4-bit maps (signed dynamic 3/4, or linspace(0,1,17)[1:])"},
      {Format::TorchaoFp8, "torchao-fp8", "torchao 0.18 OptimStateFp8: e4m3fn, scale max(amax,1e-12)/448, torch cast"},
      {Format::Bnb8, "bnb-8bit", "bitsandbytes 0.50 quantize_blockwise, dynamic map, CPU lookup-table back end"},
      {Format::Fp8PerBlock, "fp8-perblock", "plain per-block E4M3: scale amax/448, satfinite round-to-nearest-even cast"},
      {Format::Coat, "coat-fp8", "COAT FP8 AdamW state without expansion (groups of 128)"},
      {Format::CoatExpand, "coat-fp8-expand", "COAT FP8 AdamW state with Dynamic Range Expansion (groups of 128)"},
  };
  return all;
}

std::string_view format_name(Format f) {
  for (const FormatInfo& i : formats())
    if (i.id == f) return i.name;
  return "?";
}

Format parse_format(std::string_view name) {
  std::string known;
  for (const FormatInfo& i : formats()) {
    if (i.name == name) return i.id;
    known += (known.empty() ? "" : ", ") + std::string(i.name);
  }
  throw std::invalid_argument("unknown format '" + std::string(name) + "' (known: " + known + ")");
}

std::string unsupported_reason(Format f, std::size_t block_size) {
  if ((f == Format::Coat || f == Format::CoatExpand) && block_size != coat::kGroup)
    return "n/a (COAT groups are 128)";
  if (f == Format::Bnb8 && (block_size < 64 || block_size > 4096)) return "n/a (bitsandbytes block sizes are 64..4096)";
  return "";
}

std::vector<float> round_trip(Format f, std::span<const float> x, std::size_t block_size, int threads) {
  const Context c = make_context(f, x, block_size);
  std::vector<float> out(x.size());
  over_chunks(x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    round_trip_chunk(c, x.subspan(start, len), std::span<float>(out).subspan(start, len));
    return Partial{};
  });
  return out;
}

Metrics measure(std::span<const float> x, std::span<const float> xhat, std::size_t block_size, int threads) {
  if (x.size() != xhat.size()) throw std::invalid_argument("measure: x and x^ differ in length");
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  const auto partials = over_chunks(x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    return measure_chunk(x.subspan(start, len), xhat.subspan(start, len), block_size, start / block_size);
  });
  return finish(combine(partials), x.size(), block_size, has_negative(x));
}

Metrics audit(Format f, std::span<const float> x, std::size_t block_size, int threads) {
  const Context c = make_context(f, x, block_size);
  const auto partials = over_chunks(x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    std::vector<float> xh(len);
    const auto xs = x.subspan(start, len);
    round_trip_chunk(c, xs, xh);
    return measure_chunk(xs, xh, block_size, start / block_size);
  });
  return finish(combine(partials), x.size(), block_size, c.is_signed);
}

std::vector<float> adam_moment(const AdamSpec& s) {
  if (s.steps < 1) throw std::invalid_argument("adam moments need steps >= 1");
  const FormatSpec none{};
  const auto normal = [&](std::uint64_t seed) {
    return generate_inputs(parse_input_spec("normal:n=" + std::to_string(s.n) + ",seed=" + std::to_string(seed)), none,
                           nlohmann::json::object());
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

namespace {

struct ParsedInput {
  bool adam = false;
  AdamSpec adam_spec;
  InputSpec spec;
};

ParsedInput parse_input(const std::string& text) {
  ParsedInput p;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (kind == "adam-m" || kind == "adam-v") {
    p.adam = true;
    AdamSpec& s = p.adam_spec;
    s.second = kind == "adam-v";
    if (colon != std::string::npos) {
      const std::string rest = text.substr(colon + 1);
      std::size_t start = 0;
      while (start < rest.size()) {
        const auto comma = rest.find(',', start);
        const std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        start = comma == std::string::npos ? rest.size() : comma + 1;
        const auto eq = item.find('=');
        const std::string key = item.substr(0, eq);
        const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
        double d = 0;
        std::size_t used = 0;
        try {
          d = std::stod(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (eq == std::string::npos || used == 0 || used != value.size() || !std::isfinite(d))
          throw std::invalid_argument("input spec '" + text + "': '" + item + "' is not key=number");
        if (key == "n" || key == "seed" || key == "steps") {
          if (d < 0 || d != std::floor(d) || d > 9.0e15)
            throw std::invalid_argument("input spec '" + text + "': " + key + " must be a whole number");
          if (key == "n") s.n = static_cast<std::size_t>(d);
          if (key == "seed") s.seed = static_cast<std::uint64_t>(d);
          if (key == "steps") {
            if (d < 1 || d > 100000) throw std::invalid_argument("input spec '" + text + "': steps must be in 1..100000");
            s.steps = static_cast<int>(d);
          }
        } else if (key == "std") s.std = d;
        else if (key == "spread") s.spread = d;
        else
          throw std::invalid_argument("input spec '" + text + "': unknown key '" + key +
                                      "' (adam-m and adam-v take n, seed, steps, std, spread)");
      }
    }
    return p;
  }
  try {
    p.spec = parse_input_spec(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + "; the audit also takes adam-m, adam-v");
  }
  if (p.spec.kind == "edges")
    throw std::invalid_argument("input spec '" + text + "': edge inputs belong to one format; the audit takes "
                                "normal, uniform, lognormal, student-t, constant, outliers, adam-m, adam-v");
  return p;
}

}  // namespace

void check_input(const std::string& text) { (void)parse_input(text); }

std::vector<float> make_input(const std::string& text) {
  const ParsedInput p = parse_input(text);
  if (p.adam) return adam_moment(p.adam_spec);
  return generate_inputs(p.spec, FormatSpec{}, nlohmann::json::object());
}

}  // namespace lowbit::audit
