// lowbit verify and the plugin host: the reference as a plugin passes every format (no false alarm),
// each mutant of the bank is caught by the default inputs with the class a kernel author expects,
// and a plugin that is malformed, crashes, hangs or fails is refused (exit 2) or reported (exit 1),
// never a crash of lowbit. The plugins are built beside this test (conformance/CMakeLists.txt).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "cli_run.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/plugin_host.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::string plugin(const std::string& name) { return std::string(LOWBIT_PLUGIN_DIR) + "/" + name + ".so"; }

std::size_t lines_starting(const std::string& text, const std::string& start) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find("\n" + start, at)) != std::string::npos; ++at) ++n;
  return n + (text.starts_with(start) ? 1 : 0);
}

}  // namespace

TEST_CASE("the reference as a plugin lists one kernel per registered format") {
  const std::vector<PluginKernel> kernels = plugin_kernels(plugin("reference_plugin"), 30);
  REQUIRE(kernels.size() == registered_formats().size());
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    CHECK(kernels[i].format == registered_formats()[i].name);
    CHECK(kernels[i].name == "reference." + registered_formats()[i].name);
    CHECK(kernels[i].host);
  }
}

TEST_CASE("verify: the reference as a plugin is conformant for every format on the default inputs and the golden cases") {
  for (const FormatSpec& f : registered_formats()) {
    CAPTURE(f.name);
    const Run r = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference." + f.name + " --steps 2");
    CAPTURE(r.output);
    // COAT's activation formats take 2-D inputs the generators do not make: their golden cases only
    CHECK(r.code == 0);
    CHECK(r.output.find("cases conformant: conformant") != std::string::npos);
    CHECK(lines_starting(r.output, "MISMATCH") == 0);
    CHECK(lines_starting(r.output, "FAILED") == 0);
  }
}

TEST_CASE("verify catches each mutant of the bank on its default inputs") {
  struct Mutant {
    const char* library;
    const char* caught_by;  // the input that must catch it
  };
  for (const Mutant& m : {Mutant{"mutant_reciprocal", "MISMATCH scaled-edges"},
                          Mutant{"mutant_flush_subnormal", "MISMATCH edges"},
                          Mutant{"mutant_fp8_ties_away", "MISMATCH edges"},
                          Mutant{"mutant_codebook_ties_down", "MISMATCH scaled-edges"},
                          Mutant{"mutant_fp8_saturate", "MISMATCH special"},
                          Mutant{"mutant_fp8_overflow_nan", "MISMATCH special"},
                          Mutant{"mutant_fp8_nan_sign", "MISMATCH special"},
                          Mutant{"mutant_fp8_nan_payload", "MISMATCH special"},
                          // only the golden case with NaNs catches it: no generated torchao.fp8 input has a NaN
                          Mutant{"mutant_absmax_ignores_nan", "MISMATCH special.n256"},
                          Mutant{"mutant_bf16_scale", "MISMATCH normal.n4096.seed1"},
                          Mutant{"mutant_bnb_tail_codes_zero", "MISMATCH special"},
                          Mutant{"mutant_bnb_cuda_search", "MISMATCH scaled-edges"}}) {
    CAPTURE(m.library);
    TempDir dir("lowbit_verify_");
    const Run r = lowbit_cli("verify --kernel " + plugin(m.library) + " --report " + (dir / "r.json") + " --save-cases " +
                             (dir / "cases"));
    CAPTURE(r.output);
    CHECK(r.code == 1);
    CHECK(r.output.find(m.caught_by) != std::string::npos);
    CHECK(r.output.find("NOT conformant") != std::string::npos);
    CHECK(std::filesystem::exists(dir / "r.json"));
    CHECK(!std::filesystem::is_empty(dir / "cases"));  // the failing cases, to attach to a pull request
  }
}

TEST_CASE("verify: a kernel that crashes, hangs or returns an error is reported per case, not conformant") {
  struct Bad {
    const char* library;
    const char* words;
  };
  for (const Bad& b : {Bad{"malformed_crash", "the kernel killed by signal 11 (SIGSEGV)"},
                       Bad{"malformed_hang", "the kernel timed out after 0.5 s"},
                       Bad{"malformed_status", "the kernel returned 7: this kernel refuses every case"}}) {
    CAPTURE(b.library);
    // Under AddressSanitizer (the sanitize preset) the child would report its SIGSEGV and exit 1
    // instead of dying by the signal; let the signal through, as in a normal build.
    const Run r = run_shell("ASAN_OPTIONS=handle_segv=0 " + std::string(LOWBIT_CLI) + " verify --kernel " +
                            plugin(b.library) + " --input normal:n=256 --no-golden --timeout 0.5");
    CAPTURE(r.output);
    CHECK(r.code == 1);
    CHECK(r.output.find(b.words) != std::string::npos);
  }
}

TEST_CASE("verify refuses an unusable plugin with one line naming it, exit 2") {
  struct Bad {
    const char* library;
    const char* words;
  };
  for (const Bad& b : {Bad{"malformed_abi_version", "its ABI version is 99, this lowbit speaks version 1"},
                       Bad{"malformed_no_kernels", "its table must list 1 to 1024 kernels (it says 0)"},
                       Bad{"malformed_no_run", "kernel #0 has no run function"},
                       Bad{"malformed_unknown_format", "implements format 'no.such.format', which is not registered"},
                       Bad{"malformed_no_entry", "it exports no lowbit_plugin_v1"},
                       Bad{"malformed_load_crash", "loading it killed by signal 6 (SIGABRT)"}}) {
    CAPTURE(b.library);
    const Run r = lowbit_cli("verify --kernel " + plugin(b.library) + " --input normal:n=64");
    CAPTURE(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(b.words) != std::string::npos);
    CHECK(r.output.find(b.library) != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  const Run bad_input = lowbit_cli("verify --kernel " + plugin("malformed_status") + " --input coat:n=3");
  CHECK(bad_input.code == 2);
  CHECK(bad_input.output.find("--input 'coat:n=3'") != std::string::npos);
  const Run no_golden = lowbit_cli("verify --kernel " + plugin("malformed_status") + " --golden /nonexistent");
  CHECK(no_golden.code == 2);
  CHECK(no_golden.output.find("--golden: '/nonexistent' holds no MANIFEST.json") != std::string::npos);
  const Run missing = lowbit_cli("verify --kernel /nonexistent/plugin.so");
  CHECK(missing.code == 2);
  CHECK(missing.output.find("'/nonexistent/plugin.so' is not a file") != std::string::npos);
  const Run several = lowbit_cli("verify --kernel " + plugin("reference_plugin"));
  CHECK(several.code == 2);
  CHECK(several.output.find("name one as LIB:NAME") != std::string::npos);
  const Run wrong = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference.torchao.fp8 --format torchao.qmap");
  CHECK(wrong.code == 2);
  CHECK(wrong.output.find("implements torchao.fp8") != std::string::npos);
}

TEST_CASE("verify writes no report over the plugin it runs") {
  TempDir dir("lowbit_verify_guard_");
  std::filesystem::copy_file(plugin("mutant_flush_subnormal"), dir / "k.so");
  const auto before = std::filesystem::file_size(dir / "k.so");
  const Run r = lowbit_cli("verify --kernel " + (dir / "k.so") + " --input edges --no-golden --report " + (dir / "k.so"));
  CAPTURE(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("k.so") != std::string::npos);
  CHECK(std::filesystem::file_size(dir / "k.so") == before);
  CHECK(plugin_kernels(dir / "k.so", 30).size() == 1);  // still the plugin
}
