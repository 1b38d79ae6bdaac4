// The lowbit command as a user meets it: exit codes 0 / 1 / 2, one clear error line, reports.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "elementwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"

namespace fs = std::filesystem;
using namespace lowbit;
using namespace lowbit::test;

namespace {

struct Run {
  int code;
  std::string output;  // stdout and stderr together
};

Run lowbit_cli(const std::string& args) {
  const std::string command = std::string(LOWBIT_CLI) + " " + args + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("lowbit_cli_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_CASE("compare: identical files exit 0, one differing code exits 1 and is named, a corrupt file exits 2") {
  TempDir dir;
  Case in;
  in.metadata = {{"format", "fp8.e5m2.inf"}};
  in.add(Tensor::from_f32("input", {4}, std::vector<float>{1.0f, 2.0f, 3.0f, 70000.0f}));
  const Case expected = run_reference(*find_format("fp8.e5m2.inf"), in);
  write_case(dir / "expected.safetensors", expected);
  write_case(dir / "same.safetensors", expected);
  Case changed = expected;
  changed.find("codes")->bytes[1] ^= 1;
  write_case(dir / "changed.safetensors", changed);

  Run same = lowbit_cli("compare " + (dir / "expected.safetensors") + " " + (dir / "same.safetensors"));
  CHECK(same.code == 0);
  CHECK(same.output.find("conformant") == 0);
  // A shipped policy by name, found beside the binary (build tree laid out like the install tree).
  Run by_name = lowbit_cli("compare " + (dir / "expected.safetensors") + " " + (dir / "same.safetensors") +
                           " --policy bnb-cuda");
  CHECK(by_name.code == 0);
  CHECK(by_name.output.find(", policy bnb-cuda\n") != std::string::npos);

  Run diff = lowbit_cli("compare " + (dir / "expected.safetensors") + " " + (dir / "changed.safetensors") +
                        " --markdown " + (dir / "r.md") + " --report " + (dir / "r.json"));
  CHECK(diff.code == 1);
  const std::string md = slurp(dir / "r.md");
  CHECK(md.find("NOT conformant") != std::string::npos);
  CHECK(md.find("| 1 | 0 | 0x40 (2) | 0x41 (2.5) |") != std::string::npos);
  CHECK(slurp(dir / "r.json").find("\"conformant\": false") != std::string::npos);

  {
    std::ofstream(dir / "corrupt.safetensors", std::ios::binary) << std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13);
  }
  Run bad = lowbit_cli("compare " + (dir / "expected.safetensors") + " " + (dir / "corrupt.safetensors"));
  CHECK(bad.code == 2);
  CHECK(bad.output.find("corrupt.safetensors: header length 16 runs past the end") != std::string::npos);
  CHECK(std::count(bad.output.begin(), bad.output.end(), '\n') == 1);  // one line
}

TEST_CASE("sweep: bad arguments give one error line and exit 2") {
  for (const std::string& args : {std::string("sweep fp8 --format e4m3 --policy nan"),
                                  std::string("sweep fp8 --format e4m3fn --policy saturate"),
                                  std::string("sweep fp8 --format e4m3fn --policy nan --threads 0"),
                                  std::string("sweep fp8 --format e4m3fn --policy nan --from bf16 --report /no/such/dir/r.json")}) {
    CAPTURE(args);
    const Run r = lowbit_cli(args);
    CHECK(r.code == 2);
    CHECK(r.output.rfind("lowbit: error: ", 0) == 0);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}

TEST_CASE("sweep of bf16 writes a conformant report; golden generate, check and conform agree") {
  TempDir dir;
  const Run sweep = lowbit_cli("sweep fp8 --format e5m2 --policy inf --from bf16 -q --report " + (dir / "s.json"));
  CHECK(sweep.code == 0);
  CHECK(slurp(dir / "s.json").find("\"mismatches\": 0") != std::string::npos);
  CHECK(fs::exists(dir / "s.md"));

  const Run gen = lowbit_cli("golden generate --format fp8.e4m3fn.nan --input edges --input normal:n=100,std=300 --out " +
                             (dir / "g"));
  CHECK(gen.code == 0);
  CHECK(lowbit_cli("golden check --golden " + (dir / "g")).code == 0);
  const Run conform = lowbit_cli("conform --golden " + (dir / "g"));
  CHECK(conform.code == 0);
  CHECK(conform.output.find("fp8.e4m3fn.nan: 2 cases, 2 conformant") != std::string::npos);
  const Run none = lowbit_cli("conform --golden " + (dir / "g") + " --format 'torchao.*'");
  CHECK(none.code == 2);  // nothing to check is bad input, never a pass
  CHECK(none.output.find("nothing to check") != std::string::npos);
  // A folder without a manifest: an error naming what was looked for, never "nothing to check".
  const Run missing = lowbit_cli("conform --golden " + (dir / "empty"));
  CHECK(missing.code == 2);
  CHECK(missing.output.find("no golden cases: " + (dir / "empty") + "/MANIFEST.json does not exist") !=
        std::string::npos);
  CHECK(lowbit_cli("golden generate --format no.such --input edges --out " + (dir / "g")).code == 2);
  CHECK(lowbit_cli("golden generate --format fp8.e4m3fn.nan --input gauss --out " + (dir / "g")).code == 2);
}

TEST_CASE("golden generate runs optimizer steps from a fresh state, each case starting where the last ended") {
  TempDir dir;
  const Run gen = lowbit_cli("golden generate --format bnb.adam8bit.cuda --input normal:n=300,std=0.1 --steps 2 --out " +
                             (dir / "g"));
  REQUIRE(gen.code == 0);
  const std::string folder = dir / "g/bnb.adam8bit.cuda/";
  const Case first = read_case(folder + "normal.n300.std0.1.step1.safetensors");
  const Case second = read_case(folder + "normal.n300.std0.1.step2.safetensors");
  for (const char* name : {"param", "exp_avg.codes", "exp_avg.scale", "exp_avg_sq.codes", "exp_avg_sq.scale"}) {
    CAPTURE(name);
    CHECK(same_bytes(second.require(name), first.require(std::string(name) + ".next")));
  }
  CHECK(second.require("step").i64() == std::vector<std::int64_t>{2});
  CHECK_FALSE(same_bytes(second.require("grad"), first.require("grad")));  // a new gradient each step
  CHECK(lowbit_cli("conform --golden " + (dir / "g")).code == 0);
  // torchao quantizes only tensors of >= 4096 elements: the error says so and names the dense format
  const Run small = lowbit_cli("golden generate --format torchao.adam.codebook8 --input normal:n=300 --out " + (dir / "g"));
  CHECK(small.code == 2);
  CHECK(small.output.find("torchao.adam.dense") != std::string::npos);
  CHECK(lowbit_cli("golden generate --format fp8.e4m3fn.nan --input edges --steps 2 --out " + (dir / "g")).code == 2);
}

TEST_CASE("outputs never destroy inputs: a report over an input, a device, a link or the other report is refused") {
  TempDir dir;
  Case in;
  in.metadata = {{"format", "fp8.e5m2.inf"}};
  in.add(Tensor::from_f32("input", {2}, std::vector<float>{1.0f, 3.0f}));
  const Case expected = run_reference(*find_format("fp8.e5m2.inf"), in);
  write_case(dir / "a.safetensors", expected);
  write_case(dir / "b.safetensors", expected);
  const std::string a_bytes = slurp(dir / "a.safetensors"), b_bytes = slurp(dir / "b.safetensors");
  const std::string compare = "compare " + (dir / "a.safetensors") + " " + (dir / "b.safetensors");

  struct Refusal {
    std::string args, words;
  };
  fs::create_symlink(dir / "elsewhere.json", dir / "link.json");
  for (const Refusal& r : {Refusal{" --report " + (dir / "a.safetensors"), "it is an input of this run"},
                           Refusal{" --report " + dir.path.string() + "/./b.safetensors", "it is an input of this run"},
                           Refusal{" --report " + dir.path.string() + "//b.safetensors", "it is an input of this run"},
                           Refusal{" --report " + (dir / "r.md"), "would both be written to"},
                           Refusal{" --report " + (dir / "r.json") + " --markdown " + (dir / "r.json"), "would both be written to"},
                           Refusal{" --report /dev/null", "not a regular file"},
                           Refusal{" --report " + (dir / "link.json"), "symbolic link"}}) {
    CAPTURE(r.args);
    const Run run = lowbit_cli(compare + r.args);
    CHECK(run.code == 2);
    CHECK(run.output.find(r.words) != std::string::npos);
  }
  CHECK(slurp(dir / "a.safetensors") == a_bytes);
  CHECK(slurp(dir / "b.safetensors") == b_bytes);
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(!fs::exists(dir / "elsewhere.json"));
}

TEST_CASE("names and metadata from a file are printed escaped; an unknown command is named; nothing to check is exit 2") {
  TempDir dir;
  Case evil;
  evil.metadata = {{"format", "x\x1b[31mRED"}, {"note", "line1\nlowbit: error: forged"}};
  evil.add(Tensor::from_bytes("a\nlowbit: forged", DType::U8, {1}, std::vector<std::uint8_t>{7}));
  write_case(dir / "evil.safetensors", evil);
  for (const std::string& args : {"inspect " + (dir / "evil.safetensors"),
                                  "compare " + (dir / "evil.safetensors") + " " + (dir / "evil.safetensors")}) {
    CAPTURE(args);
    const Run run = lowbit_cli(args);
    CHECK(run.code == 0);
    CHECK(run.output.find('\x1b') == std::string::npos);
    CHECK(run.output.find("\nlowbit: ") == std::string::npos);
    CHECK(run.output.find("a\\nlowbit: forged") != std::string::npos);
  }
  const Run unknown = lowbit_cli("frobnicate");
  CHECK(unknown.code == 2);
  CHECK(unknown.output.rfind("lowbit: error: unknown command 'frobnicate' (commands: audit, compare,", 0) == 0);

  const Run nothing = lowbit_cli("conform --format no.such.format");
  CHECK(nothing.code == 2);
  CHECK(nothing.output.find("matches format 'no.such.format'") != std::string::npos);
}

TEST_CASE("--threads is a whole number from 1 to a hardware bound, named in the error") {
  for (const char* bad : {"0", "-3", "1.5", "65536", "x"}) {
    CAPTURE(bad);
    const Run run = lowbit_cli(std::string("sweep fp8 --format e4m3fn --policy satfinite --from bf16 --threads ") + bad);
    CHECK(run.code == 2);
    CHECK(run.output.find("--threads") != std::string::npos);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);
  }
}
