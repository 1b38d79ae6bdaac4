#include "shipped_data.hpp"

#define BOOST_DLL_USE_STD_FS  // std::filesystem paths, header-only (no Boost.Filesystem to link)
#include <boost/dll/runtime_symbol_info.hpp>
#include <string>
#include <system_error>

namespace lowbit::cli {

namespace {

// LOWBIT_DATA_FROM_BIN: the install tree's data folder relative to its bin folder ("../share/lowbit"),
// computed by CMake from the install directories.
std::filesystem::path shipped_data_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path binary = boost::dll::program_location(ec);
    // Not expected on Linux (/proc/self/exe); the path then says why in every error that shows it.
    if (ec) return std::filesystem::path("(lowbit cannot locate its own binary: " + ec.message() + ")");
    return (binary.parent_path() / LOWBIT_DATA_FROM_BIN).lexically_normal();
  }();
  return dir;
}

}  // namespace

std::filesystem::path shipped_policy_dir() { return shipped_data_dir() / "policies"; }
std::filesystem::path shipped_golden_dir() { return shipped_data_dir() / "golden"; }

}  // namespace lowbit::cli
