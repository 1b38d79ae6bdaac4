// Already-quantized tensors (audit_exact.hpp): the round trips that give most blocks of x back unchanged.
#include "lowbit/audit_exact.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "lowbit/audit.hpp"

namespace lowbit::audit {

namespace {

constexpr std::size_t kSampleBlocks = 16;

struct Count {
  std::size_t exact = 0, blocks = 0;
  void add(Count o) { exact += o.exact, blocks += o.blocks; }
  bool enough() const { return blocks > 0 && static_cast<double>(exact) >= kExactShare * static_cast<double>(blocks); }
};

// The blocks of x[start, start + len) (start a block boundary) that hold a nonzero value, and those
// of them the round trip gives back unchanged.
Count count_run(const FormatSpec& f, std::span<const float> x, std::size_t start, std::size_t len, std::size_t block,
                bool negative, std::vector<float>& scratch) {
  scratch.resize(len);
  const auto xs = x.subspan(start, len);
  f.round_trip(xs, block, negative, scratch);
  Count c;
  for (std::size_t b = 0; b < len; b += block) {
    const std::size_t end = std::min(len, b + block);
    if (std::all_of(xs.begin() + b, xs.begin() + end, [](float v) { return v == 0.0f; })) continue;
    ++c.blocks;
    c.exact += std::equal(xs.begin() + b, xs.begin() + end, scratch.begin() + b) ? 1 : 0;  // ==: -0 and +0 are no error
  }
  return c;
}

}  // namespace

std::vector<ExactRoundTrip> exact_round_trips(std::span<const float> x, const std::vector<const FormatSpec*>& formats) {
  if (!std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); }))
    throw std::invalid_argument("the input has NaN or infinite values; the audit measures finite data");
  std::vector<ExactRoundTrip> out;
  const bool negative = std::any_of(x.begin(), x.end(), [](float v) { return v < 0.0f; });
  constexpr std::size_t kRun = std::size_t{1} << 18;  // whole blocks at a time: a bounded scratch
  std::vector<float> scratch;
  for (const FormatSpec* f : formats) {
    if (!f->round_trip) continue;
    std::optional<ExactRoundTrip> best;  // the block size with the largest share of unchanged blocks
    for (std::size_t block = kMinBlock; block <= kMaxBlock; block *= 2) {
      if (!not_applicable(*f, block, negative).empty()) continue;
      const std::size_t sample = std::min(x.size(), kSampleBlocks * block);
      if (!count_run(*f, x, 0, sample, block, negative, scratch).enough()) continue;
      const std::size_t run = std::max(block, kRun / block * block);
      Count all;
      for (std::size_t start = 0; start < x.size(); start += run)
        all.add(count_run(*f, x, start, std::min(run, x.size() - start), block, negative, scratch));
      // exact * best.blocks > best.exact * blocks: a larger share, compared without division
      if (all.enough() && (!best || all.exact * best->blocks > best->exact_blocks * all.blocks))
        best = ExactRoundTrip{f, block, all.exact, all.blocks};
    }
    if (best) out.push_back(*best);
  }
  return out;
}

std::string exact_warning(const std::string& name, const std::vector<ExactRoundTrip>& exact) {
  std::string list;  // per format, the block size that gives back most blocks unchanged
  for (const auto& e : exact)
    list += fmt::format("{}{} at block {} gives {} of its {} nonzero blocks back unchanged", list.empty() ? "" : ", ",
                        e.format->name, e.block_size, e.exact_blocks, e.blocks);
  return fmt::format("{} looks already quantized: {} (zero error); its values are the dequantized values of a quantized "
                     "state, so the audit's low error there is not a finding (docs/audit.md#already-quantized-states)",
                     name, list);
}

}  // namespace lowbit::audit
