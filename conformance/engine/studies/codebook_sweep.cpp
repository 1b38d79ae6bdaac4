#include "lowbit/codebook_sweep.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>

#include "lowbit/codebook.hpp"
#include "lowbit/float_bits.hpp"

namespace lowbit::codebook {

std::string_view search_name(Search s) {
  switch (s) {
    case Search::Torchao: return "torchao";
    case Search::BnbCuda: return "bnb-cuda";
    case Search::BnbDefault: return "bnb-default";
    case Search::BnbCpuLut: return "bnb-cpu-lut";
    case Search::BnbCpuOld: return "bnb-cpu-old";
    case Search::ExactTiesLower: return "exact-ties-lower";
    case Search::ExactTiesUpper: return "exact-ties-upper";
  }
  return "?";
}

namespace {

constexpr std::size_t kN = kSearches.size();

struct Partial {
  std::uint64_t inputs = 0, ties = 0;
  std::array<std::array<std::uint64_t, kN>, kN> disagreements{};
  std::array<std::array<std::vector<SearchExample>, kN>, kN> examples;
  std::array<std::vector<bool>, kN> produced;
};

// The input patterns of the sweep, in increasing bit order: the non-negative half [+0, 1], then
// for a signed map the negative half [-0, -1].
struct Range {
  std::uint32_t first, last;  // inclusive
};

}  // namespace

SearchSweepResult run_search_sweep(const SearchSweepConfig& cfg) {
  if (cfg.qmap.size() != 256 || !std::is_sorted(cfg.qmap.begin(), cfg.qmap.end()))
    throw std::invalid_argument("the search sweep needs a sorted 256-entry qmap");
  if (cfg.threads < 1) throw std::invalid_argument("thread count must be at least 1");
  const auto start = std::chrono::steady_clock::now();
  const std::span<const float> q(cfg.qmap);
  const BnbCpuLut lut(q);
  std::vector<Range> ranges = {{0x00000000u, 0x3F800000u}};
  if (cfg.is_signed) ranges.push_back({0x80000000u, 0xBF800000u});
  constexpr std::uint64_t kChunk = 1u << 22;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;  // [begin, end) over patterns
  std::uint64_t total = 0;
  for (const Range& r : ranges)
    for (std::uint64_t b = r.first; b <= r.last; b += kChunk) {
      chunks.emplace_back(b, std::min<std::uint64_t>(b + kChunk, std::uint64_t{r.last} + 1));
      total += chunks.back().second - b;
    }
  std::vector<Partial> partials(chunks.size());
  std::atomic<std::uint64_t> done{0};

#pragma omp parallel for schedule(dynamic, 1) num_threads(cfg.threads)
  for (std::int64_t c = 0; c < static_cast<std::int64_t>(chunks.size()); ++c) {
    Partial& p = partials[static_cast<std::size_t>(c)];
    for (auto& v : p.produced) v.assign(256, false);
    for (std::uint64_t u = chunks[static_cast<std::size_t>(c)].first; u < chunks[static_cast<std::size_t>(c)].second; ++u) {
      const float y = float_from_bits(static_cast<std::uint32_t>(u));
      const std::array<std::uint8_t, kN> codes{torchao_search(y, q),      bnb_cuda_search(y, q),
                                               bnb_default_search(y, q),  lut(y),
                                               bnb_cpu_exact_search(y, q), exact_nearest(y, q, Ties::Lower),
                                               exact_nearest(y, q, Ties::Upper)};
      ++p.inputs;
      p.ties += codes[5] != codes[6];  // the two exact rules part exactly on ties
      for (std::size_t a = 0; a < kN; ++a) {
        p.produced[a][codes[a]] = true;
        for (std::size_t b = a + 1; b < kN; ++b) {
          if (codes[a] == codes[b]) continue;
          ++p.disagreements[a][b];
          if (p.examples[a][b].size() < cfg.examples_per_pair) p.examples[a][b].push_back({static_cast<std::uint32_t>(u), codes});
        }
      }
    }
    const std::uint64_t finished = done.fetch_add(chunks[static_cast<std::size_t>(c)].second - chunks[static_cast<std::size_t>(c)].first) +
                                   (chunks[static_cast<std::size_t>(c)].second - chunks[static_cast<std::size_t>(c)].first);
    if (cfg.progress && omp_get_thread_num() == 0) cfg.progress(finished, total);
  }

  SearchSweepResult r;
  for (auto& v : r.produced) v.assign(256, false);
  for (const Partial& p : partials) {  // merged in input order: identical for any thread count
    r.inputs += p.inputs;
    r.exact_ties += p.ties;
    for (std::size_t a = 0; a < kN; ++a) {
      for (std::size_t k = 0; k < 256; ++k) r.produced[a][k] = r.produced[a][k] || p.produced[a][k];
      for (std::size_t b = a + 1; b < kN; ++b) {
        r.disagreements[a][b] += p.disagreements[a][b];
        r.disagreements[b][a] = r.disagreements[a][b];
        for (const SearchExample& e : p.examples[a][b])
          if (r.examples[a][b].size() < cfg.examples_per_pair) r.examples[a][b].push_back(e);
      }
    }
  }
  if (cfg.progress) cfg.progress(total, total);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace lowbit::codebook
