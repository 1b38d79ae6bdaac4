// The round-trip audit (audit.hpp): chunks of whole blocks through a registered format's round trip,
// and the error measures summed in block order.
#include "lowbit/audit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "lowbit/audit_storage.hpp"
#include "lowbit/generators.hpp"

namespace lowbit::audit {

namespace {

// Work is split into chunks of whole blocks of about this many elements; the split depends on the
// block size only, never on the thread count, so every sum is formed in the same order.
constexpr std::size_t kChunkElements = std::size_t{1} << 18;

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

// What a round trip needs that depends on the whole tensor: its sign.
bool checked_sign(const FormatSpec& f, std::span<const float> x, std::size_t block_size) {
  require_block(block_size);
  if (!f.round_trip) throw std::invalid_argument("format " + f.name + " has no round trip");
  require_finite(x);
  const bool negative = has_negative(x);
  if (const std::string why = not_applicable(f, block_size, negative); !why.empty())
    throw std::invalid_argument(f.name + " at block size " + std::to_string(block_size) + ": " + why);
  return negative;
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

std::vector<const FormatSpec*> formats(const std::vector<std::string>& globs) {
  return select_formats(globs, [](const FormatSpec& f) { return static_cast<bool>(f.round_trip); });
}

std::string not_applicable(const FormatSpec& f, std::size_t block_size, bool has_negative) {
  if (std::string why = f.round_trip_blocks.refusal(block_size); !why.empty()) return why;
  return has_negative ? f.refuses_negative : std::string();
}

std::vector<float> round_trip(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads) {
  const bool negative = checked_sign(f, x, block_size);
  std::vector<float> out(x.size());
  over_chunks(x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    f.round_trip(x.subspan(start, len), block_size, negative, std::span<float>(out).subspan(start, len));
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

Metrics audit(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads) {
  const bool negative = checked_sign(f, x, block_size);
  const auto partials = over_chunks(x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    std::vector<float> xh(len);
    const auto xs = x.subspan(start, len);
    f.round_trip(xs, block_size, negative, xh);
    return measure_chunk(xs, xh, block_size, start / block_size);
  });
  Metrics m = finish(combine(partials), x.size(), block_size, negative);
  m.bits_per_element = storage(f, x.size(), block_size).bits_per_element;
  return m;
}

Metrics audit(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads,
              const WholeRoundTrip& round_trip) {
  const bool negative = checked_sign(f, x, block_size);
  const std::vector<float> xh = round_trip(x, block_size);
  if (xh.size() != x.size()) throw std::invalid_argument(f.name + ": the round trip returned another length");
  Metrics m = measure(x, xh, block_size, threads);
  m.is_signed = negative;
  m.bits_per_element = storage(f, x.size(), block_size).bits_per_element;  // the format's storage, whoever ran it
  return m;
}

void check_input(const std::string& text) {
  const InputSpec spec = parse_input_spec(text);
  if (spec.kind == "edges")
    throw std::invalid_argument("input spec '" + text + "': edges belong to one format; the audit measures the same "
                                "input with every format");
}

std::vector<float> make_input(const std::string& text) {
  check_input(text);
  return generate_inputs(parse_input_spec(text), FormatSpec{}, nlohmann::json::object());
}

}  // namespace lowbit::audit
