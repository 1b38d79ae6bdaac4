#pragma once
// Exhaustive comparison of the codebook searches of torchao and bitsandbytes: every binary32 value
// in the map's range ([-1, 1] signed, [0, 1] unsigned), normalized as the quantizers see it, run
// through each implementation's search, with the disagreements between every pair counted and the
// first examples kept. Produces the counts of docs/formats/codebook-differences.md.
#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace lowbit::codebook {

// The searches compared, in report order.
enum class Search { Torchao, BnbCuda, BnbDefault, BnbCpuLut, BnbCpuOld, ExactTiesLower, ExactTiesUpper };
inline constexpr std::array<Search, 7> kSearches{Search::Torchao,   Search::BnbCuda,        Search::BnbDefault,
                                                 Search::BnbCpuLut, Search::BnbCpuOld,      Search::ExactTiesLower,
                                                 Search::ExactTiesUpper};
std::string_view search_name(Search s);

struct SearchExample {
  std::uint32_t input_bits;
  std::array<std::uint8_t, kSearches.size()> codes;  // every search's code for this input
};

struct SearchSweepResult {
  std::uint64_t inputs = 0;
  std::uint64_t exact_ties = 0;  // inputs exactly half-way between two neighbouring entries
  // disagreements[a][b]: inputs where search a and search b give different codes (symmetric)
  std::array<std::array<std::uint64_t, kSearches.size()>, kSearches.size()> disagreements{};
  std::array<std::array<std::vector<SearchExample>, kSearches.size()>, kSearches.size()> examples;  // first few, a < b
  std::array<std::vector<bool>, kSearches.size()> produced;  // which codes each search can produce here
  double seconds = 0;
};

struct SearchSweepConfig {
  std::vector<float> qmap;  // sorted, 256 entries
  bool is_signed = true;    // range [-1, 1] or [0, 1]
  int threads = 1;
  std::size_t examples_per_pair = 4;
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

SearchSweepResult run_search_sweep(const SearchSweepConfig& config);

}  // namespace lowbit::codebook
