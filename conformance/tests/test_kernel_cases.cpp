// Cases made by a kernel under review (kernel_cases.hpp; golden generate --kernel): the cut into head
// and tail blocks is the reference's own (the reference on a slice is the slice of the reference), a
// host twin of our CUDA kernels makes the reference's tensors byte for byte, a mutant is refused with
// its class and nothing is written, and every usage fault is one line, exit 2. The twins and mutants are
// built beside this test (conformance/CMakeLists.txt).
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "lowbit/case.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/kernel_cases.hpp"
#include "lowbit/plugin_host.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::string plugin(const std::string& name) { return std::string(LOWBIT_PLUGIN_DIR) + "/" + name + ".so"; }

const char* const kBlockwiseFormats[] = {"torchao.codebook8.signed", "torchao.codebook8.unsigned", "torchao.codebook4.signed",
                                         "torchao.codebook4.unsigned", "torchao.fp8", "bnb.blockwise8.dynamic",
                                         "bnb.blockwise8.linear"};

// The cases the reference makes for a spec (optimizers: `steps` steps), complete.
std::vector<Case> reference_cases(const FormatSpec& f, const nlohmann::json& params, const std::string& spec, int steps) {
  std::vector<Case> out;
  for_each_case(f, params, parse_input_spec(spec), steps, {"test", "test"}, [&](CaseToRun c) {
    out.push_back(run_reference(f, c.inputs));
    return out.back();
  });
  return out;
}

bool same_tensors(const Case& a, const Case& b) {
  if (a.tensors().size() != b.tensors().size()) return false;
  for (const Tensor& t : a.tensors()) {
    const Tensor* u = b.find(t.name);
    if (!u || u->dtype != t.dtype || u->shape != t.shape || u->bytes != t.bytes) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("the cut into whole blocks is the reference's own: the reference on a slice equals that slice of its outputs") {
  std::vector<std::string> cut, whole;
  for (const FormatSpec& f : registered_formats()) {
    CAPTURE(f.name);
    const std::optional<Slicing> s = slicing(f, f.default_params);
    (s ? cut : whole).push_back(f.name);
    if (!s) continue;
    // 37 units (partial tails where the format takes them: one unit and 5 elements more)
    const std::size_t n = s->unit * 37;
    std::vector<Case> cases;
    for (const std::string extra : {"+5", ""}) {
      try {
        cases = reference_cases(f, f.default_params, "normal:n=" + std::to_string(n + (extra.empty() ? 0 : 5)) + ",seed=4", 2);
        break;
      } catch (const std::exception&) {  // torchao quantizes whole blocks only
      }
    }
    REQUIRE(!cases.empty());
    for (const Case& c : cases) {
      const std::size_t total = c.require(s->root).element_count();
      for (const std::pair<std::size_t, std::size_t>& range : {std::pair<std::size_t, std::size_t>{0, s->unit * 3},
                                                              {s->unit * 11, s->unit * 20},
                                                              {s->unit * 30, total}}) {
        const std::size_t begin = range.first, end = range.second;  // not a structured binding: CAPTURE is a lambda
        CAPTURE(begin);
        CAPTURE(end);
        const Case part = slice_case(f, c, *s, f.default_params, begin, end);
        Case inputs;
        inputs.metadata = part.metadata;
        for (const Tensor& t : part.tensors())
          if (f.tensor(t.name) && std::find(f.outputs.begin(), f.outputs.end(), t.name) == f.outputs.end()) inputs.add(t);
        CHECK(same_tensors(run_reference(f, inputs), part));
      }
    }
  }
  // what a kernel's check cuts (every block-wise quantizer and optimizer) and what it checks whole
  CAPTURE(nlohmann::json(cut).dump());
  CAPTURE(nlohmann::json(whole).dump());
  for (const char* name : kBlockwiseFormats) CHECK(std::find(cut.begin(), cut.end(), name) != cut.end());
  for (const char* name : {"coat.optim.origin.e4m3", "coat.optim.expand.e4m3", "fp8.perblock.e4m3"})
    CHECK(std::find(cut.begin(), cut.end(), name) != cut.end());
  for (const char* name : {"torchao.qmap", "coat.act.pergroup", "coat.act.perblock", "coat.fake.symm"}) CHECK(std::find(whole.begin(), whole.end(), name) != whole.end());
}

TEST_CASE("slice_case refuses cuts that are not whole units") {
  const FormatSpec& f = *find_format("torchao.codebook4.signed");
  const std::optional<Slicing> s = slicing(f, f.default_params);
  REQUIRE(s);
  CHECK(s->root == "input");
  CHECK(s->unit == 128);  // the block; even, so packed bytes split cleanly
  const Case c = reference_cases(f, f.default_params, "normal:n=1024", 1).at(0);
  CHECK_THROWS_AS(slice_case(f, c, *s, f.default_params, 1, 256), std::invalid_argument);
  CHECK_THROWS_AS(slice_case(f, c, *s, f.default_params, 0, 200), std::invalid_argument);
  CHECK_THROWS_AS(slice_case(f, c, *s, f.default_params, 0, 2048), std::invalid_argument);
  const Case part = slice_case(f, c, *s, f.default_params, 256, 512);
  CHECK(part.require("codes_packed").element_count() == 128);
  CHECK(part.require("scale").element_count() == 2);
  CHECK(part.require("qmap").element_count() == 16);
}

TEST_CASE("golden generate --kernel: the block-wise host twin makes the reference's tensors, checked whole and by head and tail") {
  TempDir dir("lowbit_kernel_generate_");
  for (const char* format : kBlockwiseFormats) {
    CAPTURE(format);
    // 40 000 values: whole when --check-elements is the default, head and tail blocks at 4 096
    for (const std::string check : {"", " --check-elements 4096"}) {
      const std::string in = "normal:n=40960,seed=5";
      const Run ref = lowbit_cli("golden generate --format " + std::string(format) + " --input " + in + " --out " + (dir / "ref"));
      REQUIRE(ref.code == 0);
      const Run k = lowbit_cli("golden generate --kernel " + plugin("blockwise_host_twin") + ":host-twin." + format +
                               " --input " + in + " --out " + (dir / "k") + " --replace" + check);
      CAPTURE(k.output);
      REQUIRE(k.code == 0);
      // the head and tail blocks: 2 048 elements each, or one block where blocks are larger (bitsandbytes' 4 096)
      CHECK(k.output.find(check.empty() ? "every element bit-identical to the reference"
                                        : std::string(format).starts_with("bnb")
                                              ? "head: elements [0, 4096) and tail: elements [36864, 40960) of 40960 bit-identical"
                                              : "head: elements [0, 2048) and tail: elements [38912, 40960) of 40960 bit-identical")
            != std::string::npos);
      const std::string file = std::string(format) + "/normal.n40960.seed5.safetensors";
      const Case a = read_case(dir / ("ref/" + file)), b = read_case(dir / ("k/" + file));
      CHECK(same_tensors(a, b));
      for (const char* key : {"format", "params", "seed", "input"}) CHECK(a.meta(key) == b.meta(key));
      CHECK(b.meta("source").starts_with("kernel host-twin." + std::string(format) + " of blockwise_host_twin.so (sha256 "));
      CHECK(b.meta("source").ends_with("), host memory"));
      CHECK(b.meta("generator").ends_with(" --kernel"));
      CHECK(b.meta("kernel_check").starts_with("outputs bit-identical to the reference on "));
      // the MANIFEST names the kernel too
      const nlohmann::json m = nlohmann::json::parse(slurp(dir / "k/MANIFEST.json"));
      bool listed = false;
      for (const auto& e : m.at("files"))
        if (e.at("path") == file) listed = e.at("source") == b.meta("source") && e.at("function") == b.meta("function");
      CHECK(listed);
    }
  }
}

TEST_CASE("golden generate --kernel: COAT's optimizer twin makes the reference's steps") {
  TempDir dir("lowbit_kernel_generate_coat_");
  for (const std::string format : {"coat.optim.origin.e4m3", "coat.optim.expand.e4m3"}) {
    const std::string args = " --input adam-v:n=3000,seed=3 --steps 2 --out ";
    REQUIRE(lowbit_cli("golden generate --format " + format + args + (dir / "ref")).code == 0);
    const Run k = lowbit_cli("golden generate --kernel " + plugin("coat_host_twin") + ":host-twin." + format + args + (dir / "k") +
                             " --check-elements 1024");
    CAPTURE(k.output);
    REQUIRE(k.code == 0);
    for (const char* step : {"step1", "step2"}) {
      const std::string file = format + "/adam-v.n3000.seed3." + step + ".safetensors";
      CHECK(same_tensors(read_case(dir / ("ref/" + file)), read_case(dir / ("k/" + file))));
    }
  }
}

TEST_CASE("golden generate --kernel refuses a mutant's cases with their class and writes nothing") {
  TempDir dir("lowbit_kernel_refuse_");
  // torchao's search with ties down: the edges put inputs on the qmap's midpoints
  const Run ties = lowbit_cli("golden generate --kernel " + plugin("blockwise_mutant_ties_down_host_twin") +
                              ":host-twin.torchao.codebook8.signed --input normal:n=4096 --input edges --out " + (dir / "out"));
  CAPTURE(ties.output);
  CHECK(ties.code == 1);
  CHECK(ties.output.find("REFUSED  edges: kernel host-twin.torchao.codebook8.signed, all ") != std::string::npos);
  CHECK(ties.output.find(" tie") != std::string::npos);
  CHECK(ties.output.find("nothing written") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "out"));
  // a kernel that leaves the partial last block unquantized: caught by the tail blocks, not the head
  const Run tail = lowbit_cli("golden generate --kernel " + plugin("mutant_bnb_tail_codes_zero") +
                              " --input normal:n=50000 --param block_size=256 --check-elements 4096 --out " + (dir / "out"));
  CAPTURE(tail.output);
  CHECK(tail.code == 1);
  CHECK(tail.output.find("tail: elements [47872, 50000): 'codes' ") != std::string::npos);
  CHECK(tail.output.find("head:") == std::string::npos);
  CHECK(!std::filesystem::exists(dir / "out"));
}

TEST_CASE("golden generate and audit --kernel: a kernel that crashes, hangs or returns an error is refused, exit 1, nothing written") {
  TempDir dir("lowbit_kernel_fails_");
  for (const auto& [name_, says] : std::vector<std::pair<std::string, std::string>>{
           {"malformed_crash", "REFUSED  normal: kernel k killed by signal 11 (SIGSEGV)\n"},
           {"malformed_hang", "REFUSED  normal: kernel k timed out after 1.0 s\n"},
           {"malformed_status", "REFUSED  normal: kernel k returned 7: this kernel refuses every case\n"}}) {
    const std::string name = name_;  // CAPTURE (a lambda) cannot take a structured binding under clang
    CAPTURE(name);
    // under AddressSanitizer the child would report its SIGSEGV and exit 1: let the signal through (as test_verify does)
    const auto cli = [](const std::string& args) { return run_shell("ASAN_OPTIONS=handle_segv=0 " + std::string(LOWBIT_CLI) + " " + args); };
    const Run g = cli("golden generate --kernel " + plugin(name) + " --timeout 1 --input normal --out " + (dir / "out"));
    CAPTURE(g.output);
    CHECK(g.code == 1);
    CHECK(g.output.starts_with(says));
    CHECK(!std::filesystem::exists(dir / "out"));
    const Run a = cli("audit --kernel " + plugin(name) + " --timeout 1 --input normal:n=4096 --formats torchao.fp8 "
                             "--block-sizes 256 --quiet --report " + (dir / "r.json"));
    CAPTURE(a.output);
    CHECK(a.code == 1);
    CHECK(a.output.find("REFUSED  normal:n=4096 torchao.fp8 block 256: kernel k ") != std::string::npos);
    CHECK(!std::filesystem::exists(dir / "r.json"));
  }
}

TEST_CASE("golden generate --kernel: a bad plugin, an unknown kernel, another format: one line, exit 2") {
  TempDir dir("lowbit_kernel_bad_");
  // listed: the plugin's kernels come first, one a line ("  NAME (FORMAT)"), then the error's line
  const auto one_line = [&](const std::string& args, const std::string& says, std::size_t listed = 0) {
    const Run r = lowbit_cli("golden generate " + args + " --input normal --out " + (dir / "out"));
    CAPTURE(args);
    CAPTURE(r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == listed + 1);
    std::size_t at = 0;
    for (std::size_t i = 0; i < listed; ++i, at = r.output.find('\n', at) + 1) CHECK(r.output.compare(at, 2, "  ") == 0);
    CHECK(r.output.find(says, at) != std::string::npos);
    CHECK(!std::filesystem::exists(dir / "out"));
  };
  const std::size_t twins = plugin_kernels(plugin("blockwise_host_twin"), 30).size();
  one_line("--kernel /nonexistent/k.so", "--kernel: '/nonexistent/k.so' is not a file");
  one_line("--format torchao.fp8 --check-elements 5", "--check-elements, --timeout and --kernel-memory apply with --kernel only");
  one_line("--kernel " + plugin("blockwise_host_twin") + ":no.such.kernel", "has no kernel named 'no.such.kernel'", twins);
  one_line("--kernel " + plugin("blockwise_host_twin"), "name one as LIB:NAME", twins);
  one_line("--kernel " + plugin("malformed_no_entry"), "exports no lowbit_plugin_v1");
  one_line("--kernel " + plugin("blockwise_host_twin") + ":host-twin.torchao.fp8 --format torchao.codebook8.signed",
           "--format torchao.codebook8.signed: kernel 'host-twin.torchao.fp8' implements torchao.fp8");
  // no NAME, a format that none of the plugin's kernels implements: all of them listed
  one_line("--kernel " + plugin("blockwise_host_twin") + " --format coat.act.pergroup",
           "--kernel: " + std::filesystem::canonical(plugin("blockwise_host_twin")).string() +
               " holds no kernel of format coat.act.pergroup (its " + std::to_string(twins) + " kernels are listed above)",
           twins);
}

TEST_CASE("--kernel LIB with --format F: the one kernel of LIB implementing F, without its name") {
  TempDir dir("lowbit_kernel_choice_");
  const Run r = lowbit_cli("golden generate --kernel " + plugin("blockwise_host_twin") +
                           " --format torchao.codebook8.unsigned --input normal:n=512 --out " + (dir / "out"));
  CAPTURE(r.output);
  CHECK(r.code == 0);
  const nlohmann::json m = nlohmann::json::parse(slurp(dir / "out/MANIFEST.json"));
  CHECK(m.dump().find("kernel host-twin.torchao.codebook8.unsigned of blockwise_host_twin.so") != std::string::npos);
  // the reference plugin holds 37 kernels, one of each format: verify takes torchao.fp8's
  const Run v = lowbit_cli("verify --kernel " + plugin("reference_plugin") + " --format torchao.fp8 --input special --no-golden");
  CAPTURE(v.output);
  CHECK(v.code == 0);
  CHECK(v.output.find("verify: kernel reference.torchao.fp8 (") != std::string::npos);
}

TEST_CASE("golden generate --kernel on a CUDA kernel: the device in the provenance; without a device one line, exit 2") {
  TempDir dir("lowbit_kernel_cuda_");
  const std::string lib = plugin("cuda_perblock_declared_twin");
  const std::string fake = "LOWBIT_CUDA_RUNNER=" + plugin("fake_cuda_runner") + " " + std::string(LOWBIT_CLI);
  const Run none = run_shell("LOWBIT_FAKE_CUDA=no-device " + fake + " golden generate --kernel " + lib +
                             " --input normal --out " + (dir / "out"));
  CAPTURE(none.output);
  CHECK(none.code == 2);
  CHECK(none.output == "lowbit: error: kernel 'host-twin.fp8.perblock.e4m3' in '" + lib +
                           "' needs a CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected\n");
  CHECK(!std::filesystem::exists(dir / "out"));
  const Run ok = run_shell("LOWBIT_FAKE_CUDA=ok " + fake + " golden generate --kernel " + lib + " --input normal --out " + (dir / "out"));
  CAPTURE(ok.output);
  REQUIRE(ok.code == 0);
  CHECK(ok.output.starts_with("device: lowbit fake device (compute capability 9.0), driver 13.1, runtime 13.0\n"));
  CHECK(ok.output.find(", kernel 0.250 ms") != std::string::npos);
  const Case c = read_case(dir / "out/fp8.perblock.e4m3/normal.safetensors");
  CHECK(c.meta("source").ends_with(" on lowbit fake device (compute capability 9.0), driver 13.1, runtime 13.0"));
}

// ---- audit --kernel --------------------------------------------------------------------------------

TEST_CASE("audit --kernel: the block-wise host twin's round trips measure what the reference's do; the report says where each ran") {
  TempDir dir("lowbit_kernel_audit_");
  // 100 000 values: a partial last block at every size (bitsandbytes and the per-block format take it
  // as it is, torchao's is padded); head and tail checked at 8 192
  const std::string args = " --input normal:n=100000,seed=3 --block-sizes 64,256 --formats 'torchao.*,bnb.*,fp8.perblock.e4m3' --quiet";
  const Run ref = lowbit_cli("audit" + args + " --csv " + (dir / "r.csv"));
  REQUIRE(ref.code == 0);
  const Run k = lowbit_cli("audit --kernel " + plugin("blockwise_host_twin") + args + " --check-elements 8192 --csv " +
                           (dir / "k.csv") + " --report " + (dir / "k.json"));
  CAPTURE(k.output);
  REQUIRE(k.code == 0);
  // the same measures, to the last digit: the reference's own round trip (FormatSpec::round_trip) is the independent side
  CHECK(slurp(dir / "r.csv") == slurp(dir / "k.csv"));
  CHECK(k.output.find("checked  normal:n=100000,seed=3 bnb.blockwise8.dynamic block 64: kernel host-twin.bnb.blockwise8.dynamic: "
                      "head: elements [0, 4096) and tail: elements [95872, 100000) of 100000 bit-identical") != std::string::npos);
  CHECK(k.output.find("torchao.fp8 block 256: kernel host-twin.torchao.fp8: head: elements [0, 4096) and tail: elements "
                      "[96000, 100096) of 100096") != std::string::npos);  // padded to whole blocks
  CHECK(k.output.find("ran on the reference: fp8.perblock.e4m3 64, fp8.perblock.e4m3 256\n") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(slurp(dir / "k.json"));
  CHECK(j.at("kernel").at("library").get<std::string>().starts_with("blockwise_host_twin.so (sha256 "));
  std::size_t on_kernel = 0, on_reference = 0;
  for (const auto& row : j.at("rows")) {
    if (row.at("status") != "ok") continue;
    if (row.at("format") == "fp8.perblock.e4m3") {
      CHECK(row.at("ran_on") == "reference");
      ++on_reference;
    } else {
      CHECK(row.at("ran_on") == "kernel host-twin." + row.at("format").get<std::string>());
      ++on_kernel;
    }
  }
  CHECK(on_kernel == 10);  // the unsigned maps are n/a on signed data
  CHECK(on_reference == 2);
}

TEST_CASE("audit --kernel refuses a mutant's round trip and writes no report; a CUDA kernel without a device is one line, exit 2") {
  TempDir dir("lowbit_kernel_audit_refuse_");
  const Run tail = lowbit_cli("audit --kernel " + plugin("mutant_bnb_tail_codes_zero") +
                              " --input normal:n=50000 --block-sizes 256 --formats bnb.blockwise8.dynamic --check-elements 4096 --quiet"
                              " --report " + (dir / "r.json"));
  CAPTURE(tail.output);
  CHECK(tail.code == 1);
  CHECK(tail.output.find("REFUSED  normal:n=50000 bnb.blockwise8.dynamic block 256: kernel tail-block-codes-left-zero, tail: "
                         "elements [47872, 50000): 'codes' ") != std::string::npos);
  CHECK(tail.output.find("no report written") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "r.json"));
  const std::string lib = plugin("cuda_perblock_declared_twin");
  const Run none = run_shell("LOWBIT_FAKE_CUDA=no-device LOWBIT_CUDA_RUNNER=" + plugin("fake_cuda_runner") + " " +
                             std::string(LOWBIT_CLI) + " audit --kernel " + lib + " --input normal:n=4096 --quiet --report " +
                             (dir / "r.json"));
  CAPTURE(none.output);
  CHECK(none.code == 2);
  CHECK(none.output == "lowbit: error: kernel 'host-twin.fp8.perblock.e4m3' in '" + lib +
                           "' needs a CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected\n");
  CHECK(!std::filesystem::exists(dir / "r.json"));
  const Run bad = lowbit_cli("audit --kernel " + plugin("blockwise_host_twin") + ":nope --input normal:n=4096 --quiet");
  CHECK(bad.code == 2);
  CHECK(count_lines(bad.output) == plugin_kernels(plugin("blockwise_host_twin"), 30).size() + 1);  // listed, then the error
  CHECK(bad.output.find("has no kernel named 'nope' (its kernels are listed above)") != std::string::npos);
  const Run stray = lowbit_cli("audit --timeout 5 --input normal:n=4096 --quiet");
  CHECK(stray.code == 2);
  CHECK(stray.output == "lowbit: error: --check-elements, --timeout and --kernel-memory apply with --kernel only\n");
  const Run trajectory = lowbit_cli("audit --trajectory --steps 2 --kernel " + plugin("blockwise_host_twin"));
  CHECK(trajectory.code == 2);
  CHECK(trajectory.output == "lowbit: error: --kernel measures round trips; --trajectory runs the reference's optimizer steps only\n");
}
