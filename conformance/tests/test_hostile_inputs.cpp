// Issue #13's one-line reproductions as regression tests: the lowbit command run on hostile inputs
// as a user would run it. Each must end in exit 2 with one line naming the file or option (or in
// the correct result), never a crash, and must leave every file of the scratch folder as it was.
//
// Every reproduction of the issue's "Why", bullet by bullet, and the test that covers it
// (here: a row of the tables below; elsewhere: file and test case):
//
// Crashes and memory errors on well-formed but inconsistent cases (tensor schema):
//   inspect, empty qmap                        here, "schema" table
//   inspect, short qmap                        here, "schema" table
//   inspect, scale shorter than codes/block    here, "schema" table
//   inspect, scale with 0 columns              here, "schema" table
//   compare, expected case lacks `input`       here, "schema" table (exit 1: compared, not explained)
//   conform, Adam case with a 0-entry qmap     here, "schema" table
// Unchecked numbers:
//   outliers:block=1e30 (generate, audit)      test_cli "every number of an input spec and every size parameter ..."
//   seed=, nu= casts; seed=1.5                 test_cli, same (seed=1.5, seed=-1); here (seed=1e30, nu=0.5, nu=-3,
//                                              generate and audit)
//   student-t:nu=1e9 runs for minutes          test_cli, same (generate); here (audit)
//   --threads >= 65536 segfaults, ~35000 exit 1  test_cli "--threads is a whole number ..." (sweep fp8); here
//                                              (35000 and 65536 on audit, sweep codebook, study, sweep fp8)
//   --param block_size=-1 written, then conform  test_cli "golden generate blames the --param ..." (refused when
//   reads 2^64-1 and exits 1                   generating); here, "schema" table (conform on such a case)
// Lost files:
//   compare A B --report A                     test_cli "outputs never destroy inputs ..."
//   a golden file under conform                here (--report onto a listed case); test_cli "a MANIFEST.json the
//                                              run read is one of its inputs ..." (the manifest)
//   audit's --state                            here (--report, --csv, --markdown onto the state)
//   the derived .md path hits an input         here (compare x.md b --report x.json)
//   --report x.md; --report X --markdown X     test_cli "outputs never destroy inputs ..."
//   --csv X --report X                         test_cli, same (audit and audit --trajectory)
//   --report /dev/null, FIFOs, symlinks        test_cli, same (/dev/null, a link); test_atomic_file "only regular
//                                              files are written ..." (FIFO); here (a FIFO through the command)
//   two golden generate runs lose entries      test_cli "concurrent golden generate runs into one folder ..."
//   SIGINT/SIGTERM leave <file>.tmp.<pid>      test_atomic_file "a signal during a write removes the temporary ..."
//   multi-input generate fails on input k      test_cli "golden generate is all or nothing ..."
// Integrity bypass:
//   case file or its folder a symlink;         test_case "the manifest check holds through links and for any
//   manifest path ./x, a//b                    spelling of the manifest's paths"
//   audit --state                              test_cli "audit --state is held to the MANIFEST.json ..."
// Denial of service:
//   header parsing quadratic (inspect)         test_case "... many tensors parse in linear time"
//   ... and compare (20 000 tensors: 12.6 s)   here, "many tensors" (60 000 tensors under a time guard)
//   the whole file read first (/dev/zero)      test_case "only regular files are read"; here (inspect, compare,
//                                              audit --state on /dev/zero)
//   n=1e9 needs > 20 GB, then bad_alloc        test_cli "an n above the cap is refused naming n ..."
// Silent wrong results:
//   conform --golden: missing path, a file,    test_cli "golden check and conform refuse a folder without
//   a folder without MANIFEST.json             MANIFEST.json ..."
//   an expected case with no tensors           here, "schema" table
//   a file named torch-cpu-eager in the cwd    test_compare "a policy name is looked up only among the shipped
//                                              policies ..."; here (the command run from such a folder)
//   the header parser stops at a NUL byte      test_case "malformed: a NUL byte hides the rest of the header ..."
// Output injection and messages:
//   terminal escapes; a newline forging a      test_cli "names and metadata from a file are printed escaped ...";
//   second lowbit: line                        Markdown reports: test_compare "hostile names ... keep every
//                                              Markdown table row's columns", test_printable
//   "block_size must be a positive integer"    test_cli "golden generate blames the --param ..."; here, "schema"
//                                              table (conform names the file)
//   "basic_filebuf::underflow: Is a directory" here (a policy and a MANIFEST.json that are folders)
//   a bare nlohmann type_error.302             here (policy and manifest fields of the wrong type); test_cli
//                                              "golden generate blames the --param ..." (lr=x)
//   std::bad_alloc                             test_cli "an n above the cap is refused naming n ..."
//   vector::_M_range_check                     here, "schema" table (an optimizer case with an empty lr tensor)
//   a 50 MB token echoed                       here (a 1 MB token in a policy, a manifest and a case's params)
//   lowbit frobnicate                          test_cli "names and metadata from a file are printed escaped ..."
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "golden_fixture.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/manifest.hpp"
#include "markdown_table.hpp"

namespace fs = std::filesystem;
using namespace lowbit;
using namespace lowbit::test;

namespace {

// One reproduction: the command (lowbit's arguments, or a whole shell line when `shell`), its exit
// code, and words its output must hold (the file or option at fault).
struct Repro {
  std::string what;
  std::string command;
  int code = 2;
  std::vector<std::string> words;
  bool shell = false;
};

// Every file under the folder, bytes and all (a FIFO or a folder by its kind only): after each
// reproduction the folder must be exactly as before, so no input was lost or changed and no
// refused output was left.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string name = fs::relative(e.path(), root).generic_string();
    if (e.is_symlink()) files[name] = "link " + fs::read_symlink(e.path()).string();
    else if (e.is_fifo()) files[name] = "fifo";
    else if (e.is_directory()) files[name] = "folder";
    else files[name] = slurp(e.path());
  }
  return files;
}

void check(const Repro& r, const fs::path& scratch) {
  CAPTURE(r.what);
  CAPTURE(r.command);
  const auto before = snapshot(scratch);
  const SplitRun run = run_shell_split(r.shell ? r.command : std::string(LOWBIT_CLI) + " " + r.command);
  CAPTURE(run.err.substr(0, 2000));
  CAPTURE(run.out.substr(0, 2000));
  CHECK(run.code == r.code);  // -1: the process died of a signal
  for (const std::string& w : r.words) {
    CAPTURE(w);
    CHECK((run.out + run.err).find(w) != std::string::npos);
  }
  if (r.code == 2) {  // one error line, whatever the command printed before it failed
    CHECK(run.err.rfind("lowbit: error: ", 0) == 0);
    CHECK(count_lines(run.err) == 1);
    CHECK(run.err.size() < 1000);  // a message, not an echo of the file
  }
  CHECK(snapshot(scratch) == before);
}

Case fp8_case(const std::vector<float>& values) {
  Case in;
  in.metadata = {{"format", "fp8.e5m2.inf"}};
  in.add(Tensor::from_f32("input", {static_cast<std::int64_t>(values.size())}, values));
  return run_reference(*find_format("fp8.e5m2.inf"), in);
}

// A golden folder holding one case, listed with its size and hash (the manifest check passes).
void golden_folder(const fs::path& dir, const std::string& relative, const Case& c) {
  fs::create_directories((dir / relative).parent_path());
  write_case((dir / relative).string(), c);
  Manifest m;
  upsert(m, describe_case_file(dir.string(), relative));
  write_manifest(dir.string(), m);
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The first golden case of a format, as shipped (tests change copies of it).
Case first_golden(const std::string& format) {
  const auto entries = golden_entries(format);
  REQUIRE_FALSE(entries.empty());
  return golden_case(*entries.front());
}

}  // namespace

TEST_CASE("the issue's reproductions of unchecked numbers, lost files, non-files and messages") {
  TempDir dir("lowbit_hostile_");
  const std::string d = dir.path.string();
  golden_folder(dir.path / "g", "fp8.e5m2.inf/a.safetensors", fp8_case({1.0f, 3.0f}));
  write_case(dir / "b.safetensors", fp8_case({2.0f, 5.0f}));
  fs::copy_file(dir / "b.safetensors", dir / "x.md");  // a case under a report's name
  Case state;
  std::vector<float> m(4096);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i % 89) * 1e-3f - 0.04f;
  state.add(Tensor::from_f32("layer.exp_avg", {4096}, m));
  write_case(dir / "s.safetensors", state);
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  // files that are not what their names say, and files holding one 1 MB token
  fs::create_directories(dir.path / "folder.json");
  fs::create_directories(dir.path / "dm/MANIFEST.json");
  write_text(dir.path / "types.json", R"({"name": "mine", "boundary_ulps": "lots"})");
  fs::create_directories(dir.path / "tm");
  write_text(dir.path / "tm/MANIFEST.json", R"({"files": [{"path": "a.safetensors", "sha256": "00", "size": "big"}]})");
  const std::string token(1 << 20, 'x');
  write_text(dir.path / "token.json", "{\"name\": " + token + "}");
  fs::create_directories(dir.path / "km");
  write_text(dir.path / "km/MANIFEST.json", "{\"files\": " + token + "}");
  Case params_token = fp8_case({1.0f});
  params_token.metadata["params"] = token;
  write_case(dir / "params-token.safetensors", params_token);
  // a folder holding files named like the shipped policy an optimizer format defaults to
  fs::create_directories(dir.path / "cwd");
  write_text(dir.path / "cwd/torch-cpu-eager", "not a policy");
  write_text(dir.path / "cwd/torch-cpu-eager.json", "not a policy");
  write_case(dir / "adam.safetensors", first_golden("torchao.adam.fp8"));
  REQUIRE(find_format("torchao.adam.fp8")->default_tolerance == "torch-cpu-eager");

  const std::string out = " --out " + d + "/new";
  const std::string audit_state = "audit -q --formats torchao.fp8 --block-sizes 256 --state " + d +
                                  "/s.safetensors --tensors layer.exp_avg";
  const std::string listed = d + "/g/fp8.e5m2.inf/a.safetensors";
  const std::vector<Repro> table = {
      // unchecked numbers: each refused naming the key, before any work
      {"seed beyond 2^53", "golden generate --format torchao.fp8 --input normal:seed=1e30" + out, 2, {"seed must be a whole number"}},
      {"nu not whole", "golden generate --format torchao.fp8 --input student-t:nu=0.5" + out, 2, {"nu must be a whole number in 1..1000"}},
      {"nu negative", "golden generate --format torchao.fp8 --input student-t:nu=-3" + out, 2, {"nu must be a whole number in 1..1000"}},
      {"audit: seed beyond 2^53", "audit -q --input normal:n=4096,seed=1e30", 2, {"--input", "seed must be a whole number"}},
      {"audit: nu negative", "audit -q --input student-t:n=4096,nu=-3", 2, {"--input", "nu must be a whole number in 1..1000"}},
      {"audit: nu=1e9 ran for minutes", "audit -q --input student-t:n=4096,nu=1e9", 2, {"nu must be a whole number in 1..1000"}},
      {"audit: outliers block 0", "audit -q --input outliers:n=4096,block=0", 2, {"block must be a whole number"}},
      {"audit --threads 35000", "audit -q --threads 35000 --input normal:n=64", 2, {"--threads"}},
      {"audit --threads 65536", "audit -q --threads 65536 --input normal:n=64", 2, {"--threads"}},
      {"sweep codebook --threads 35000", "sweep codebook -q --threads 35000", 2, {"--threads"}},
      {"sweep fp8 --threads 35000", "sweep fp8 --format e4m3fn --policy nan --from bf16 --threads 35000", 2, {"--threads"}},
      {"study --threads 65536", "study coat-expansion --groups 1 --threads 65536", 2, {"--threads"}},
      // outputs over inputs: refused, the input kept
      {"conform --report onto a golden case it reads", "conform --golden " + d + "/g --report " + listed, 2,
       {listed, "it is an input of this run"}},
      {"audit --report onto its --state", audit_state + " --report " + d + "/s.safetensors", 2, {"s.safetensors", "input of this run"}},
      {"audit --csv onto its --state", audit_state + " --csv " + d + "/s.safetensors", 2, {"s.safetensors", "input of this run"}},
      {"audit --markdown onto its --state", audit_state + " --markdown " + d + "/s.safetensors", 2, {"s.safetensors", "input of this run"}},
      {"audit --csv, then its report onto its --state", audit_state + " --csv " + d + "/o.csv --report " + d + "/s.safetensors", 2,
       {"s.safetensors", "input of this run"}},  // and no o.csv left
      {"the derived .md is an input", "compare " + d + "/x.md " + d + "/b.safetensors --report " + d + "/x.json", 2,
       {d + "/x.md", "input of this run"}},
      {"a report onto a FIFO", "compare " + d + "/b.safetensors " + d + "/b.safetensors --report " + d + "/fifo", 2,
       {d + "/fifo", "not a regular file"}},
      // not files: refused by kind before a byte is read
      {"inspect /dev/zero", "inspect /dev/zero", 2, {"/dev/zero: not a regular file"}},
      {"compare against /dev/zero", "compare " + d + "/b.safetensors /dev/zero", 2, {"/dev/zero: not a regular file"}},
      {"audit --state /dev/zero", "audit -q --state /dev/zero", 2, {"/dev/zero: not a regular file"}},
      {"a policy that is a folder", "compare " + d + "/b.safetensors " + d + "/b.safetensors --policy " + d + "/folder.json", 2,
       {d + "/folder.json"}},
      {"a MANIFEST.json that is a folder", "golden check --golden " + d + "/dm", 2, {d + "/dm/MANIFEST.json"}},
      {"conform, a MANIFEST.json that is a folder", "conform --golden " + d + "/dm", 2, {d + "/dm/MANIFEST.json"}},
      // messages that named nothing, or echoed the file
      {"a policy field of the wrong type", "compare " + d + "/b.safetensors " + d + "/b.safetensors --policy " + d + "/types.json", 2,
       {d + "/types.json", "not a valid tolerance policy"}},
      {"a manifest field of the wrong type", "golden check --golden " + d + "/tm", 2, {d + "/tm/MANIFEST.json", "not a valid manifest"}},
      {"a 1 MB token in a policy", "compare " + d + "/b.safetensors " + d + "/b.safetensors --policy " + d + "/token.json", 2,
       {d + "/token.json"}},
      {"a 1 MB token in a manifest", "conform --golden " + d + "/km", 2, {d + "/km/MANIFEST.json"}},
      {"a 1 MB token as a case's params", "compare " + d + "/params-token.safetensors " + d + "/params-token.safetensors", 2,
       {d + "/params-token.safetensors", "params"}},
      // a shipped policy's name in the working folder replaces nothing
      {"files named torch-cpu-eager in the working folder",
       "cd " + d + "/cwd && " + LOWBIT_CLI + " compare " + d + "/adam.safetensors " + d + "/adam.safetensors", 0,
       {"conformant", "policy torch-cpu-eager"}, true},
  };
  for (const Repro& r : table) check(r, dir.path);
}

TEST_CASE("the issue's reproductions on well-formed but inconsistent cases: exit 2 naming the file and the tensor") {
  TempDir dir("lowbit_hostile_schema_");
  const std::string d = dir.path.string();
  const auto with = [](Case c, const Tensor& t) {
    c.add(t);
    return c;
  };
  const auto path = [&](const std::string& name) { return d + "/" + name + ".safetensors"; };
  // torchao's 8-bit codebook, 4096 values in blocks of 256: a qmap of 256 entries, 16 scales
  Case codebook_in;
  codebook_in.metadata = {{"format", "torchao.codebook8.signed"}, {"params", R"({"block_size":256})"}};
  std::vector<float> x(4096);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 61) - 30) * 0.1f;
  codebook_in.add(Tensor::from_f32("input", {4096}, x));
  for (Tensor& t : find_format("torchao.codebook8.signed")->auxiliary_inputs(nlohmann::json::object())) codebook_in.add(t);
  const Case codebook = run_reference(*find_format("torchao.codebook8.signed"), codebook_in);
  REQUIRE(codebook.require("scale").shape == std::vector<std::int64_t>{16});
  write_case(path("s1"), with(codebook, Tensor::from_f32("qmap", {0}, std::vector<float>{})));
  write_case(path("s2"), with(codebook, Tensor::from_f32("qmap", {10}, std::vector<float>(10, 0.5f))));
  write_case(path("s3"), with(codebook, Tensor::from_f32("scale", {1}, std::vector<float>{1.0f})));
  // COAT's per-group activations: a [256, 4] scale made [256, 0]
  const Case pergroup = first_golden("coat.act.pergroup");
  REQUIRE(pergroup.require("scale").shape.size() == 2);
  Tensor no_columns = pergroup.require("scale");
  no_columns.shape[1] = 0;
  no_columns.bytes.clear();
  write_case(path("s4"), with(pergroup, no_columns));
  // an expected FP8 case without its input, against an actual one whose code differs (the explainer reads input)
  Case no_input = fp8_case({1.0f, 2.0f, 3.0f});
  Case actual = no_input;
  actual.find("codes")->bytes[2] ^= 1;
  write_case(path("s5a"), actual);
  no_input.remove("input");
  write_case(path("s5"), no_input);
  // a hash-consistent golden folder whose torchao Adam case has a 0-entry exp_avg.qmap
  golden_folder(dir.path / "g6", "torchao.adam.codebook8/s6.safetensors",
                with(first_golden("torchao.adam.codebook8"), Tensor::from_f32("exp_avg.qmap", {0}, std::vector<float>{})));
  // an expected case with no tensors at all
  Case empty;
  empty.metadata = {{"format", "fp8.e5m2.inf"}};
  write_case(path("s7"), empty);
  write_case(path("s7a"), fp8_case({1.0f}));
  // a listed case whose params say block_size -1 (nlohmann read it as 2^64 - 1; conform said "not conformant")
  Case minus_one = codebook;
  minus_one.metadata["params"] = R"({"block_size":-1})";
  golden_folder(dir.path / "g8", "torchao.codebook8.signed/s8.safetensors", minus_one);
  // a torchao Adam case whose lr tensor is empty (read with .at(0): "vector::_M_range_check")
  golden_folder(dir.path / "g9", "torchao.adam.fp8/s9.safetensors",
                with(first_golden("torchao.adam.fp8"), Tensor::from_f32("lr", {0}, std::vector<float>{})));

  const std::vector<Repro> table = {
      {"inspect, an empty qmap", "inspect " + path("s1"), 2, {path("s1"), "'qmap'"}},
      {"inspect, a short qmap", "inspect " + path("s2"), 2, {path("s2"), "'qmap'"}},
      {"inspect, a scale shorter than codes / block", "inspect " + path("s3"), 2, {path("s3"), "'scale'"}},
      {"inspect, a scale with 0 columns", "inspect " + path("s4"), 2, {path("s4"), "'scale'"}},
      // the correct result: the tensors it has are compared; the explainers, which read input, run only
      // on a complete expected case, so the differing code is genuine, not conformant
      {"compare, the expected case lacks input", "compare " + path("s5") + " " + path("s5a"), 1,
       {"NOT conformant", "[2] block 0: expected 0x", "genuine"}},
      {"conform, an Adam case with a 0-entry exp_avg.qmap", "conform --golden " + d + "/g6", 2,
       {d + "/g6/torchao.adam.codebook8/s6.safetensors", "'exp_avg.qmap'"}},
      {"compare, an expected case with no tensors", "compare " + path("s7") + " " + path("s7a"), 2, {path("s7")}},
      {"conform, a case whose block_size is -1", "conform --golden " + d + "/g8", 2,
       {d + "/g8/torchao.codebook8.signed/s8.safetensors", "block_size"}},
      {"conform, an Adam case with an empty lr", "conform --golden " + d + "/g9", 2,
       {d + "/g9/torchao.adam.fp8/s9.safetensors", "'lr'"}},
      {"compare, an Adam case with an empty lr", "compare " + d + "/g9/torchao.adam.fp8/s9.safetensors " + d +
       "/g9/torchao.adam.fp8/s9.safetensors", 2, {d + "/g9/torchao.adam.fp8/s9.safetensors", "'lr'"}},
  };
  for (const Repro& r : table) check(r, dir.path);
}

TEST_CASE("compare on a case of 60 000 tensors runs in linear time (a lookup per tensor by scan took minutes)") {
  TempDir dir("lowbit_hostile_many_");
  Case many;
  for (int i = 0; i < 60000; ++i)
    many.add(
        Tensor::from_bytes("t" + std::to_string(i), DType::U8, {1}, std::vector<std::uint8_t>{static_cast<std::uint8_t>(i)}));
  write_case(dir / "many.safetensors", many);
  // CPU seconds of the command (user and system, the children waited for), not the wall clock: a
  // machine busy with other builds must not fail it
  const auto cpu_seconds = [] {
    rusage u{};
    ::getrusage(RUSAGE_CHILDREN, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double before = cpu_seconds();
  const Run run = lowbit_cli("compare " + (dir / "many.safetensors") + " " + (dir / "many.safetensors"));
  const double seconds = cpu_seconds() - before;
  CHECK(run.code == 0);
  CHECK(run.output.find("t59999: 1 elements, 0 mismatches") != std::string::npos);
  // about 2.2 s here; the scan per tensor took 12.6 s for 20 000 tensors, 9 times that for 60 000
  CHECK(seconds < 40.0);
}

TEST_CASE("Markdown reports of compare, conform and audit keep their tables whatever the names in the files") {
  TempDir dir("lowbit_hostile_md_");
  const std::string evil = "x|y`z\n| forged | row |\x1b[2J<script>alert(1)</script>";
  // compare: a case of the format with a hostile extra tensor and format-free metadata, against itself
  // with one code changed, so the mismatch table is rendered too
  Case e = fp8_case({1.0f, 2.0f, 3.0f});
  e.add(Tensor::from_bytes(evil, DType::U8, {1}, std::vector<std::uint8_t>{1}));
  e.metadata["note"] = evil;
  write_case(dir / "e.safetensors", e);
  Case a = e;
  a.find("codes")->bytes[2] ^= 1;
  a.find(evil)->bytes[0] = 2;
  write_case(dir / "a.safetensors", a);
  const Run compare = lowbit_cli("compare " + (dir / "e.safetensors") + " " + (dir / "a.safetensors") + " --markdown " +
                                 (dir / "c.md"));
  CHECK(compare.code == 1);
  const std::string c_md = slurp(dir.path / "c.md");
  CHECK(checked_table_rows(c_md) >= 2 + 4 + 1);
  CHECK_FALSE(has_control_bytes(c_md));
  CHECK(c_md.find("| `x\\x7Cy\\x60z\\n\\x7C forged \\x7C row \\x7C\\x1B[2J<script>alert(1)</script>` |") != std::string::npos);

  // conform: a golden folder whose path holds | and a backtick
  const fs::path golden = dir.path / "g|`x";
  golden_folder(golden, "fp8.e5m2.inf/a.safetensors", fp8_case({1.0f, 3.0f}));
  const Run conform = lowbit_cli("conform --golden '" + golden.string() + "' --markdown " + (dir / "conform.md"));
  CHECK(conform.code == 0);
  const std::string k_md = slurp(dir.path / "conform.md");
  CHECK(checked_table_rows(k_md) == 2);  // separator and one format
  CHECK(k_md.find("Golden folder `" + dir.path.string() + "/g\\x7C\\x60x`") != std::string::npos);

  // audit --state: the input heading is FILE:tensor, the tensor named by the file
  Case state;
  std::vector<float> m(4096);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i % 89) * 1e-3f - 0.04f;
  state.add(Tensor::from_f32("exp_avg" + evil, {4096}, m));
  write_case(dir / "s.safetensors", state);
  const Run audit = lowbit_cli("audit -q --formats torchao.fp8 --block-sizes 256 --state " + (dir / "s.safetensors") +
                               " --markdown " + (dir / "audit.md"));
  CHECK(audit.code == 0);
  CHECK(audit.output.find('\x1b') == std::string::npos);  // the terminal lines escape it too
  const std::string u_md = slurp(dir.path / "audit.md");
  CHECK(checked_table_rows(u_md) >= 3 * 2);
  CHECK_FALSE(has_control_bytes(u_md));
  CHECK(u_md.find("\n## `" + dir.path.string() + "/s.safetensors:exp_avgx\\x7Cy") != std::string::npos);
}

// Issue #25's reproductions (files and numbers; the plugin host's are in test_verify and the Python
// package's in python/tests):
//   audit --trajectory --seed 2^53, -1, 2^64-1 (SIGABRT)   here, "numbers" table
//   golden generate --steps 2147483647 (until the OOM killer) here, "numbers" table
//   -1 and overflow read into unsigned options             here, "numbers" table (--check-elements,
//                                                          --max-listed, --seed of sweep and study)
//   empty values read as 0 (--max-listed "", spec keys)    here, "numbers" table and "every key ..."
//   a link at the temporary's name <target>.tmp.<pid>      here, "a link planted ..."; test_atomic_file
//                                                          "temporaries: created exclusively ..."
//   a policy file calling itself bit-exact                 here, "a policy file is named ..." (verify of a
//                                                          ties-away kernel, compare; bnb-cuda); the file an input
//   zero elements pass (normal:n=0, edges:n=0, empty file:) here, "nothing to check is never a pass ..."
//   audit of 0 values: error 0, SQNR 0                     here, same (n/a)
//   golden check prints manifest paths raw                 here, "golden check prints a manifest's paths escaped"
//   the number parser itself                               test_strict_number
//   --input file: skips the manifest check (generate,      here, "--input file: goes through the manifest check ..."
//   verify, audit accept a tampered golden file)
//   another tool's MANIFEST.json in a parent is fatal      here, same (inspect, compare below it)
//   readers take no lock while --replace rewrites          here, "readers of a golden folder wait ..." (inspect,
//                                                          conform, golden check wait for the writer's lock)
//   the 2^28 cap checked after reading the whole file      here, same (a sparse 2 GiB file under ulimit -v 256 MiB)

TEST_CASE("issue 25: every number typed is whole text in its range, named in one error line") {
  TempDir dir("lowbit_hostile_numbers_");
  const std::string d = dir.path.string();
  write_case(dir / "b.safetensors", fp8_case({2.0f, 5.0f}));
  const std::string b = d + "/b.safetensors", out = " --out " + d + "/new";
  const std::string generate = "golden generate --format torchao.fp8 --input normal:n=64" + out;
  const std::vector<Repro> table = {
      {"trajectory seed 2^53 (its problem draws seed .. seed + 3)", "audit -q --trajectory --seed 9007199254740992", 2,
       {"--seed must be a whole number in 0..9007199254740989 (got 9007199254740992)"}},
      {"trajectory seed -1", "audit -q --trajectory --seed -1", 2, {"--seed must be a whole number", "(got -1)"}},
      {"trajectory seed 2^64-1", "audit -q --trajectory --seed 18446744073709551615", 2, {"--seed must be a whole number"}},
      {"trajectory steps past the bound", "audit -q --trajectory --steps 2147483648", 2, {"--steps must be a whole number in 1..100000"}},
      {"trajectory lr nan", "audit -q --trajectory --lr nan", 2, {"--lr must be a finite number", "(got nan)"}},
      {"trajectory lr inf", "audit -q --trajectory --lr inf", 2, {"--lr must be a finite number"}},
      {"generate --steps 2^31-1", "golden generate --format torchao.adam.dense --input normal:n=64 --steps 2147483647" + out, 2,
       {"--steps must be a whole number in 1..1000 (got 2147483647)"}},
      {"generate --check-elements -1", generate + " --check-elements -1", 2, {"--check-elements must be a whole number", "(got -1)"}},
      {"audit --check-elements 2^64", "audit -q --check-elements 18446744073709551616", 2, {"--check-elements must be a whole number"}},
      {"compare --max-listed -1", "compare " + b + " " + b + " --max-listed -1", 2, {"--max-listed must be a whole number", "(got -1)"}},
      {"compare --max-listed empty", "compare " + b + " " + b + " --max-listed ''", 2, {"--max-listed", "(got nothing)"}},
      {"compare --max-listed 1.5", "compare " + b + " " + b + " --max-listed 1.5", 2, {"--max-listed", "(got 1.5)"}},
      {"sweep fp8 --seed -1", "sweep fp8 --format e4m3fn --policy nan --from bf16 --seed -1", 2, {"--seed must be a whole number"}},
      {"sweep fp8 --seed 2^64", "sweep fp8 --format e4m3fn --policy nan --from bf16 --seed 18446744073709551616", 2,
       {"--seed must be a whole number in 0..18446744073709551615"}},
      {"study --seed -1", "study coat-expansion --groups 1 --seed -1", 2, {"--seed must be a whole number"}},
      {"study --groups 2^64-1", "study coat-expansion --groups 18446744073709551615", 2, {"--groups must be a whole number in 1..1000000"}},
      {"study --expand-min empty", "study coat-expansion --groups 1 --expand-min ''", 2, {"--expand-min", "(got nothing)"}},
      {"verify --steps 0", "verify --kernel " + d + "/none.so --steps 0", 2, {"--steps must be a whole number in 1..1000"}},
      {"--threads 0x4", "audit -q --threads 0x4", 2, {"--threads must be a whole number"}},
  };
  for (const Repro& r : table) check(r, dir.path);
}

TEST_CASE("issue 25: every key of every input spec kind refuses an empty value, naming the key") {
  TempDir dir("lowbit_hostile_keys_");
  const std::map<std::string, std::vector<std::string>> keys = {
      {"normal", {"n", "seed", "mean", "std"}},     {"uniform", {"n", "seed", "lo", "hi"}},
      {"lognormal", {"n", "seed", "mu", "sigma"}},  {"student-t", {"n", "seed", "nu"}},
      {"constant", {"n", "seed", "value"}},         {"outliers", {"n", "seed", "std", "scale", "block"}},
      {"special", {"n", "seed"}},                   {"edges", {"n", "seed"}},
      {"scaled-edges", {"n", "seed"}},              {"adam-m", {"n", "seed", "steps", "std", "spread"}},
      {"adam-v", {"n", "seed", "steps", "std", "spread"}}};
  for (const auto& [kind, names] : keys)
    for (const std::string& key : names) {
      check({kind + ":" + key + "=", "audit -q --formats torchao.fp8 --block-sizes 256 --input " + kind + ":" + key + "=", 2,
             {"input spec '" + kind + ":" + key + "=': " + key + " must be a", "(got nothing)"}},
            dir.path);
      check({kind + ":" + key + "=nan", "audit -q --formats torchao.fp8 --block-sizes 256 --input " + kind + ":" + key + "=nan", 2,
             {key + " must be a", "(got nan)"}},
            dir.path);
    }
}

TEST_CASE("issue 25: a link planted at the old temporary's name <target>.tmp.<pid> leaves its victim intact") {
  TempDir dir("lowbit_hostile_link_");
  const std::string d = dir.path.string();
  write_case(dir / "a.safetensors", fp8_case({2.0f, 5.0f}));
  write_text(dir.path / "victim", "precious");
  // exec keeps the shell's pid, so $$ is the pid lowbit runs as: the name a predictable temporary had
  const Run run = run_shell("cd " + d + " && ln -s victim r.json.tmp.$$ && ln -s victim r.md.tmp.$$ && exec " +
                            std::string(LOWBIT_CLI) + " compare a.safetensors a.safetensors --report r.json");
  CAPTURE(run.output);
  CHECK(run.code == 0);
  CHECK(slurp(dir.path / "victim") == "precious");
  CHECK(slurp(dir.path / "r.json").find("\"conformant\": true") != std::string::npos);
  // nothing left beside the outputs but the two planted links, still links to the victim
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    names.push_back(e.path().filename().string());
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      CHECK(fs::read_symlink(e.path()) == "victim");
  }
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() == 6);
  CHECK(names[0] == "a.safetensors");
  CHECK(names[1] == "r.json");
  CHECK(names[2].rfind("r.json.tmp.", 0) == 0);
  CHECK(names[3] == "r.md");
  CHECK(names[4].rfind("r.md.tmp.", 0) == 0);
  CHECK(names[5] == "victim");
}

TEST_CASE("issue 25: a policy file is named by its path and sha256, may not take a shipped name, and is an input") {
  TempDir dir("lowbit_hostile_policy_");
  TempDir reports("lowbit_hostile_policy_reports_");
  const std::string d = dir.path.string();
  write_case(dir / "b.safetensors", fp8_case({2.0f, 5.0f}));
  const std::string b = d + "/b.safetensors";
  write_text(dir.path / "evil.json", R"({"name":"bit-exact","allow_ties":true,"boundary_ulps":1e308})");
  write_text(dir.path / "evil-bnb.json", R"({"name":"bnb-cuda","allow_ties":true,"boundary_ulps":3})");
  write_text(dir.path / "mine.json", R"({"name":"mine","allow_ties":true})");
  write_text(dir.path / "inf.json", R"({"name":"wide","boundary_ulps":1e400})");
  const std::string ties_away = std::string(LOWBIT_PLUGIN_DIR) + "/mutant_fp8_ties_away.so";
  // the sha256 from coreutils, not from lowbit
  const Run sum = run_shell("sha256sum " + d + "/mine.json");
  REQUIRE(sum.code == 0);
  const std::string sha = sum.output.substr(0, 64);
  const std::vector<Repro> table = {
      {"a file calling itself bit-exact passes a ties-away kernel",
       "verify --kernel " + ties_away + " --input edges --no-golden --policy " + d + "/evil.json", 2,
       {d + "/evil.json", "calls itself 'bit-exact', the name of a shipped policy"}},
      {"compare under a file calling itself bit-exact", "compare " + b + " " + b + " --policy " + d + "/evil.json", 2,
       {d + "/evil.json", "calls itself 'bit-exact'"}},
      {"a file calling itself bnb-cuda", "compare " + b + " " + b + " --policy " + d + "/evil-bnb.json", 2,
       {d + "/evil-bnb.json", "calls itself 'bnb-cuda'"}},
      {"boundary_ulps past a double", "compare " + b + " " + b + " --policy " + d + "/inf.json", 2, {d + "/inf.json"}},
      {"a report over the policy file", "compare " + b + " " + b + " --policy " + d + "/mine.json --report " + d + "/mine.json", 2,
       {d + "/mine.json", "input of this run"}},
      {"the Markdown report over the policy file",
       "compare " + b + " " + b + " --policy " + d + "/mine.json --markdown " + d + "/mine.json", 2, {"input of this run"}},
      {"a file policy is named by path and sha256", "compare " + b + " " + b + " --policy " + d + "/mine.json --report " +
       reports / "r.json", 0, {"policy mine (file " + d + "/mine.json, sha256 " + sha + ")"}},
      {"the shipped file given by its path is the shipped policy",
       "compare " + b + " " + b + " --policy " + std::string(LOWBIT_POLICY_DIR) + "/bnb-cuda.json", 0, {"policy bnb-cuda\n"}},
  };
  for (const Repro& r : table) check(r, dir.path);
  const std::string report = slurp(reports.path / "r.json");
  CHECK(report.find("\"file\": \"" + d + "/mine.json\"") != std::string::npos);
  CHECK(report.find("\"sha256\": \"" + sha + "\"") != std::string::npos);
  CHECK(slurp(reports.path / "r.md").find(sha) != std::string::npos);
}

TEST_CASE("issue 25: nothing to check is never a pass: 0 elements are exit 2 in verify and generate, n/a in the audit") {
  TempDir dir("lowbit_hostile_empty_");
  const std::string d = dir.path.string();
  Case empty;
  empty.add(Tensor::from_f32("input", {0}, std::vector<float>{}));
  write_case(dir / "empty.safetensors", empty);
  Case empty_state;
  empty_state.add(Tensor::from_f32("param", {0}, std::vector<float>{}));
  empty_state.add(Tensor::from_f32("grad", {0}, std::vector<float>{}));
  write_case(dir / "empty-state.safetensors", empty_state);
  const std::string reference = std::string(LOWBIT_PLUGIN_DIR) + "/reference_plugin.so";
  const std::string out = " --out " + d + "/new";
  const std::vector<Repro> table = {
      {"verify normal:n=0", "verify --kernel " + reference + ":reference.torchao.fp8 --no-golden --input normal:n=0", 2,
       {"normal:n=0", "0 elements: nothing to check"}},
      {"verify edges:n=0", "verify --kernel " + reference + ":reference.fp8.e4m3fn.satfinite --no-golden --input edges:n=0", 2,
       {"edges:n=0", "nothing to check"}},
      {"verify an empty file", "verify --kernel " + reference + ":reference.torchao.fp8 --no-golden --input file:" + d +
       "/empty.safetensors", 2, {"empty.safetensors", "nothing to check"}},
      {"generate normal:n=0", "golden generate --format torchao.fp8 --input normal:n=0" + out, 2, {"nothing to check"}},
      {"generate edges:n=0", "golden generate --format fp8.e4m3fn.satfinite --input edges:n=0" + out, 2, {"nothing to check"}},
      {"generate special:n=0", "golden generate --format fp8.e4m3fn.satfinite --input special:n=0" + out, 2, {"nothing to check"}},
      {"generate from an empty file", "golden generate --format torchao.fp8 --input file:" + d + "/empty.safetensors" + out, 2,
       {"nothing to check"}},
      {"generate an optimizer from n=0", "golden generate --format torchao.adam.dense --input normal:n=0" + out, 2,
       {"nothing to check"}},
      {"generate an optimizer from an empty file",
       "golden generate --format torchao.adam.dense --input file:" + d + "/empty-state.safetensors" + out, 2, {"nothing to check"}},
  };
  for (const Repro& r : table) check(r, dir.path);
  // the audit: every configuration n/a, no figures
  const SplitRun audit = run_shell_split(std::string(LOWBIT_CLI) +
                                         " audit -q --formats torchao.fp8 --block-sizes 256 --input normal:n=0 --report " + d +
                                         "/a.json");
  CAPTURE(audit.err);
  CHECK(audit.code == 0);
  const std::string json = slurp(dir.path / "a.json");
  CHECK(json.find("\"status\": \"n/a\"") != std::string::npos);
  CHECK(json.find("no values to measure (0 elements)") != std::string::npos);
  CHECK(json.find("sqnr") == std::string::npos);
}

TEST_CASE("issue 25: golden check prints a manifest's paths escaped: no terminal escape, no forged line") {
  TempDir dir("lowbit_hostile_check_");
  // a file name holding a newline that starts a forged "ok" line, and an escape sequence
  golden_folder(dir.path / "g", "fp8.e5m2.inf/a\nok       forged\x1b[2J.safetensors", fp8_case({1.0f, 3.0f}));
  const SplitRun run = run_shell_split(std::string(LOWBIT_CLI) + " golden check --golden " + dir / "g");
  CAPTURE(run.out);
  CHECK(run.code == 0);
  CHECK(run.out.find("ok       fp8.e5m2.inf/a\\nok       forged\\x1B[2J.safetensors\n") != std::string::npos);
  CHECK(run.out.find('\x1b') == std::string::npos);
  CHECK(run.out.find("\nok       forged") == std::string::npos);
  CHECK(count_lines(run.out) == 2);  // the case's line and the summary
}

TEST_CASE("issue 25: --input file: goes through the manifest check; another tool's MANIFEST.json is ignored") {
  TempDir dir("lowbit_hostile_door_");
  const std::string d = dir.path.string();
  // a listed golden case, then tampered with (one byte of its data)
  golden_folder(dir.path / "g", "torchao.fp8/a.safetensors", fp8_case({1.0f, 3.0f, 0.5f, 7.0f}));
  {
    std::fstream f(dir.path / "g/torchao.fp8/a.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x3f');
  }
  const std::string tampered = d + "/g/torchao.fp8/a.safetensors";
  const std::string reference = std::string(LOWBIT_PLUGIN_DIR) + "/reference_plugin.so";
  // a folder of cases under another tool's MANIFEST.json (not lowbit's shape), and under one that is not JSON
  fs::create_directories(dir.path / "other/sub");
  write_text(dir.path / "other/MANIFEST.json", R"({"name": "some dataset", "files": ["x.bin", "y.bin"]})");
  write_case(dir / "other/sub/c.safetensors", fp8_case({1.0f, 2.0f}));
  fs::create_directories(dir.path / "text/sub");
  write_text(dir.path / "text/MANIFEST.json", "MANIFEST: files of the text tool\n");
  write_case(dir / "text/sub/c.safetensors", fp8_case({1.0f, 2.0f}));
  const std::vector<Repro> table = {
      {"golden generate from a tampered golden file",
       "golden generate --format fp8.e5m2.inf --input file:" + tampered + ":input --out " + d + "/new", 2,
       {tampered, "disagrees with the manifest"}},
      {"verify on a tampered golden file", "verify --kernel " + reference + ":reference.fp8.e5m2.inf --no-golden --input file:" +
       tampered + ":input", 2, {tampered, "disagrees with the manifest"}},
      {"audit of a tampered golden file", "audit -q --formats torchao.fp8 --block-sizes 256 --input file:" + tampered + ":input",
       2, {tampered, "disagrees with the manifest"}},
      {"inspect below another tool's MANIFEST.json", "inspect " + d + "/other/sub/c.safetensors", 0, {"c.safetensors"}},
      {"compare below a MANIFEST.json that is not JSON",
       "compare " + d + "/text/sub/c.safetensors " + d + "/text/sub/c.safetensors", 0, {"conformant"}},
  };
  for (const Repro& r : table) check(r, dir.path);
}

TEST_CASE("issue 25: readers of a golden folder wait for its writer's lock; every file: tensor is capped from the header") {
  TempDir dir("lowbit_hostile_lock_");
  const std::string d = dir.path.string();
  golden_folder(dir.path / "g", "fp8.e5m2.inf/a.safetensors", fp8_case({1.0f, 3.0f}));
  {
    const FolderLock writer(d + "/g");  // as golden generate holds it while it publishes
    for (const std::string& args : {"inspect " + d + "/g/fp8.e5m2.inf/a.safetensors", "conform --golden " + d + "/g",
                                    "golden check --golden " + d + "/g"}) {
      CAPTURE(args);
      CHECK(run_shell("timeout 1 " + std::string(LOWBIT_CLI) + " " + args).code == 124);  // still waiting after 1 s
    }
  }
  CHECK(lowbit_cli("inspect " + d + "/g/fp8.e5m2.inf/a.safetensors").code == 0);
  CHECK(lowbit_cli("conform --golden " + d + "/g").code == 0);

  // 2^29 float32 elements: a valid header over a sparse file of 2 GiB that no reader may load
  const std::string header = R"({"input":{"dtype":"F32","shape":[536870912],"data_offsets":[0,2147483648]}})";
  const std::uint64_t length = header.size();
  {
    std::ofstream f(dir.path / "big.safetensors", std::ios::binary);
    f.write(reinterpret_cast<const char*>(&length), 8);
    f << header;
  }
  fs::resize_file(dir.path / "big.safetensors", 8 + length + (std::uint64_t{1} << 31));
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;  // ASan reserves terabytes of address space up front
#else
  const std::string limit = "ulimit -v 262144; ";  // reading the data would need 2 GiB
#endif
  for (const std::string& args : {"golden generate --format torchao.fp8 --input file:" + d + "/big.safetensors --out " + d + "/new",
                                  "audit -q --formats torchao.fp8 --block-sizes 256 --input file:" + d + "/big.safetensors"}) {
    CAPTURE(args);
    const auto start = std::chrono::steady_clock::now();
    const Run run = run_shell(limit + std::string(LOWBIT_CLI) + " " + args);
    CAPTURE(run.output);
    CHECK(run.code == 2);
    CHECK(run.output.find("tensor 'input' of " + d + "/big.safetensors has 536870912 elements, more than 2^28") !=
          std::string::npos);
    CHECK(count_lines(run.output) == 1);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
  }
  CHECK_FALSE(fs::exists(dir.path / "new"));
}
