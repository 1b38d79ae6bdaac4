// lowbit-gpu-checks: the measurements device/gpu-checks.sh makes on a GPU (docs/device/README.md).
// Writes gpu-checks.json and gpu-checks.md (and the measured reciprocal table) to --out; exit 0 when
// every expectation held, 1 when one did not, 2 on bad usage or when there is no usable GPU.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

#include "bnb_library.hpp"
#include "check_report.hpp"
#include "gpu_runtime.hpp"

namespace {

using lowbit::gpu::Check;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

std::string markdown(const lowbit::gpu::DeviceInfo& d, const std::string& date, const std::vector<Check>& checks) {
  std::string s = fmt::format("# GPU checks\n\n{} (compute capability {}.{}, {} SMs), driver CUDA {}, runtime {}, {}\n\n",
                              d.name, d.major, d.minor, d.multiprocessors, version_text(d.driver),
                              version_text(d.runtime), date);
  s += "| check | result | figures |\n|---|---|---|\n";
  for (const Check& c : checks) s += fmt::format("| `{}` | {} | {} |\n", c.name, c.passed ? "as expected" : "**NOT as expected**", c.summary);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The GPU measurements of device/gpu-checks.sh: FP8 conversions on every input, rcp.approx, div.full, powf, "
                "bitsandbytes' CUDA library (quantizer and 8-bit optimizers), our block-wise kernels' bandwidth"};
  std::string out;
  std::vector<std::string> only;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--out", out, "folder for gpu-checks.json, gpu-checks.md and the measured table (created; required but with "
                 "--bnb-entry-points)");
  std::string bnb_library, policy_dir;
  std::vector<std::string> kernels_plugins;
  app.add_option("--only", only, "run only these groups")->check(CLI::IsMember({"fp8", "approx", "bnb", "bandwidth"}))->delimiter(',');
  app.add_option("--bnb-library", bnb_library, "bitsandbytes' libbitsandbytes_cuda130.so: runs the bnb group")
      ->check(CLI::ExistingFile);
  app.add_option("--kernels-plugin", kernels_plugins,
                 "our CUDA plugins (cuda_blockwise_plugin.so, whose copy kernel is the yardstick, and others): runs the "
                 "bandwidth group")
      ->check(CLI::ExistingFile);
  bool entry_points = false;
  app.add_flag("--bnb-entry-points", entry_points,
               "with --bnb-library: say which of the entry points the bnb group calls the library has, and exit "
               "(0: all, 1: one lacking; needs no GPU)");
  app.add_option("--policies", policy_dir, "the tolerance policies (default: ../share/lowbit/policies beside this program)");
  app.add_option("--threads", threads, "host threads for the reference side")->check(CLI::Range(1, 1024));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // CLI11's own exit codes (105 for a missing file) are not ours
    fmt::print(stderr, "lowbit-gpu-checks: error: {} (see --help)\n", e.what());
    return 2;
  }
  if (entry_points) {
    if (bnb_library.empty()) {
      fmt::print(stderr, "lowbit-gpu-checks: error: --bnb-entry-points needs --bnb-library\n");
      return 2;
    }
    try {
      return lowbit::gpu::print_bnb_entry_points(bnb_library);
    } catch (const std::exception& e) {
      fmt::print(stderr, "lowbit-gpu-checks: error: {}\n", e.what());
      return 2;
    }
  }
  if (out.empty()) {
    fmt::print(stderr, "lowbit-gpu-checks: error: --out is required\n");
    return 2;
  }
  auto wanted = [&](const std::string& g) { return only.empty() || std::find(only.begin(), only.end(), g) != only.end(); };

  lowbit::gpu::DeviceInfo device;
  try {
    device = lowbit::gpu::device_info();
  } catch (const lowbit::gpu::CudaError& e) {
    fmt::print(stderr, "lowbit-gpu-checks: error: no usable GPU: {}\n", e.what());
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    fmt::print(stderr, "lowbit-gpu-checks: error: --out {}: {}\n", out, ec.message());
    return 2;
  }
  const std::string date = utc_now();
  if (policy_dir.empty())
    policy_dir = (std::filesystem::canonical("/proc/self/exe").parent_path() / "../share/lowbit/policies").string();
  const lowbit::gpu::CheckContext context{threads, out, bnb_library, policy_dir, kernels_plugins};
  std::vector<Check> checks;
  const auto start = std::chrono::steady_clock::now();
  try {
    if (wanted("fp8"))
      for (Check& c : lowbit::gpu::fp8_checks(context)) checks.push_back(std::move(c));
    if (wanted("approx"))
      for (Check& c : lowbit::gpu::approx_checks(context)) checks.push_back(std::move(c));
    if (wanted("bnb")) {
      if (bnb_library.empty()) fmt::print(stderr, "lowbit-gpu-checks: bnb group skipped: no --bnb-library\n");
      for (Check& c : lowbit::gpu::bnb_cuda_checks(context)) checks.push_back(std::move(c));
      for (Check& c : lowbit::gpu::bnb_optimizer_checks(context)) checks.push_back(std::move(c));
    }
    if (wanted("bandwidth")) {
      if (kernels_plugins.empty()) fmt::print(stderr, "lowbit-gpu-checks: bandwidth group skipped: no --kernels-plugin\n");
      for (Check& c : lowbit::gpu::bandwidth_checks(context)) checks.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "lowbit-gpu-checks: error: {}\n", e.what());
    return 2;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  nlohmann::json report = {{"device", {{"name", device.name},
                                       {"compute_capability", fmt::format("{}.{}", device.major, device.minor)},
                                       {"multiprocessors", device.multiprocessors},
                                       {"driver_cuda_version", version_text(device.driver)},
                                       {"runtime_cuda_version", version_text(device.runtime)}}},
                           {"date", date},
                           {"seconds", seconds},
                           {"checks", nlohmann::json::array()}};
  bool all = true;
  for (const Check& c : checks) {
    report["checks"].push_back({{"name", c.name}, {"as_expected", c.passed}, {"summary", c.summary}, {"figures", c.figures}});
    all = all && c.passed;
    fmt::print("{} {}: {}\n", c.passed ? "ok  " : "FAIL", c.name, c.summary);
  }
  std::ofstream(std::filesystem::path(out) / "gpu-checks.json") << report.dump(2) << "\n";
  std::ofstream(std::filesystem::path(out) / "gpu-checks.md") << markdown(device, date, checks);
  fmt::print("lowbit-gpu-checks: {} checks, {} not as expected, {:.1f} s on {}\n", checks.size(),
             std::count_if(checks.begin(), checks.end(), [](const Check& c) { return !c.passed; }), seconds, device.name);
  return all ? 0 : 1;
}
