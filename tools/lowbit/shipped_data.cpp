#include "shipped_data.hpp"

#define BOOST_DLL_USE_STD_FS  // std::filesystem paths, header-only (no Boost.Filesystem to link)
#include <boost/dll/runtime_symbol_info.hpp>

#include "lowbit/cuda_runner.h"
#include <string>
#include <system_error>

namespace lowbit::cli {

namespace {

// LOWBIT_DATA_FROM_BIN: the install tree's data folder relative to its bin folder ("../share/lowbit"),
// computed by CMake from the install directories.
// A folder given relative to lowbit's own binary.
std::filesystem::path beside_binary(const char* relative) {
  std::error_code ec;
  const std::filesystem::path binary = boost::dll::program_location(ec);
  // Not expected on Linux (/proc/self/exe); the path then says why in every error that shows it.
  if (ec) return std::filesystem::path("(lowbit cannot locate its own binary: " + ec.message() + ")");
  return (binary.parent_path() / relative).lexically_normal();
}

std::filesystem::path shipped_data_dir() {
  static const std::filesystem::path dir = beside_binary(LOWBIT_DATA_FROM_BIN);
  return dir;
}

}  // namespace

std::filesystem::path shipped_policy_dir() { return shipped_data_dir() / "policies"; }
std::filesystem::path shipped_golden_dir() { return shipped_data_dir() / "golden"; }
std::filesystem::path shipped_cuda_runner() { return beside_binary(LOWBIT_LIB_FROM_BIN) / LOWBIT_CUDA_RUNNER_LIBRARY; }

}  // namespace lowbit::cli
