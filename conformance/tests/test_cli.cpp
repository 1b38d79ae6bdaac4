// The lowbit command as a user meets it: exit codes 0 / 1 / 2, one clear error line, reports.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "cli_run.hpp"
#include "elementwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/manifest.hpp"

namespace fs = std::filesystem;
using namespace lowbit;
using namespace lowbit::test;

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
                                  std::string("sweep fp8 --format e4m3fn --policy nan --check-fast --simd avx512"),
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
  // --check-fast holds the vectorized cast of the instruction set --simd names; the report says which
  const Run fast = lowbit_cli("sweep fp8 --format e4m3fn --policy nan --from bf16 --check-fast --simd sse2 -q --report " +
                              (dir / "f.json"));
  CHECK(fast.code == 0);
  CHECK(fast.output.find("fast cast (vectorized, sse2) against the reference: 65536 inputs, 0 mismatches") !=
        std::string::npos);
  CHECK(slurp(dir / "f.json").find("\"simd\": \"sse2\"") != std::string::npos);

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
  // audit's --csv and a report on one file: refused before the run, so neither is written
  const std::string audit = "audit -q --formats torchao.fp8 --block-sizes 32 --input normal:n=64 --csv ";
  for (const std::string& args : {audit + (dir / "o.csv") + " --report " + (dir / "o.csv"),
                                  audit + (dir / "o.md") + " --report " + (dir / "o.json"),
                                  "audit --trajectory --steps 1 --formats 'coat.*' --csv " + (dir / "o.md") + " --markdown " +
                                      dir.path.string() + "/./o.md"}) {
    CAPTURE(args);
    const Run run = lowbit_cli(args);
    CHECK(run.code == 2);
    CHECK(run.output.find("--csv and a report would both be written to") != std::string::npos);
    CHECK(count_lines(run.output) == 1);
  }
  CHECK_FALSE(fs::exists(dir.path / "o.csv"));
  CHECK_FALSE(fs::exists(dir.path / "o.md"));
  CHECK_FALSE(fs::exists(dir.path / "o.json"));
  CHECK(slurp(dir / "a.safetensors") == a_bytes);
  CHECK(slurp(dir / "b.safetensors") == b_bytes);
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(!fs::exists(dir / "elsewhere.json"));
}

TEST_CASE("a MANIFEST.json the run read is one of its inputs: no report may replace it") {
  TempDir dir;
  Case in;
  in.metadata = {{"format", "fp8.e5m2.inf"}};
  in.add(Tensor::from_f32("input", {2}, std::vector<float>{1.0f, 3.0f}));
  fs::create_directories(dir.path / "g/fmt");
  write_case(dir / "g/fmt/a.safetensors", run_reference(*find_format("fp8.e5m2.inf"), in));
  Manifest m;
  upsert(m, describe_case_file(dir / "g", "fmt/a.safetensors"));
  write_manifest(dir / "g", m);
  const std::string manifest = dir / "g/MANIFEST.json", listed = dir / "g/fmt/a.safetensors";
  const std::string before = slurp(manifest);
  // conform and golden check read it by name; compare and audit --state read it to verify a listed case
  for (const std::string& args : {"conform --golden " + (dir / "g") + " --markdown " + manifest,
                                  "conform --golden " + (dir / "g") + " --report " + manifest,
                                  "compare " + listed + " " + listed + " --report " + manifest,
                                  "audit -q --formats torchao.fp8 --block-sizes 32 --state " + listed + " --tensors input --csv " +
                                      manifest}) {
    CAPTURE(args);
    const Run r = lowbit_cli(args);
    CHECK(r.code == 2);
    CHECK(r.output.find("cannot write '" + manifest + "': it is an input of this run") != std::string::npos);
    CHECK(slurp(manifest) == before);
  }
  CHECK(lowbit_cli("golden check --golden " + (dir / "g")).code == 0);
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

TEST_CASE("inspect and audit --state handed a torch checkpoint say which python -m lowbit command reads it, exit 2") {
  TempDir dir;
  fs::create_directories(dir / "dcp");
  std::ofstream(dir / "dcp/.metadata") << "a DCP folder's pickle";
  std::ofstream(dir / "state.pt", std::ios::binary) << std::string("PK\x03\x04") + " a torch.save zip";
  struct Expected {
    std::string args, what, then;
  };
  for (const Expected& e : {Expected{"inspect " + (dir / "dcp"), "a torch distributed checkpoint (DCP) folder",
                                     "then `lowbit inspect states.safetensors`"},
                            Expected{"audit --state " + (dir / "dcp"), "a torch distributed checkpoint (DCP) folder",
                                     "then `lowbit audit --state states.safetensors --tensors KEYS"},
                            Expected{"inspect " + (dir / "state.pt"), "a zip archive (a torch.save file?)", ""},
                            Expected{"inspect " + dir.path.string(), "a folder", ""}}) {
    CAPTURE(e.args);
    const Run run = lowbit_cli(e.args);
    const std::string path = e.args.substr(e.args.rfind(' ') + 1);
    CHECK(run.code == 2);
    CHECK(run.output.rfind("lowbit: error: " + path + ": " + e.what + ", not a case file;", 0) == 0);
    CHECK(run.output.find("`python -m lowbit inspect " + path + "`") != std::string::npos);
    CHECK(run.output.find("`python -m lowbit state-case " + path + " states.safetensors`") != std::string::npos);
    CHECK(run.output.find(e.then) != std::string::npos);
    // audit --state names the command that audits the checkpoint directly (with its progress line)
    const bool audit = e.args.rfind("audit", 0) == 0;
    CHECK((run.output.find("`python -m lowbit audit " + path + "` audits their dequantized values directly; ") !=
           std::string::npos) == audit);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);
  }
  // one of a DCP folder's data files (a zip archive too): the commands name its folder
  std::ofstream(dir / "dcp/__0_0.distcp", std::ios::binary) << std::string("PK\x03\x04") + " a DCP item file";
  const std::string folder = dir / "dcp";
  const Run item = lowbit_cli("inspect " + folder + "/__0_0.distcp");
  CAPTURE(item.output);
  CHECK(item.code == 2);
  CHECK(item.output.rfind("lowbit: error: " + folder + "/__0_0.distcp: a file of the torch distributed checkpoint (DCP) folder " +
                              folder + ", not a case file;", 0) == 0);
  CHECK(item.output.find("`python -m lowbit inspect " + folder + "`") != std::string::npos);
  CHECK(item.output.find("`python -m lowbit state-case " + folder + " states.safetensors`") != std::string::npos);
}

TEST_CASE("the python -m lowbit commands suggested for a torch checkpoint paste into a shell as its path, running nothing") {
  TempDir dir;
  const fs::path folder = dir / "ckpt $(touch pwned) it's";
  fs::create_directories(folder);
  std::ofstream(folder / ".metadata") << "a DCP folder's pickle";
  // the folder's name quoted for this test's own shell, then as lowbit must quote it in its suggestion
  std::string quoted = "'";
  for (const char c : folder.string()) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const Run run = lowbit_cli("inspect " + quoted);
  CAPTURE(run.output);
  CHECK(run.code == 2);
  CHECK(run.output.find("`python -m lowbit inspect " + quoted + "`") != std::string::npos);
  CHECK(run.output.find("`python -m lowbit state-case " + quoted + " states.safetensors`") != std::string::npos);
  // and pasted into a shell, the suggested command's argument is the folder's path, and nothing ran
  const std::size_t from = run.output.find("`python -m lowbit inspect ") + 26;
  const std::string word = run.output.substr(from, run.output.find('`', from) - from);
  const Run echoed = run_shell("cd " + quoted + "/.. && printf '%s' " + word);
  CHECK(echoed.output == folder.string());
  CHECK_FALSE(fs::exists(dir / "pwned"));
  CHECK_FALSE(fs::exists(folder.parent_path() / "pwned"));
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

namespace {

std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> files;
  if (!fs::exists(root)) return files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), root).generic_string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("golden check and conform refuse a folder without MANIFEST.json, a missing path and a file: exit 2, one line") {
  TempDir dir;
  fs::create_directories(dir.path / "empty");
  { std::ofstream(dir / "file.txt") << "not a folder\n"; }
  for (const std::string& folder : {dir / "empty", dir / "missing", dir / "file.txt"}) {
    for (const std::string& command : {std::string("golden check --golden "), std::string("conform --golden ")}) {
      CAPTURE(command + folder);
      const Run r = lowbit_cli(command + folder);
      CHECK(r.code == 2);
      CHECK(r.output.rfind("lowbit: error: ", 0) == 0);
      CHECK(r.output.find(folder) != std::string::npos);
      CHECK(count_lines(r.output) == 1);
    }
  }
}

TEST_CASE("golden check and conform on a MANIFEST.json that lists no file: nothing to check, exit 2 naming it") {
  TempDir dir;
  fs::create_directories(dir.path / "g/fmt");
  write_manifest(dir / "g", Manifest{});
  // a case on disk but not listed is not checked either
  Case c;
  c.metadata = {{"format", "fp8.e5m2.inf"}};
  c.add(Tensor::from_f32("input", {1}, std::vector<float>{1.0f}));
  write_case(dir / "g/fmt/unlisted.safetensors", run_reference(*find_format("fp8.e5m2.inf"), c));
  REQUIRE(read_manifest(dir / "g").files.empty());
  const Run check = lowbit_cli("golden check --golden " + (dir / "g"));
  CHECK(check.code == 2);
  CHECK(check.output == "lowbit: error: " + (dir / "g") + "/MANIFEST.json lists no file: nothing to check\n");
  const Run conform = lowbit_cli("conform --golden " + (dir / "g"));
  CHECK(conform.code == 2);
  CHECK(conform.output.find("nothing to check") != std::string::npos);
  CHECK(count_lines(conform.output) == 1);
}

TEST_CASE("golden generate is all or nothing: an --input that fails writes no file and is named in the error") {
  TempDir dir;
  const std::string g = dir / "g";
  REQUIRE(lowbit_cli("golden generate --format fp8.e4m3fn.nan --input normal:n=10 --out " + g).code == 0);
  const std::vector<std::string> before = files_under(g);
  const std::string manifest_before = slurp(dir.path / "g/MANIFEST.json");
  // the first input makes two steps; the second fails in the reference (torchao quantizes >= 4096 elements only)
  for (const std::string& out : {g, dir / "fresh"}) {
    CAPTURE(out);
    const Run r = lowbit_cli("golden generate --format torchao.adam.codebook8 --input normal:n=4096 --input normal:n=300 "
                             "--steps 2 --out " + out);
    CHECK(r.code == 2);
    CHECK(r.output.find("--input 'normal:n=300'") != std::string::npos);
    CHECK(count_lines(r.output) == 1);
  }
  CHECK(files_under(g) == before);
  CHECK(slurp(dir.path / "g/MANIFEST.json") == manifest_before);
  CHECK_FALSE(fs::exists(dir.path / "fresh"));
}

TEST_CASE("golden generate: params that differ from the defaults name the case, so both cases are kept") {
  TempDir dir;
  const std::string g = dir / "g", folder = dir / "g/bnb.adam8bit.cpu/";
  const std::string args = "golden generate --format bnb.adam8bit.cpu --input normal:n=300,std=0.1 --out " + g;
  REQUIRE(lowbit_cli(args).code == 0);
  REQUIRE(lowbit_cli(args + " --param lr=0.01 --param beta1=0.9").code == 0);  // beta1 is the default: not in the name
  const std::string plain = folder + "normal.n300.std0.1.step1.safetensors";
  const std::string fast = folder + "normal.n300.std0.1.lr-0.01.step1.safetensors";
  REQUIRE(fs::exists(plain));
  REQUIRE(fs::exists(fast));
  CHECK(files_under(folder).size() == 2);
  CHECK(read_case(plain).params().at("lr") == 0.001);
  CHECK(read_case(fast).params().at("lr") == 0.01);
  CHECK_FALSE(same_bytes(read_case(plain).require("param.next"), read_case(fast).require("param.next")));
  const Run check = lowbit_cli("golden check --golden " + g);
  CHECK(check.code == 0);
  CHECK(check.output.find("2 files listed, 2 verified") != std::string::npos);
}

TEST_CASE("golden generate: the same case again is fine; a different case under its name needs --replace") {
  TempDir dir;
  const std::string g = dir / "g", folder = dir / "g/fp8.e4m3fn.nan/";
  const std::string args = "golden generate --format fp8.e4m3fn.nan --input normal:n=64 --out " + g;
  REQUIRE(lowbit_cli(args).code == 0);
  REQUIRE(lowbit_cli("golden generate --format fp8.e4m3fn.nan --input normal:n=64,std=9 --out " + g).code == 0);
  const std::string target = folder + "normal.n64.safetensors", other = folder + "normal.n64.std9.safetensors";
  const std::string original = slurp(target);
  const std::string manifest = slurp(dir.path / "g/MANIFEST.json");

  const Run again = lowbit_cli(args);
  CHECK(again.code == 0);
  CHECK(slurp(target) == original);
  CHECK(slurp(dir.path / "g/MANIFEST.json") == manifest);

  // another case put under that name (an edit, or an older reference) is refused, named, and kept
  fs::copy_file(other, target, fs::copy_options::overwrite_existing);
  const Run refused = lowbit_cli(args);
  CHECK(refused.code == 2);
  CHECK(refused.output.find(target) != std::string::npos);
  CHECK(refused.output.find("--replace") != std::string::npos);
  CHECK(count_lines(refused.output) == 1);
  CHECK(slurp(target) == slurp(other));
  const Run replaced = lowbit_cli(args + " --replace");
  CHECK(replaced.code == 0);
  CHECK(slurp(target) == original);
  CHECK(lowbit_cli("golden check --golden " + g).code == 0);
}

TEST_CASE("golden generate --param lr sets every optimizer format's learning rate") {
  TempDir dir;
  const std::string g = dir / "g";
  // torchao holds lr as a float32 tensor in the case: 0.01 rounds to 0x3C23D70A
  REQUIRE(lowbit_cli("golden generate --format torchao.adam.fp8 --param lr=0.01 --input normal:n=4096,std=0.1 --steps 2 "
                     "--out " + g).code == 0);
  for (const char* step : {"step1", "step2"}) {
    CAPTURE(step);
    const Case c = read_case(g + "/torchao.adam.fp8/normal.n4096.std0.1.lr-0.01." + step + ".safetensors");
    CHECK(bits(c.require("lr").f32().at(0)) == f32_bits(0x3C23D70A));
    CHECK(c.params().at("lr") == 0.01);
  }
  // bitsandbytes and COAT take lr as a parameter of the step: a larger rate moves the parameter further
  for (const std::string format : {"bnb.adam8bit.cuda", "coat.optim.origin.e4m3", "coat.optim.expand.e4m3"}) {
    CAPTURE(format);
    const std::string base = "golden generate --format " + format + " --input normal:n=256,std=0.1 --out " + g;
    REQUIRE(lowbit_cli(base).code == 0);
    REQUIRE(lowbit_cli(base + " --param lr=0.1").code == 0);
    const Case slow = read_case(g + "/" + format + "/normal.n256.std0.1.step1.safetensors");
    const Case fast = read_case(g + "/" + format + "/normal.n256.std0.1.lr-0.1.step1.safetensors");
    const std::vector<float> p = slow.require("param").f32(), a = slow.require("param.next").f32(),
                             b = fast.require("param.next").f32();
    double moved_slow = 0, moved_fast = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      moved_slow += std::abs(double(a[i]) - p[i]);
      moved_fast += std::abs(double(b[i]) - p[i]);
    }
    CHECK(moved_fast > 50 * moved_slow);
  }
  CHECK(lowbit_cli("conform --golden " + g).code == 0);

  // a case whose params name an lr its lr tensor does not hold is refused, naming both
  Case c = read_case(g + "/torchao.adam.fp8/normal.n4096.std0.1.lr-0.01.step1.safetensors");
  nlohmann::json p = c.params();
  p["lr"] = 0.02;
  c.metadata["params"] = p.dump();
  CHECK_THROWS_WITH_AS(run_reference(*find_format("torchao.adam.fp8"), c),
                       doctest::Contains("'lr'"), CaseError);
}

TEST_CASE("golden generate: each bad option is one error line, exit 2, naming the option or file") {
  TempDir dir;
  const std::string g = dir / "g";
  fs::create_directories(dir.path / "bad");
  { std::ofstream(dir / "bad/MANIFEST.json") << "{\"files\": 3}\n"; }
  { std::ofstream(dir / "plain.txt") << "x\n"; }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--format no.such --input edges --out " + g, "--format"},
      {"--format fp8.e4m3fn.nan --param nope=1 --input edges --out " + g, "--param"},
      {"--format fp8.e4m3fn.nan --param oops --input edges --out " + g, "--param"},
      {"--format fp8.e4m3fn.nan --input edges", "--out"},
      {"--format fp8.e4m3fn.nan --out " + g, "--input"},
      {"--format fp8.e4m3fn.nan --input gauss --out " + g, "--input"},
      {"--format torchao.qmap --input edges --out " + g, "--input"},
      {"--format fp8.e4m3fn.nan --input edges --steps 2 --out " + g, "--steps"},
      {"--format bnb.adam8bit.cpu --input edges --steps 0 --out " + g, "--steps"},
      {"--format fp8.e4m3fn.nan --input edges --out " + (dir / "bad"), dir / "bad/MANIFEST.json"},
      {"--format fp8.e4m3fn.nan --input edges --out " + (dir / "plain.txt"), dir / "plain.txt"},
  };
  for (const auto& c : cases) {
    const auto& args = c.first;  // not a structured binding: CAPTURE's lambda cannot take one in clang < 16
    const auto& named = c.second;
    CAPTURE(args);
    const Run r = lowbit_cli("golden generate " + args);
    CHECK(r.code == 2);
    CHECK(r.output.rfind("lowbit: error: ", 0) == 0);
    CHECK(r.output.find(named) != std::string::npos);
    CHECK(count_lines(r.output) == 1);
  }
  CHECK_FALSE(fs::exists(dir.path / "g"));
}

TEST_CASE("golden generate blames the --param the reference refuses, naming its key; a bad input with good params is the --input's") {
  TempDir dir;
  const std::string g = dir / "g";
  struct Blame {
    std::string args, named;
  };
  for (const Blame& b :
       {Blame{"--format bnb.adam8bit.cpu --param block_size=-1 --input normal", "--param block_size=-1 (with --input 'normal'): "},
        Blame{"--format torchao.fp8 --param overflow=bogus --param block_size=128 --input normal:n=256",
              "--param overflow=bogus (with --input 'normal:n=256'): "},
        Blame{"--format bnb.adam8bit.cpu --param lr=x --input normal", "--param lr=x (with --input 'normal'): "},
        Blame{"--format torchao.qmap --param map=zzz", "--param map=zzz: "},
        Blame{"--format fp8.e4m3fn.nan --param nope=1 --input edges", "--param: format fp8.e4m3fn.nan has no parameter 'nope'"},
        // torchao quantizes >= 4096 elements: the input is at fault, lr=0.1 is fine
        Blame{"--format torchao.adam.codebook8 --param lr=0.1 --input normal:n=300", "--input 'normal:n=300': torchao quantizes"}}) {
    CAPTURE(b.args);
    const Run r = lowbit_cli("golden generate " + b.args + " --out " + g);
    CHECK(r.code == 2);
    CHECK(r.output.rfind("lowbit: error: " + b.named, 0) == 0);
    CHECK(count_lines(r.output) == 1);
  }
  CHECK_FALSE(fs::exists(dir.path / "g"));
}

TEST_CASE("concurrent golden generate runs into one folder merge their manifest entries") {
  TempDir dir;
  // Six runs at once, two cases each: every case must be on disk and listed (without the folder
  // lock, runs read the same old manifest and the last rename dropped the others' entries).
  std::string command;
  for (int i = 1; i <= 6; ++i)
    command += std::string(LOWBIT_CLI) + " golden generate --format torchao.fp8 --input normal:n=4096,seed=" +
               std::to_string(i) + " --input uniform:n=4096,seed=" + std::to_string(i) + " --out " + (dir / "g") +
               " >/dev/null 2>&1 & ";
  command += "wait";
  REQUIRE(std::system(command.c_str()) == 0);
  std::size_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "g/torchao.fp8")) on_disk += e.path().extension() == ".safetensors";
  CHECK(on_disk == 12);
  const Run check = lowbit_cli("golden check --golden " + (dir / "g"));
  CHECK(check.code == 0);
  CHECK(check.output.find("12 files listed, 12 verified, 0 refused") != std::string::npos);
}

TEST_CASE("audit and audit --trajectory take registry names and globs; unknown ones exit 2 listing what exists") {
  TempDir dir;
  const Run bnb = lowbit_cli("audit -q --formats bnb.blockwise8.dynamic --block-sizes 32,64 --input normal:n=4096,seed=1 "
                             "--csv " + (dir / "bnb.csv"));
  CHECK(bnb.code == 0);
  const std::string csv = slurp(dir / "bnb.csv");
  CHECK(csv.find("\"normal:n=4096,seed=1\",bnb.blockwise8.dynamic,32,n/a,,,,,,,,,,,,,,,n/a (bitsandbytes block sizes are "
                 "64..4096)\n") != std::string::npos);
  CHECK(csv.find("\"normal:n=4096,seed=1\",bnb.blockwise8.dynamic,64,ok,4096,64,1,") != std::string::npos);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);  // header and two rows: one format

  // a glob, on signed data: the unsigned map is n/a with the reason
  const Run glob = lowbit_cli("audit -q --formats 'torchao.codebook8.*' --block-sizes 64 --input adam-m:n=4096 --csv " +
                              (dir / "glob.csv"));
  CHECK(glob.code == 0);
  const std::string g = slurp(dir / "glob.csv");
  CHECK(g.find("adam-m:n=4096,torchao.codebook8.signed,64,ok,") != std::string::npos);
  CHECK(g.find("adam-m:n=4096,torchao.codebook8.unsigned,64,n/a,,,,,,,,,,,,,,,n/a (unsigned map: the data has "
               "negative values)\n") != std::string::npos);
  // on non-negative data both run
  const Run v = lowbit_cli("audit -q --formats 'torchao.codebook8.*' --block-sizes 64 --input adam-v:n=4096 --csv " +
                           (dir / "v.csv"));
  CHECK(v.code == 0);
  CHECK(slurp(dir / "v.csv").find("torchao.codebook8.unsigned,64,ok,4096,64,0,") != std::string::npos);

  for (const std::string& args : {std::string("audit --formats no.such,'torchao.codebook8.*' --input normal:n=64"),
                                  std::string("audit --formats bnb-8bit --input normal:n=64"),
                                  std::string("audit --formats 'fp8.e4m3fn.*' --input normal:n=64"),
                                  std::string("audit --trajectory --steps 1 --formats torchao.codebook8.signed")}) {
    CAPTURE(args);
    const Run bad = lowbit_cli(args);
    CHECK(bad.code == 2);
    CHECK(bad.output.rfind("lowbit: error: --formats: no format matches '", 0) == 0);
    CHECK(std::count(bad.output.begin(), bad.output.end(), '\n') == 1);
  }
  const Run unknown = lowbit_cli("audit --formats no.such --input normal:n=64");
  CHECK(unknown.output.find("'no.such' (formats here: torchao.codebook8.signed, ") != std::string::npos);
  CHECK(unknown.output.find("fp8.perblock.e4m3") != std::string::npos);

  // the trajectory: the selected optimizer formats after the baseline, which always runs
  const Run t = lowbit_cli("audit --trajectory --steps 2 --formats 'coat.*' --csv " + (dir / "t.csv"));
  CHECK(t.code == 0);
  const std::string tc = slurp(dir / "t.csv");
  CHECK(tc.rfind("step,format,loss,param_distance,relative_param_distance\n0,torchao.adam.dense,", 0) == 0);
  CHECK(tc.find("\n2,coat.optim.origin.e4m3,") != std::string::npos);
  CHECK(tc.find("\n2,coat.optim.expand.e4m3,") != std::string::npos);
  CHECK(std::count(tc.begin(), tc.end(), '\n') == 1 + 3 * 3);  // steps 0..2, three formats
}

TEST_CASE("audit --state is held to the MANIFEST.json that lists it, like every other command") {
  TempDir dir;
  Case state;
  std::vector<float> m(4096);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i % 97) * 1e-3f - 0.04f;
  state.add(Tensor::from_f32("layer.exp_avg", {4096}, m));
  write_case(dir / "state.safetensors", state);
  Manifest manifest;
  upsert(manifest, describe_case_file(dir.path.string(), "state.safetensors"));
  write_manifest(dir.path.string(), manifest);
  const std::string audit = "audit --formats bnb.blockwise8.dynamic --block-sizes 256 -q --state " + (dir / "state.safetensors");
  CHECK(lowbit_cli(audit).code == 0);
  {  // one byte of the listed file changes
    std::fstream f(dir / "state.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  const Run tampered = lowbit_cli(audit);
  CHECK(tampered.code == 2);
  CHECK(tampered.output.find("disagrees with the manifest") != std::string::npos);
}

TEST_CASE("audit --budget names the fewest bits per element within it, or says that none is") {
  TempDir dir;
  // On N(0, 1) data (docs/audit.md, example (b)): E4M3 keeps 31-32 dB at every block size, the 8-bit
  // codebook 37-41 dB, the 4-bit one 15-18 dB. At 256, torchao.fp8 stores 8 + 32/256 bits per
  // element and torchao.codebook8.signed also its 256-entry qmap (8192 bits over 65536 elements): so
  // with a floor of 30 dB the pick is torchao.fp8 at 256, and nothing reaches 60 dB.
  const std::string audit = "audit -q --formats torchao.fp8,torchao.codebook8.signed,torchao.codebook4.signed "
                            "--block-sizes 32,256 --input normal:n=65536,seed=1 ";
  const Run pick = lowbit_cli(audit + "--budget sqnr_db=30 --report " + (dir / "r.json"));
  CHECK(pick.code == 0);
  CHECK(pick.output.find("fewest bits per element with sqnr_db >= 30:\n  normal:n=65536,seed=1: torchao.fp8 at block 256: "
                         "8.125 bits per element, sqnr_db 31.") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(dir / "r.json"));
  REQUIRE(j.at("budget").at("choices").size() == 2);  // the input, then every input
  for (const auto& c : j["budget"]["choices"]) {
    CHECK(c.at("format") == "torchao.fp8");
    CHECK(c.at("block_size") == 256);
    CHECK(c.at("bits_per_element") == 8.125);
  }
  CHECK(slurp(dir / "r.md").find("| every input (one configuration for all) | torchao.fp8 at block 256: 8.125 bits") !=
        std::string::npos);
  for (const auto& r : j["rows"]) CHECK(r.at("bits_per_element").get<double>() >= 4.0);

  const Run none = lowbit_cli(audit + "--budget sqnr_db=60 --report " + (dir / "n.json"));
  CHECK(none.code == 0);
  CHECK(none.output.find("normal:n=65536,seed=1: none of the 6 configuration(s) that ran meets sqnr_db >= 60") !=
        std::string::npos);
  const auto jn = nlohmann::json::parse(slurp(dir / "n.json"));
  for (const auto& c : jn["budget"]["choices"]) CHECK(c.at("format").is_null());

  for (const std::string bad : {"l2=0.1", "rel_l2", "rel_l2=x"}) {
    CAPTURE(bad);
    const Run r = lowbit_cli(audit + "--budget " + bad);
    CHECK(r.code == 2);
    CHECK(r.output.rfind("lowbit: error: --budget: budget '" + bad + "'", 0) == 0);
  }
}

TEST_CASE("audit --state warns about a tensor that is already the dequantized values of a format") {
  TempDir dir;
  // the reference's own case: 'dequant' is torchao 8-bit's dequantized values at block 256, 'input' is not quantized
  REQUIRE(lowbit_cli("golden generate --format torchao.codebook8.signed --input normal:n=4096,seed=2 --out " + (dir / "g"))
              .code == 0);
  std::string file;
  for (const auto& e : fs::recursive_directory_iterator(dir.path / "g"))
    if (e.path().extension() == ".safetensors") file = e.path().string();
  REQUIRE(!file.empty());
  const SplitRun r = run_shell_split(std::string(LOWBIT_CLI) + " audit -q --formats torchao.codebook8.signed "
                                     "--block-sizes 128,256,512 --state " + file + " --tensors input,dequant --report " +
                                     (dir / "r.json"));
  CHECK(r.code == 0);
  CHECK(r.err.find("lowbit: warning: " + file + ":dequant looks already quantized: torchao.codebook8.signed at block 256 "
                   "gives ") != std::string::npos);
  CHECK(r.err.find("at block 128") == std::string::npos);  // half the block: fewer blocks come back, not named
  CHECK(r.err.find(":input:") == std::string::npos);  // the unquantized input: no warning
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  const auto j = nlohmann::json::parse(slurp(dir / "r.json"));
  REQUIRE(j.at("inputs").size() == 2);
  CHECK(j["inputs"][0].at("exact_round_trips").empty());
  CHECK_FALSE(j["inputs"][0].contains("warning"));
  const auto& exact = j["inputs"][1].at("exact_round_trips");
  const auto at256 = std::find_if(exact.begin(), exact.end(), [](const auto& e) {
    return e.at("format") == "torchao.codebook8.signed" && e.at("block_size") == 256;
  });
  REQUIRE(at256 != exact.end());
  CHECK(at256->at("blocks") == 16);  // 4096 values: every block holds a nonzero value
  CHECK(at256->at("exact_blocks").get<int>() >= 4);
  const std::string md = slurp(dir / "r.md");
  CHECK(md.find("**Warning:** `" + file + ":dequant` looks already quantized: torchao.codebook8.signed at block 256") !=
        std::string::npos);
  CHECK(md.find("**Warning:**") == md.rfind("**Warning:**"));  // once
}

TEST_CASE("every number of an input spec and every size parameter is checked before any work, named in the error") {
  TempDir dir;
  struct Bad {
    std::string args, words;
  };
  const std::string generate = "golden generate --out " + (dir / "g");
  for (const Bad& b : {Bad{" --format torchao.fp8 --input outliers:block=1e30", "block must be a whole number in 1..268435456"},
                       Bad{" --format torchao.fp8 --input normal:seed=1.5", "seed must be a whole number"},
                       Bad{" --format torchao.fp8 --input normal:seed=-1", "seed must be a whole number"},
                       Bad{" --format torchao.fp8 --input student-t:nu=1e9", "nu must be a whole number in 1..1000"},
                       Bad{" --format torchao.fp8 --input normal:n=1e9", "n must be a whole number in 0..268435456"},
                       Bad{" --format torchao.fp8 --input adam-m:steps=2.5", "steps must be a whole number"},
                       Bad{" --format bnb.adam8bit.cpu --input normal --param block_size=-1", "block_size must be a whole number from 1"},
                       Bad{" --format torchao.fp8 --input normal --param block_size=0", "block_size must be a whole number from 1"},
                       Bad{" --format coat.optim.expand.e4m3 --input normal:n=256 --param expand_min=-16", "expand_min must be a whole number from 1"}}) {
    CAPTURE(b.args);
    const Run run = lowbit_cli(generate + b.args);
    CHECK(run.code == 2);
    CHECK(run.output.find(b.words) != std::string::npos);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);
  }
  CHECK(!fs::exists(dir / "g"));  // nothing written
  const Run audit = lowbit_cli("audit --formats fp8.perblock.e4m3 -q --input outliers:n=4096,block=1e30");
  CHECK(audit.code == 2);
  CHECK(audit.output.find("block must be a whole number") != std::string::npos);
}

TEST_CASE("an n above the cap is refused naming n before any memory is taken; at the cap, no memory is out of memory") {
  TempDir dir;
  // Under a 256 MiB address-space limit an attempt at the n asked for (1 GiB of float32 and more)
  // would fail its allocation: the refusal must come from the check of the input spec, before. ASan reserves
  // terabytes of address space up front, so the limit is left out in a sanitizer build.
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;
#else
  const std::string limit = "ulimit -v 262144; ";
#endif
  const auto limited = [&](const std::string& args) { return run_shell(limit + std::string(LOWBIT_CLI) + " " + args); };
  struct Refused {
    std::string args, got;
  };
  for (const Refused& r : {Refused{"audit -q --input normal:n=268435457", "268435457"},
                           Refused{"audit -q --input adam-v:n=1e9", "1e9"},
                           Refused{"golden generate --format torchao.fp8 --input normal:n=1e9 --out " + (dir / "g"), "1e9"},
                           Refused{"golden generate --format torchao.adam.dense --input normal:n=268435457 --out " + (dir / "g"),
                                   "268435457"}}) {
    CAPTURE(r.args);
    const auto start = std::chrono::steady_clock::now();
    const Run run = limited(r.args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(run.code == 2);
    CHECK(run.output.find("n must be a whole number in 0..268435456 (got " + r.got + ")") != std::string::npos);
    CHECK(count_lines(run.output) == 1);
    CHECK(seconds < 10.0);  // refused at parsing (milliseconds); making 2^28 values takes tens of seconds here
  }
  CHECK_FALSE(fs::exists(dir.path / "g"));
#if !defined(__SANITIZE_ADDRESS__)
  // the control: n at the cap is accepted by the check, so under the limit its allocation fails,
  // and that is one line naming the input, exit 2
  for (const std::string& args : {std::string("audit -q --formats torchao.fp8 --block-sizes 256 --input normal:n=268435456"),
                                  "golden generate --format torchao.fp8 --input normal:n=268435456 --out " + (dir / "g")}) {
    CAPTURE(args);
    const Run run = limited(args);
    CHECK(run.code == 2);
    CHECK(run.output.find("--input 'normal:n=268435456': out of memory") != std::string::npos);
    CHECK(count_lines(run.output) == 1);
  }
  CHECK_FALSE(fs::exists(dir.path / "g"));
#endif
}

TEST_CASE("conform, verify and golden generate take --threads: a large case's files and reports are the same bytes for 1 and 3") {
  TempDir dir;
  const std::string formats[] = {"torchao.codebook4.signed", "torchao.fp8", "bnb.blockwise8.dynamic", "fp8.e4m3fn.satfinite"};
  for (const char* t : {"1", "3"})
    for (const std::string& f : formats)
      CHECK(lowbit_cli("golden generate --format " + f + " --input normal:n=131072,seed=7 --threads " + t + " --out " +
                       (dir / (std::string("g") + t)))
                .code == 0);
  const std::vector<std::string> files = files_under(dir / "g1");
  CHECK(files.size() == 5);  // four cases and the MANIFEST.json
  CHECK(files == files_under(dir / "g3"));
  for (const std::string& f : files) {
    CAPTURE(f);
    CHECK(slurp(dir.path / "g1" / f) == slurp(dir.path / "g3" / f));
  }
  for (const char* t : {"1", "3"})
    CHECK(lowbit_cli("conform --golden " + (dir / "g1") + " --threads " + t + " --report " + (dir / (std::string("c") + t + ".json")))
              .code == 0);
  CHECK(slurp(dir / "c1.json") == slurp(dir / "c3.json"));
  for (const char* command : {"conform", "verify --kernel x.so", "golden generate --format torchao.fp8 --input normal"}) {
    CAPTURE(command);
    const Run bad = lowbit_cli(std::string(command) + " --threads 0");
    CHECK(bad.code == 2);
    CHECK(bad.output.find("--threads") != std::string::npos);
  }
}
