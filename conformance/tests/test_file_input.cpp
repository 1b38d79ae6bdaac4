// The file:PATH[:TENSOR] input kind, from outside through the lowbit command: a file holding the very
// values a generator makes gives the same codes as that generator (two independent paths to the
// same case); a quantizer keeps the tensor's shape; an optimizer steps from the file's param and
// grad; every bad spec is one error line and exit 2; no case overwrites the input file, even through
// a link.
#include <doctest/doctest.h>

#include <filesystem>

#include "cli_run.hpp"
#include "elementwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

void write_tensors(const std::string& path, std::vector<Tensor> tensors) {
  Case c;
  for (Tensor& t : tensors) c.add(std::move(t));
  write_case(path, c);
}

}  // namespace

TEST_CASE("file: gives the same case as the generator whose values the file holds") {
  TempDir dir("lowbit_file_input_");
  const std::vector<float> values =
      generate_inputs(parse_input_spec("normal:n=4096,seed=1"), FormatSpec{}, nlohmann::json::object());
  write_tensors(dir / "x.safetensors", {Tensor::from_f32("values", {4096}, values)});
  REQUIRE(lowbit_cli("golden generate --format torchao.codebook8.signed --input normal:n=4096,seed=1 --input file:" +
                     (dir / "x.safetensors") + " --out " + (dir / "g")).code == 0);
  const Case generated = read_case(dir / "g/torchao.codebook8.signed/normal.n4096.seed1.safetensors");
  const Case from_file = read_case(dir / "g/torchao.codebook8.signed/file.x.safetensors");
  for (const char* name : {"input", "codes", "scale", "dequant"}) {
    CAPTURE(name);
    CHECK(same_bytes(from_file.require(name), generated.require(name)));
  }
  CHECK(from_file.meta("input") == "file:" + (dir / "x.safetensors"));
  CHECK(lowbit_cli("conform --golden " + (dir / "g")).code == 0);
}

TEST_CASE("file: keeps a quantizer's shape, and feeds an optimizer its param and grad") {
  TempDir dir("lowbit_file_input_");
  std::vector<float> x(32 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.37f - 17.0f;
  write_tensors(dir / "act.safetensors", {Tensor::from_f32("x", {32, 64}, x), Tensor::from_f32("other", {3}, std::span<const float>(x).first(3))});
  REQUIRE(lowbit_cli("golden generate --format coat.act.pergroup --input file:" + (dir / "act.safetensors") +
                     ":x --out " + (dir / "g")).code == 0);
  const Case act = read_case(dir / "g/coat.act.pergroup/file.act.x.safetensors");
  CHECK(act.require("input").shape == std::vector<std::int64_t>{32, 64});
  CHECK(act.require("codes").shape == std::vector<std::int64_t>{32, 64});
  CHECK(act.require("scale").shape == std::vector<std::int64_t>{32, 4});  // one per 1x16 group

  std::vector<float> param(1000), grad(1000);
  for (std::size_t i = 0; i < param.size(); ++i) {
    param[i] = static_cast<float>(i) * 1e-3f - 0.5f;
    grad[i] = static_cast<float>(i % 13) * 1e-2f - 0.06f;
  }
  write_tensors(dir / "state.safetensors", {Tensor::from_f32("param", {1000}, param), Tensor::from_f32("grad", {1000}, grad)});
  REQUIRE(lowbit_cli("golden generate --format bnb.adam8bit.cpu --input file:" + (dir / "state.safetensors") +
                     " --steps 2 --out " + (dir / "g")).code == 0);
  const Case first = read_case(dir / "g/bnb.adam8bit.cpu/file.state.step1.safetensors");
  const Case second = read_case(dir / "g/bnb.adam8bit.cpu/file.state.step2.safetensors");
  CHECK(first.require("param").f32() == param);
  CHECK(first.require("grad").f32() == grad);
  CHECK(second.require("grad").f32() == grad);  // the same gradient at every step
  CHECK(same_bytes(second.require("param"), first.require("param.next")));
  CHECK(lowbit_cli("conform --golden " + (dir / "g")).code == 0);
}

TEST_CASE("file: refuses what it cannot take, in one line, and never overwrites its input") {
  TempDir dir("lowbit_file_input_");
  const std::vector<float> x(64, 1.5f);
  write_tensors(dir / "two.safetensors", {Tensor::from_f32("a", {64}, x), Tensor::from_f32("b", {64}, x)});
  const std::string two = dir / "two.safetensors";
  struct Bad {
    std::string args, names;
  };
  const Bad bad[] = {
      {"--format torchao.codebook8.signed --input file:" + (dir / "none.safetensors"), "none.safetensors"},
      {"--format torchao.codebook8.signed --input file:" + two, "none is 'input'"},
      {"--format torchao.codebook8.signed --input file:" + two + ":c", "no tensor 'c'"},
      {"--format torchao.codebook8.signed --input file:" + two + ":", "empty tensor name"},
      {"--format torchao.codebook8.signed --input file:", "needs a path"},
      {"--format bnb.adam8bit.cpu --input file:" + two + ":a", "drop ':a'"},
      {"--format bnb.adam8bit.cpu --input file:" + two, "'param'"},
      {"--format coat.act.pergroup --input file:" + two + ":a", "must have 2 dimension(s)"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.args);
    const SplitRun r = run_shell_split(std::string(LOWBIT_CLI) + " golden generate " + b.args + " --out " + (dir / "g"));
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(b.names) != std::string::npos);
  }
  // A case file that is a link to the input: --replace must not write through it.
  const std::vector<float> act(32 * 64, 0.75f);  // COAT's tiles: M a multiple of 32, N of 64
  write_tensors(dir / "act.safetensors", {Tensor::from_f32("x", {32, 64}, act)});
  const std::string before = slurp(dir / "act.safetensors");
  std::filesystem::create_directories(dir / "o/coat.act.pergroup");
  std::filesystem::create_symlink(dir / "act.safetensors", dir / "o/coat.act.pergroup/file.act.x.safetensors");
  const SplitRun r = run_shell_split(std::string(LOWBIT_CLI) + " golden generate --format coat.act.pergroup --input file:" +
                                     (dir / "act.safetensors") + ":x --replace --out " + (dir / "o"));
  CHECK(r.code == 2);
  CAPTURE(r.err);
  CHECK(r.err.find("is the --input file") != std::string::npos);
  CHECK(slurp(dir / "act.safetensors") == before);
}
