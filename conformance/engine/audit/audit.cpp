// The round-trip audit (audit.hpp): chunks of whole blocks through a registered format's round trip,
// and the error measures summed in block order.
#include "lowbit/audit.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
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

void require_round_trip(const FormatSpec& f, std::size_t block_size) {
  require_block(block_size);
  if (!f.round_trip) throw std::invalid_argument("format " + f.name + " has no round trip");
}

// Whether the format's round trip runs at this block size on this input.
void check_configuration(const FormatSpec& f, const Input& in, std::size_t block_size) {
  require_round_trip(f, block_size);
  if (const std::string why = not_applicable(f, block_size, in.has_negative); !why.empty())
    throw std::invalid_argument(f.name + " at block size " + std::to_string(block_size) + ": " + why);
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

// The measures of kLanes blocks of one length at a time. Each block's four sums (|e|, the relative
// error, e^2, x^2) run in element order, as one chain of dependent additions each: the reports'
// figures are these operations' bytes. The terms of a stretch of kStretch elements of each block are
// computed first, element-wise, so that the division vectorizes (in the chain it was most of the
// audit's measuring time); their sums then add element i of every block side by side, so that the
// blocks' chains overlap, every block's in the same order as alone. The maximum and the counts do
// not depend on the order (e is never -0, and std::max keeps the running maximum when e is NaN).
constexpr std::size_t kLanes = 4, kStretch = 256;  // the terms of a stretch: 32 KiB, in the L1 cache

struct Terms {
  double e[kLanes * kStretch], rel[kLanes * kStretch], e2[kLanes * kStretch], x2[kLanes * kStretch];
};

// The terms of x[0, n) into t at `at`.
void element_terms(const float* x, const float* xh, std::size_t n, Terms& t, std::size_t at) {
  for (std::size_t i = 0; i < n; ++i) {
    const double xd = x[i], ei = std::fabs(xd - static_cast<double>(xh[i]));
    t.e[at + i] = ei;
    t.rel[at + i] = ei / std::fabs(xd + 1e-8);  // bitsandbytes' test: diff / torch.abs(A1 + 1e-8)
    t.e2[at + i] = ei * ei;
    t.x2[at + i] = xd * xd;
  }
}

// The measures of `Lanes` consecutive blocks of len elements, side by side, into p. Each measure has
// a loop of its own: the additions' loop vectorizes across blocks only alone.
template <std::size_t Lanes>
void block_measures(const float* x, const float* xh, std::size_t len, Partial* p) {
  Terms t;
  double abs[Lanes] = {}, rel[Lanes] = {}, err2[Lanes] = {}, x2[Lanes] = {}, max_abs[Lanes] = {};
  for (std::size_t first = 0; first < len; first += kStretch) {
    const std::size_t n = std::min(kStretch, len - first);
    for (std::size_t k = 0; k < Lanes; ++k) element_terms(x + k * len + first, xh + k * len + first, n, t, k * kStretch);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < Lanes; ++k) {
        abs[k] += t.e[k * kStretch + i];
        rel[k] += t.rel[k * kStretch + i];
        err2[k] += t.e2[k * kStretch + i];
        x2[k] += t.x2[k * kStretch + i];
      }
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < Lanes; ++k) max_abs[k] = std::max(max_abs[k], t.e[k * kStretch + i]);
  }
  for (std::size_t k = 0; k < Lanes; ++k) {
    std::size_t nonzeros = 0, flushed = 0;
    for (std::size_t i = k * len; i < (k + 1) * len; ++i) {
      nonzeros += x[i] != 0;
      flushed += (x[i] != 0) & (xh[i] == 0.0f);
    }
    p[k] = {abs[k], rel[k], err2[k], x2[k], max_abs[k], nonzeros, flushed, 0, abs[k] / static_cast<double>(len)};
  }
}

// first_block: the index of xs's first block in the whole tensor.
Partial measure_chunk(std::span<const float> xs, std::span<const float> xh, std::size_t block, std::size_t first_block) {
  Partial chunk;
  for (std::size_t start = 0, b = first_block; start < xs.size();) {
    const std::size_t len = std::min(block, xs.size() - start);
    const bool side_by_side = (xs.size() - start) / block >= kLanes;
    const std::size_t lanes = side_by_side ? kLanes : 1;
    Partial p[kLanes];
    if (side_by_side) block_measures<kLanes>(xs.data() + start, xh.data() + start, len, p);
    else block_measures<1>(xs.data() + start, xh.data() + start, len, p);  // the last few blocks, one at a time
    for (std::size_t k = 0; k < lanes; ++k, ++b, start += len) {
      p[k].worst_block = b;
      chunk.add(p[k]);
    }
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

// Runs body(start, length) over the chunks on `threads` threads, each taking the next chunk not yet
// taken; partials in chunk order. std::threads rather than OpenMP, whose idle workers spin (a sixth
// of the audit's CPU time on the loaded 2-core machine). The first exception of a body is rethrown.
template <class Body>
std::vector<Partial> over_chunks(std::size_t n, std::size_t block, int threads, Body body) {
  const std::size_t chunk = chunk_size(block);
  const std::size_t chunks = (n + chunk - 1) / chunk;
  std::vector<Partial> partials(chunks);
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < chunks;) {
      try {
        const std::size_t start = k * chunk;
        partials[k] = body(start, std::min(chunk, n - start));
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = chunks;  // no more chunks
      }
    }
  };
  std::vector<std::thread> pool;
  try {
    for (std::size_t t = 1; t < std::min<std::size_t>(static_cast<std::size_t>(std::max(1, threads)), chunks); ++t)
      pool.emplace_back(work);
  } catch (const std::system_error&) {
    // the system refused a thread (a thread limit): the threads started, this one among them, take
    // every chunk; never std::terminate from a joinable thread destroyed while the error unwinds
  }
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
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

Input checked_input(std::span<const float> x) {
  require_finite(x);
  return {x, has_negative(x)};
}

std::vector<float> round_trip(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads) {
  require_round_trip(f, block_size);  // the configuration's faults are named before the data's
  const Input in = checked_input(x);
  check_configuration(f, in, block_size);
  std::vector<float> out(x.size());
  over_chunks(x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    f.round_trip(x.subspan(start, len), block_size, in.has_negative, std::span<float>(out).subspan(start, len));
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

Metrics audit(const FormatSpec& f, const Input& in, std::size_t block_size, int threads) {
  check_configuration(f, in, block_size);
  const auto partials = over_chunks(in.x.size(), block_size, threads, [&](std::size_t start, std::size_t len) {
    thread_local std::vector<float> xh;  // x^ of one chunk, reused by the thread's next chunks (no fill, no page faults)
    xh.resize(len);
    const auto xs = in.x.subspan(start, len);
    const std::span<float> out(xh.data(), len);
    f.round_trip(xs, block_size, in.has_negative, out);
    return measure_chunk(xs, out, block_size, start / block_size);
  });
  Metrics m = finish(combine(partials), in.x.size(), block_size, in.has_negative);
  m.bits_per_element = storage(f, in.x.size(), block_size).bits_per_element;
  return m;
}

Metrics audit(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads) {
  require_round_trip(f, block_size);  // the configuration's faults are named before the data's
  return audit(f, checked_input(x), block_size, threads);
}

Metrics audit(const FormatSpec& f, std::span<const float> x, std::size_t block_size, int threads,
              const WholeRoundTrip& round_trip) {
  require_round_trip(f, block_size);  // the configuration's faults are named before the data's
  const Input in = checked_input(x);
  check_configuration(f, in, block_size);
  const std::vector<float> xh = round_trip(x, block_size);
  if (xh.size() != x.size()) throw std::invalid_argument(f.name + ": the round trip returned another length");
  Metrics m = measure(x, xh, block_size, threads);
  m.is_signed = in.has_negative;
  m.bits_per_element = storage(f, x.size(), block_size).bits_per_element;  // the format's storage, whoever ran it
  return m;
}

void check_input(const std::string& text) {
  const InputSpec spec = parse_input_spec(text);
  if (spec.kind == "edges")
    throw std::invalid_argument("input spec '" + text + "': edges belong to one format; the audit measures the same "
                                "input with every format");
}

std::vector<float> make_input(const std::string& text, int threads) {
  check_input(text);
  return generate_inputs(parse_input_spec(text), FormatSpec{}, nlohmann::json::object(), threads);
}

}  // namespace lowbit::audit
