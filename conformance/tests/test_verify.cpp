// lowbit verify and the plugin host: the reference as a plugin passes every format (no false alarm),
// each mutant of the bank is caught by the default inputs with the class a kernel author expects,
// and a plugin that is malformed, crashes, hangs or fails is refused (exit 2) or reported (exit 1),
// never a crash of lowbit. The plugins are built beside this test (conformance/CMakeLists.txt).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <span>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/compare.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/fp8.hpp"
#include "lowbit/kernel_sandbox.hpp"
#include "lowbit/plugin_host.hpp"
#include "lowbit/verify.hpp"
#include "perblock_e4m3.cuh"
#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "bnb_cpu_lut.cuh"
#include "torchao_blockwise.cuh"

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
    CHECK(r.code == 0);
    CHECK(r.output.find("cases conformant: conformant") != std::string::npos);
    CHECK(lines_starting(r.output, "MISMATCH") == 0);
    CHECK(lines_starting(r.output, "FAILED") == 0);
  }
}

TEST_CASE("verify(): the engine's run tells each case and skip as it comes, and is what the CLI prints and writes") {
  // the reference as a plugin on one input and the shipped golden cases of torchao.fp8 (those of the
  // other CPU capabilities are passed over, with why), then a mutant of the bank (torchao.codebook8's
  // quantizer multiplying by the reciprocal of absmax) that must be caught on scaled-edges
  struct Run_ {
    std::string library, format, args;
    std::vector<std::string> inputs;
    std::string golden;
  };
  const std::vector<Run_> runs = {
      {"reference_plugin", "torchao.fp8", "--input special", {"special"}, LOWBIT_GOLDEN_DIR},
      {"mutant_reciprocal", "torchao.codebook8.signed", "--no-golden", {}, ""}};
  for (const Run_& run : runs) {
    CAPTURE(run.library);
    const std::string library = open_plugin(plugin(run.library));
    const FormatSpec& f = *find_format(run.format);
    VerifyOptions o;
    o.inputs = run.inputs;
    o.policy = load_tolerance_policy(f.default_tolerance, LOWBIT_POLICY_DIR);
    o.golden = run.golden;
    o.made_by = {"lowbit " LOWBIT_VERSION, "lowbit verify " LOWBIT_VERSION};  // the CLI's
    std::vector<std::string> told;
    std::size_t done = 0;
    VerifyEvents events;
    events.case_done = [&](const VerifiedCase& v, const std::string& line) {
      CHECK(line == verify_case_line(v));
      told.push_back(line);
      ++done;
    };
    events.case_skipped = [&](const std::string& line) { told.push_back(line); };
    const std::vector<PluginKernel> kernels = plugin_kernels(library, 30);
    const auto k = std::find_if(kernels.begin(), kernels.end(), [&](const PluginKernel& p) { return p.format == run.format; });
    REQUIRE(k != kernels.end());
    const VerifyReport r = verify(KernelUnderReview{library, k->name, 60, {}, 0, {}}, f, o, events);
    CHECK(done == r.cases.size());
    CHECK(told.size() == r.cases.size() + r.skipped.size());
    const bool reference = run.library == "reference_plugin";
    CHECK(r.conformant == reference);
    if (reference) {
      CHECK(r.skipped.size() > 0);
      for (const std::string& line : r.skipped) CHECK(line.find(": cpu_capability \"") != std::string::npos);
      CHECK(std::any_of(r.cases.begin(), r.cases.end(), [](const VerifiedCase& v) { return v.label.starts_with("golden "); }));
    } else {
      CHECK(std::any_of(told.begin(), told.end(), [](const std::string& l) { return l.starts_with("MISMATCH scaled-edges:"); }));
    }
    TempDir dir("lowbit_verify_engine_");
    const SplitRun cli = run_shell_split(std::string(LOWBIT_CLI) + " verify --kernel " + plugin(run.library) + ":" + k->name +
                                         " " + run.args + " --golden " + LOWBIT_GOLDEN_DIR + " --report " + (dir / "r.json"));
    CAPTURE(cli.err);
    CHECK(cli.code == (reference ? 0 : 1));
    std::string printed;
    for (const std::string& line : told) printed += line + "\n";
    CHECK(cli.out == printed + r.summary + "\n");
    CHECK(slurp(dir / "r.json") == r.json.dump(2) + "\n");
    CHECK(slurp(dir / "r.md") == r.markdown);
  }
}

TEST_CASE("verify: special on a whole-block format runs padded to one block, and a NaN-ignoring absmax is caught on it") {
  // the reference: the padded block (18 values, 238 zeros) conforms, compared element for element
  // (769: input, codes and dequant of 256 elements each, and the block's scale)
  const Run good = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference.torchao.fp8 --input special --no-golden");
  CAPTURE(good.output);
  CHECK(good.code == 0);
  CHECK(good.output.find("ok       special: 769 elements") != std::string::npos);
  CHECK(good.output.find("skipped") == std::string::npos);
  // fmaxf's absmax gives the block a finite scale: the padded special input alone catches it
  const Run bad = lowbit_cli("verify --kernel " + plugin("mutant_absmax_ignores_nan") + " --input special --no-golden");
  CAPTURE(bad.output);
  CHECK(bad.code == 1);
  CHECK(bad.output.find("MISMATCH special: 769 elements") != std::string::npos);
}

namespace {

// The first case an input spec makes for a format, before the reference runs.
Case generated_input(const std::string& format, const std::string& spec, const nlohmann::json& params = {}) {
  const FormatSpec& f = *find_format(format);
  nlohmann::json p = f.default_params;
  if (params.is_object()) p.update(params);
  Case out;
  bool first = true;
  for_each_case(f, p, parse_input_spec(spec), 1, {"test", "test_verify"}, [&](CaseToRun c) {
    if (first) out = c.inputs;
    first = false;
    return c.inputs;
  });
  return out;
}

}  // namespace

TEST_CASE("2-D formats: generated inputs are whole tiles, one tile wide; the fixed lists padded; other counts refused") {
  // special: its 18 values and 2030 zeros, one 32 x 64 tile of coat.act.pergroup (M % 2QB, N % 4QB)
  const Case special = generated_input("coat.act.pergroup", "special");
  const Tensor& x = special.require("input");
  CHECK(x.shape == std::vector<std::int64_t>{32, 64});
  const std::vector<float> v = x.f32();
  CHECK(std::isnan(v[10]));
  for (std::size_t i = 18; i < v.size(); ++i) CHECK(bits_of(v[i]) == 0u);
  CHECK(special.metadata.at("input") ==
        "special (shaped 32 x 64: coat.act.pergroup takes a 2-D input of whole 32 x 64 tiles (M % 32 == 0 and N % 64 == 0 "
        "(group_size 16)); padded with 2030 zeros)");
  // random inputs: whole tiles as asked, one tile wide, no padding
  CHECK(generated_input("coat.act.pergroup", "normal:n=8192").require("input").shape == std::vector<std::int64_t>{128, 64});
  CHECK(generated_input("coat.act.perblock", "normal:n=32768").require("input").shape == std::vector<std::int64_t>{256, 128});
  CHECK(generated_input("coat.act.pergroup.transposed", "edges").require("input").shape[1] == 16);
  // (symm's tile: two of its row_block x col_block blocks side by side)
  CHECK(generated_input("coat.fake.symm", "special:n=288").require("input").shape == std::vector<std::int64_t>{9, 32});
  // a count that is not whole tiles: the input spec, the tile and the rule named
  CHECK_THROWS_WITH_AS(generated_input("coat.act.pergroup", "normal:n=100"),
                       "input spec 'normal:n=100': coat.act.pergroup takes a 2-D input of whole 32 x 64 tiles (M % 32 == 0 "
                       "and N % 64 == 0 (group_size 16)): 100 values are not; give n a multiple of 2048",
                       std::invalid_argument);
  CHECK_THROWS_AS(generated_input("coat.act.perblock", "special:n=20"), std::invalid_argument);
  // symm's edges: blocks of its row_block x col_block tiles, none of 1 x 1 (no room beside the absmax)
  CHECK(generated_input("coat.fake.symm", "edges").require("input").shape[1] == 32);
  CHECK_THROWS_AS(generated_input("coat.fake.symm", "edges", {{"col_block", 1}}), std::invalid_argument);
  const Run r = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference.coat.act.perblock --input normal:n=4096");
  CHECK(r.code == 2);
  CHECK(r.output.find("--input 'normal:n=4096': input spec 'normal:n=4096': coat.act.perblock takes a 2-D input of whole "
                      "128 x 128 tiles") != std::string::npos);
  // the default battery: edges and scaled-edges of the FP8 group quantizers, special padded and cycled
  // over whole tiles (at least 288 values), random inputs of at least four tiles, special-blocks as
  // whole tiles, and per block at the smallest group size too (random: whole tiles of at least 4096);
  // its bf16 input (the random one and special-blocks narrowed to bf16)
  std::vector<std::string> specs;
  for (const InputRun& run : default_input_runs(*find_format("coat.act.perblock"))) specs.push_back(run.spec);
  CHECK(specs == std::vector<std::string>{"edges", "scaled-edges", "special", "special:n=16384", "normal:n=65536,seed=1",
                                          "outliers:n=65536,seed=2", "lognormal:n=65536,seed=3", "tiny-blocks",
                                          "special-blocks", "nan-tiles", "edges", "special-blocks", "normal:n=4096,seed=5", "edges",
                                          "tiny-blocks", "special", "special-blocks",  // these four with E5M2
                                          "normal:n=65536,seed=1,dtype=bf16", "special-blocks:dtype=bf16"});
  specs.clear();
  for (const InputRun& run : default_input_runs(*find_format("coat.fake.symm"))) specs.push_back(run.spec);
  CHECK(specs == std::vector<std::string>{"edges", "special", "special:n=288", "normal:n=4096,seed=1",
                                          "outliers:n=4096,seed=2", "lognormal:n=4096,seed=3", "special-blocks", "edges",
                                          "special", "special-blocks"});  // the last three with 4 x 8 blocks
}

namespace {

// Every class seen in a verify report, over all cases and tensors; and for one tensor, over the cases
// (the generated ones only when asked), its mismatches and how many are of one class.
struct ReportClasses {
  std::set<std::string> seen;
  std::uint64_t mismatches = 0, of_class = 0;
  std::set<std::string> variants;  // the variants named in the listed mismatches of the tensor
};

ReportClasses report_classes(const nlohmann::json& j, const std::string& tensor, const std::string& cls, bool generated_only) {
  ReportClasses out;
  for (const auto& c : j.at("cases")) {
    if (!c.contains("comparison")) continue;
    const bool golden = c.at("label").get<std::string>().starts_with("golden ");
    for (const auto& t : c.at("comparison").at("tensors")) {
      if (!t.contains("classes")) continue;
      for (const auto& [name, n] : t.at("classes").items())
        if (n.get<std::uint64_t>() > 0) out.seen.insert(name);
      if (t.at("name") != tensor || (generated_only && golden)) continue;
      out.mismatches += t.at("mismatches").get<std::uint64_t>();
      out.of_class += t.at("classes").at(cls).get<std::uint64_t>();
      for (const auto& m : t.at("first_mismatches"))
        if (m.contains("variant")) out.variants.insert(m.at("variant").get<std::string>());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("verify catches each mutant of the bank on its default inputs, with the class its bug has") {
  struct Mutant {
    const char* library;
    const char* caught_by;  // the input that must catch it
    // every mismatch of this tensor (over the generated cases only, when generated_only) has this class
    const char* tensor = nullptr;
    const char* cls = nullptr;
    const char* variant = nullptr;  // and the listed ones name this arithmetic variant
    bool generated_only = false;
  };
  const std::vector<Mutant> mutants = {
      // x * (1/s): the arithmetic variant on every code, never a tie (the kernel's own input is off the boundary)
      {"mutant_reciprocal", "MISMATCH scaled-edges", "codes", "arithmetic-variant", "reciprocal"},
      {"mutant_flush_subnormal", "MISMATCH edges", "codes", "flushed-subnormal"},
      {"mutant_fp8_ties_away", "MISMATCH edges", "codes", "tie"},
      {"mutant_codebook_ties_down", "MISMATCH scaled-edges"},
      {"mutant_fp8_saturate", "MISMATCH special", "codes", "genuine"},
      {"mutant_fp8_overflow_nan", "MISMATCH special", "codes", "genuine"},
      {"mutant_fp8_nan_sign", "MISMATCH special", "codes", "nan-encoding"},
      {"mutant_fp8_nan_payload", "MISMATCH special", "codes", "nan-encoding"},
      // the special values' NaN, cycled over one block (and padded to one: the test below)
      {"mutant_absmax_ignores_nan", "MISMATCH special.n256"},
      {"mutant_bf16_scale", "MISMATCH normal.n4096.seed1", "codes", "scale-propagated"},
      // torchao.fp8's codes from x * (1/s): the E4M3 edges under torchao's scale RN(1/448) catch it, all
      // the variant (its NaNs are the reference's: special.n256 passes it)
      {"mutant_fp8_element_reciprocal", "MISMATCH edges", "codes", "arithmetic-variant", "reciprocal"},
      // the scale as amax * (1/448): each differing scale is the variant, named as the root cause
      {"mutant_fp8_scale_reciprocal", "MISMATCH scaled-edges", "scale", "arithmetic-variant", "reciprocal"},
      {"mutant_bnb_tail_codes_zero", "MISMATCH special"},
      {"mutant_bnb_cuda_search", "MISMATCH scaled-edges"},
      // the lerp without the fused multiply-add: every generated parameter it moves is the variant, none a
      // library rounding (in golden cases a parameter torch's sqrt moved may still be one: the kernel's
      // element equals the reference's there)
      {"mutant_adam_no_fma", "MISMATCH adam-v.n4096.seed2.step2", "param.next", "arithmetic-variant", "unfused-fma", true},
      {"mutant_adam_lerp_swapped", "MISMATCH normal.n4096.seed1.std0.5.step1"},
      // the default battery's steps with weight_decay 0.01 (and the golden AdamW steps)
      {"mutant_decay_after_update", "MISMATCH normal.n4096.seed3.std0.5.weight_decay-0.01.step1"},
      // bitsandbytes' other 8-bit rules (bnb.*8bit.cpu): each bug on the parameter, all genuine
      {"mutant_lion_sign_first", "MISMATCH normal.n4096.seed1.std0.5.step1", "param.next", "genuine"},
      // step 1 copies the gradient either way: from step 2
      {"mutant_momentum_dampening", "MISMATCH normal.n4096.seed1.std0.5.step2", "param.next", "genuine"},
      {"mutant_rmsprop_eps_inside", "MISMATCH adam-v.n4096.seed2.step1"},
      // the default battery's steps with weight_decay 0.01, and its AdEMAMix run with both schedulers
      {"mutant_adagrad_decoupled_decay", "MISMATCH normal.n4096.seed3.std0.5.weight_decay-0.01.step1", "param.next",
       "genuine", nullptr, true},
      {"mutant_ademamix_alpha_late", "MISMATCH normal.n4096.seed4.std0.5.t_alpha-2.t_beta3-4.step1", "param.next",
       "genuine", nullptr, true},
      {"mutant_coat_k_not_floored", "MISMATCH normal.n4096.seed1.std0.5.step1"},
      {"mutant_coat_centre_one_sqrt", "MISMATCH adam-v.n4096.seed2.step1"},
      // COAT's 2-D formats on their generated tiles: x * (1/S) only on the FP8 edges in groups led by an
      // absmax of 1 (every golden case passes it: below), all the variant
      {"mutant_coat_act_reciprocal", "MISMATCH edges", "codes", "arithmetic-variant", "reciprocal"},
      // a NaN-propagating group max: the special values cycled over a tile give groups with a NaN
      // and finite values; each NaN scale is the root cause of its group's codes
      {"mutant_coat_act_max_keeps_nan", "MISMATCH special.n2048", "scale", "genuine"},
      {"mutant_coat_symm_absmax_ignores_nan", "MISMATCH special.n288", "scale", "genuine"},
      // y_t = y^T: every random input (groups along the wrong axis get other scales)
      {"mutant_coat_transposed_rows", "MISMATCH normal.n4096.seed1", "scale_t", "genuine"}};
  std::map<std::string, std::set<std::string>> classes_of;  // mutant -> every class its report shows
  std::map<std::string, std::string> output_of;              // mutant -> verify's output
  for (const Mutant& m : mutants) {
    CAPTURE(m.library);
    TempDir dir("lowbit_verify_");
    const Run r = lowbit_cli("verify --kernel " + plugin(m.library) + " --report " + (dir / "r.json") + " --save-cases " +
                             (dir / "cases"));
    CAPTURE(r.output);
    CHECK(r.code == 1);
    CHECK(r.output.find(m.caught_by) != std::string::npos);
    CHECK(r.output.find("NOT conformant") != std::string::npos);
    REQUIRE(std::filesystem::exists(dir / "r.json"));
    CHECK(!std::filesystem::is_empty(dir / "cases"));  // the failing cases, to attach to a pull request
    const nlohmann::json j = nlohmann::json::parse(slurp(dir / "r.json"));
    const ReportClasses c = report_classes(j, m.tensor ? m.tensor : "", m.cls ? m.cls : "genuine", m.generated_only);
    classes_of[m.library] = c.seen;
    output_of[m.library] = r.output;
    if (std::string(m.library) == "mutant_bf16_scale" || std::string(m.library) == "mutant_fp8_scale_reciprocal") {
      // each differing scale is reported once as the root cause, with the count of the codes and
      // dequantized values of its block that follow from it
      std::uint64_t all_caused = 0, all_listed = 0;
      for (const auto& kase : j.at("cases")) {
        std::uint64_t propagated = 0, caused = 0, listed = 0;
        for (const auto& t : kase.at("comparison").at("tensors")) {
          if (t.at("name") == "codes" || t.at("name") == "dequant")
            propagated += t.at("classes").at("scale-propagated").get<std::uint64_t>();
          if (t.at("name") != "scale") continue;
          caused = t.value("propagated", std::uint64_t{0});
          for (const auto& e : t.at("first_mismatches")) listed += e.value("propagated", std::uint64_t{0});
        }
        CHECK(caused == propagated);
        CHECK(listed <= caused);
        all_caused += caused;
        all_listed += listed;
      }
      CHECK(all_caused > 0);
      CHECK(all_listed > 0);
    }
    if (!m.tensor) continue;
    CAPTURE(m.tensor);
    CHECK(c.mismatches > 0);
    CHECK(c.of_class == c.mismatches);
    if (m.variant) CHECK(c.variants == std::set<std::string>{m.variant});
  }
  // Each class claim against the kernels without that bug: none of the other mutants shows it.
  auto shown_by = [&](const std::string& cls) {
    std::set<std::string> out;
    for (const auto& [library, seen] : classes_of)
      if (seen.contains(cls)) out.insert(library);
    return out;
  };
  CHECK(shown_by("nan-encoding") == std::set<std::string>{"mutant_fp8_nan_payload", "mutant_fp8_nan_sign"});
  // (not mutant_bnb_cuda_search, whose tiny-blocks dequant is 0 where the expected value is subnormal: its
  // code differs, and the value takes the code's class)
  CHECK(shown_by("flushed-subnormal") == std::set<std::string>{"mutant_flush_subnormal"});
  const std::set<std::string> variant = shown_by("arithmetic-variant");
  CHECK(variant.contains("mutant_reciprocal"));
  CHECK(variant.contains("mutant_adam_no_fma"));
  CHECK(variant.contains("mutant_fp8_element_reciprocal"));
  CHECK(variant.contains("mutant_fp8_scale_reciprocal"));
  CHECK(variant.contains("mutant_coat_act_reciprocal"));
  for (const char* other : {"mutant_fp8_ties_away", "mutant_flush_subnormal", "mutant_fp8_nan_sign", "mutant_fp8_nan_payload",
                            "mutant_fp8_saturate", "mutant_fp8_overflow_nan", "mutant_bf16_scale", "mutant_coat_k_not_floored",
                            "mutant_coat_centre_one_sqrt", "mutant_coat_act_max_keeps_nan", "mutant_coat_symm_absmax_ignores_nan",
                            "mutant_coat_transposed_rows"})
    CHECK_MESSAGE(!variant.contains(other), other);
  using Set = std::set<std::string>;
  CHECK(classes_of["mutant_reciprocal"] == Set{"arithmetic-variant"});
  CHECK(classes_of["mutant_flush_subnormal"] == Set{"flushed-subnormal"});
  CHECK(classes_of["mutant_fp8_ties_away"] == Set{"tie"});
  CHECK(classes_of["mutant_fp8_nan_sign"] == Set{"nan-encoding"});
  CHECK(classes_of["mutant_fp8_nan_payload"] == Set{"nan-encoding"});
  CHECK(classes_of["mutant_fp8_element_reciprocal"] == Set{"arithmetic-variant"});
  CHECK(output_of["mutant_fp8_element_reciprocal"].find("MISMATCH scaled-edges") != std::string::npos);
  CHECK(output_of["mutant_fp8_element_reciprocal"].find("MISMATCH special") == std::string::npos);
  // COAT's reciprocal: the generated edges and scaled-edges catch it, and the bf16 inputs (bf16 values'
  // short mantissas put x / s on a midpoint where x * (1 / s) is not), nothing else (the float32 random
  // inputs and golden cases pass it: without the 2-D battery verify could not see it)
  CHECK(classes_of["mutant_coat_act_reciprocal"] == Set{"arithmetic-variant"});
  CHECK(output_of["mutant_coat_act_reciprocal"].find("MISMATCH scaled-edges") != std::string::npos);
  CHECK(output_of["mutant_coat_act_reciprocal"].find("ok       golden") != std::string::npos);
  {
    std::istringstream lines(output_of["mutant_coat_act_reciprocal"]);
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with("MISMATCH golden") || line.starts_with("MISMATCH normal"))
        CHECK_MESSAGE((line.find(".bfloat16.") != std::string::npos || line.starts_with("MISMATCH normal.bf16.")), line);
  }
  // the bugs that only a hyperparameter shows: every run without it passes them
  CHECK(output_of["mutant_adagrad_decoupled_decay"].find("MISMATCH normal.n4096.seed1") == std::string::npos);
  CHECK(output_of["mutant_ademamix_alpha_late"].find("MISMATCH normal.n4096.seed1") == std::string::npos);
  CHECK(output_of["mutant_momentum_dampening"].find("MISMATCH normal.n4096.seed1.std0.5.step1") == std::string::npos);
  CHECK(classes_of["mutant_coat_act_max_keeps_nan"] == Set{"genuine", "scale-propagated"});
  CHECK(classes_of["mutant_coat_symm_absmax_ignores_nan"] == Set{"genuine", "scale-propagated"});
  // the differing scales are the variant; the codes and dequantized values of their blocks follow from them
  CHECK(classes_of["mutant_fp8_scale_reciprocal"] == Set{"arithmetic-variant", "scale-propagated"});
  // ties down: on torchao's own boundary test or the exact midpoint; where x * (1/s) falls below the
  // midpoint x / s lies on, the reciprocal reproduces the lower code as well, but no code off a tie
  // shows it: a tie alone (test_element_classes)
  CHECK(classes_of["mutant_codebook_ties_down"] == Set{"tie"});
  // near-boundary only within the policy's budget: every mutant's format has a budget of 0 ulps
  CHECK(shown_by("near-boundary").empty());
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

// ---- the CUDA memory kind ----------------------------------------------------------------------
// The CUDA per-block E4M3 kernel (device/kernels/cuda_perblock_plugin.cu) runs only on a GPU (device/gpu-checks.d/
// verify-cuda.sh; CTest verify_cuda_*). Here: its arithmetic against the reference's, through its host
// twin; and verify's CUDA path (runner, probe, reports) through a fake runner that runs on the host.

namespace {

std::string fake_cuda(const std::string& mode) {
  return "LOWBIT_FAKE_CUDA=" + mode + " LOWBIT_CUDA_RUNNER=" + plugin("fake_cuda_runner") + " " + std::string(LOWBIT_CLI);
}

}  // namespace

TEST_CASE("the CUDA kernel's written-out E4M3 cast and decode are the reference's (CUDA satfinite, CUDA NaN)") {
  // Every pattern of the top 16 bits (sign, exponent, the mantissa bits that decide E4M3's rounding)
  // with low bits that make ties, just-above and just-below: 393 216 inputs.
  std::uint64_t checked = 0, differ = 0;
  for (std::uint32_t high = 0; high <= 0xFFFFu; ++high)
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      const float x = float_from_bits((high << 16) | low);
      const std::uint8_t want = fp8::encode_nearest_even<fp8::E4M3FN>(x, fp8::cuda_satfinite());
      differ += perblock::encode_e4m3_satfinite(x) != want;
      ++checked;
    }
  CHECK(checked == 393216);
  CHECK(differ == 0);
  // hand-picked: 448 + half an ulp of E4M3 (464) saturates to 0x7E; -NaN loses its sign; -Inf -> -448;
  // 2^-10 (half the smallest subnormal) ties to even 0; 3 * 2^-10 ties up to 2 * 2^-9 (code 0x02)
  CHECK(perblock::encode_e4m3_satfinite(464.0f) == 0x7E);
  CHECK(perblock::encode_e4m3_satfinite(float_from_bits(0xFFC00000u)) == 0x7F);
  CHECK(perblock::encode_e4m3_satfinite(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(perblock::encode_e4m3_satfinite(0x1p-10f) == 0x00);
  CHECK(perblock::encode_e4m3_satfinite(0x3p-10f) == 0x02);
  for (unsigned c = 0; c < 256; ++c) {
    CAPTURE(c);
    CHECK(bits_of(perblock::decode_e4m3(static_cast<std::uint8_t>(c))) ==
          bits_of(fp8::decode<fp8::E4M3FN>(static_cast<std::uint8_t>(c))));
  }
  // the x86 NaNs of decode(code) * scale: a NaN code's own NaN, and 0 * Inf as SSE's 0xFFC00000
  CHECK(bits_of(perblock::dequant_of(0x7F, 2.0f)) == 0x7FC00000u);
  CHECK(bits_of(perblock::dequant_of(0x80, std::numeric_limits<float>::infinity())) == 0xFFC00000u);
}

TEST_CASE("verify: the CUDA per-block kernel's arithmetic (its host twin) is conformant; its reciprocal mutant is caught") {
  const Run good = lowbit_cli("verify --kernel " + plugin("cuda_perblock_host_twin"));
  CAPTURE(good.output);
  CHECK(good.code == 0);
  // edges, scaled-edges, special (2), three random, tiny-blocks, special-blocks, and at block sizes 1,
  // 33 and 4096 edges, special-blocks and a random input
  CHECK(lines_starting(good.output, "ok       ") == 18);
  TempDir dir("lowbit_verify_twin_");
  const Run bad = lowbit_cli("verify --kernel " + plugin("cuda_mutant_perblock_reciprocal_host_twin") + " --report " +
                             (dir / "r.json"));
  CAPTURE(bad.output);
  CHECK(bad.code == 1);
  CHECK(bad.output.find("MISMATCH edges") != std::string::npos);
  CHECK(bad.output.find("MISMATCH scaled-edges") != std::string::npos);
  // __frcp_rn then __fmul_rn: every differing code of the boundaries is the reciprocal variant, none a
  // tie (tiny-blocks' zeros times an infinite reciprocal are NaN: explained as genuine, issue 28 item 3)
  nlohmann::json j = nlohmann::json::parse(slurp(dir / "r.json"));
  nlohmann::json boundaries = nlohmann::json::array();
  for (const auto& kase : j.at("cases"))
    if (kase.at("label") == "edges" || kase.at("label") == "scaled-edges") boundaries.push_back(kase);
  j["cases"] = boundaries;
  CHECK(boundaries.size() == 2);
  const ReportClasses c = report_classes(j, "codes", "arithmetic-variant", false);
  CHECK(c.mismatches > 0);
  CHECK(c.of_class == c.mismatches);
  CHECK(c.variants == std::set<std::string>{"reciprocal"});
  CHECK(!c.seen.contains("tie"));
}

TEST_CASE("verify runs a CUDA-memory kernel through the CUDA runner: device and kernel times in both reports") {
  TempDir dir("lowbit_verify_cuda_");
  const Run r = run_shell(fake_cuda("ok") + " verify --kernel " + plugin("cuda_perblock_declared_twin") + " --report " +
                          (dir / "r.json") + " --markdown " + (dir / "r.md"));
  CAPTURE(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.starts_with("device: lowbit fake device (compute capability 9.0), driver 13.1, runtime 13.0\n"));
  CHECK(lines_starting(r.output, "ok       ") == 18);
  CHECK(r.output.find("mismatches (0 allowed), kernel 0.250 ms\n") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(slurp(dir / "r.json"));
  CHECK(j.at("device") == nlohmann::json({{"name", "lowbit fake device"}, {"compute_capability", "9.0"},
                                          {"driver_version", "13.1"}, {"runtime_version", "13.0"}}));
  REQUIRE(j.at("cases").size() == 18);
  for (const auto& c : j.at("cases")) CHECK(c.at("kernel_ms") == 0.25);
  const std::string md = slurp(dir / "r.md");
  CHECK(md.find("Device: `lowbit fake device` (compute capability 9.0), CUDA driver 13.1, runtime 13.0.") != std::string::npos);
  CHECK(md.find("| `edges` | 0.250 |") != std::string::npos);

  // the mutant declared as a CUDA kernel: caught the same way
  const Run bad = run_shell(fake_cuda("ok") + " verify --kernel " + plugin("cuda_mutant_perblock_reciprocal_declared_twin"));
  CAPTURE(bad.output);
  CHECK(bad.code == 1);
  CHECK(bad.output.find("MISMATCH scaled-edges") != std::string::npos);

  // host kernels' reports are as before: no device, no kernel time
  const Run host = lowbit_cli("verify --kernel " + plugin("cuda_perblock_host_twin") + " --input special --report " + (dir / "h.json"));
  CHECK(host.code == 0);
  CHECK(host.output.find("device:") == std::string::npos);
  const nlohmann::json h = nlohmann::json::parse(slurp(dir / "h.json"));
  CHECK(!h.contains("device"));
  CHECK(!h.at("cases").at(0).contains("kernel_ms"));
}

TEST_CASE("verify: a CUDA kernel with no device is refused before any case, one line, exit 2; a device fault fails its case") {
  TempDir dir("lowbit_verify_cuda_");
  const std::string lib = plugin("cuda_perblock_declared_twin");
  const Run none = run_shell(fake_cuda("no-device") + " verify --kernel " + lib + " --report " + (dir / "r.json"));
  CAPTURE(none.output);
  CHECK(none.code == 2);
  CHECK(none.output == "lowbit: error: kernel 'host-twin.fp8.perblock.e4m3' in '" + lib +
                           "' needs a CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected\n");
  CHECK(!std::filesystem::exists(dir / "r.json"));
  const Run missing = run_shell("LOWBIT_CUDA_RUNNER=/nonexistent/runner.so " + std::string(LOWBIT_CLI) + " verify --kernel " + lib);
  CAPTURE(missing.output);
  CHECK(missing.code == 2);
  CHECK(count_lines(missing.output) == 1);
  CHECK(missing.output.find("needs a CUDA device: cannot load the CUDA runner '/nonexistent/runner.so'") != std::string::npos);
  const Run fault = run_shell(fake_cuda("fault") + " verify --kernel " + lib + " --input special --no-golden");
  CAPTURE(fault.output);
  CHECK(fault.code == 1);
  CHECK(fault.output.find("FAILED   special: the kernel failed on the device: cudaDeviceSynchronize after the kernel: an "
                          "illegal memory access was encountered") != std::string::npos);
}

// ---- our block-wise CUDA kernels (device/kernels/): their header functions against the reference ----
// The host twin runs these very functions under verify (CTest verify_twin_*); here each one is held
// against the reference's own function on inputs that reach every branch, so that a default battery
// that misses a corner cannot hide it.

namespace {

// Every pattern of the top 16 bits with low bits that make ties, just-above and just-below: 393 216 floats.
template <class F>
void for_each_probe(F f) {
  for (std::uint32_t high = 0; high <= 0xFFFFu; ++high)
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) f(float_from_bits((high << 16) | low));
}

// The 255 step positions of bitsandbytes' table, as the kernels make them from a qmap.
std::vector<std::uint32_t> bnb_first_indices(const std::vector<float>& q) {
  std::vector<std::uint32_t> first(lowbit_kernels::bnb::kMidpoints);
  float p = -std::numeric_limits<float>::infinity();
  for (std::uint32_t c = 0; c < first.size(); ++c) {
    p = lowbit_kernels::bnb::prefix_step(p, lowbit_kernels::bnb::midpoint(q[c], q[c + 1]));
    first[c] = lowbit_kernels::bnb::first_index(p);
  }
  return first;
}

}  // namespace

TEST_CASE("our kernels' torchao search and E4M3 casts are the reference's on 393 216 inputs each") {
  for (const auto& q : {codebook::signed8(), codebook::unsigned8(), codebook::torchao_signed4(), codebook::torchao_unsigned4()}) {
    std::uint64_t differ = 0;
    for_each_probe([&](float y) {
      differ += lowbit_kernels::torchao::search(y, q.data(), static_cast<std::uint32_t>(q.size())) != codebook::torchao_search(y, q);
    });
    CAPTURE(q.size());
    CHECK(differ == 0);
  }
  // every overflow rule and NaN encoding the torchao.fp8 format's params name (E4M3FN has no Inf: "inf" is "nan")
  for (bool saturate : {true, false})
    for (bool keeps_sign : {true, false}) {
      const fp8::Policy policy{saturate ? fp8::Overflow::SatFinite : fp8::Overflow::NaN, keeps_sign ? fp8::kTorchNan : fp8::kCudaNan};
      std::uint64_t differ = 0;
      for_each_probe([&](float x) {
        differ += lowbit_kernels::torchao::encode_e4m3(x, {saturate, keeps_sign}) != fp8::encode_nearest_even<fp8::E4M3FN>(x, policy);
      });
      CAPTURE(saturate);
      CAPTURE(keeps_sign);
      CHECK(differ == 0);
    }
}

TEST_CASE("our kernels' dequantizations and x86 NaN rules are the reference's and the CPU's") {
  // torchao.fp8: every code under scales with NaN, Inf, zero and subnormal among them, both widenings,
  // in blocks of 1 (torch's same-shape loop: 460 elements leave a rest of 12), 20, 23 and 460
  // (broadcast loops with rests of 4, 7 and 12): every other code a NaN (0x7F, 0xFF), so that NaN codes
  // under a NaN scale sit in every lane, where torch's CPU loop returns the scale's NaN or the code's
  const float inf = std::numeric_limits<float>::infinity();
  const std::size_t n = 460;
  std::vector<std::uint8_t> codes(n);
  for (std::size_t i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>(i % 2 ? i * 97 % 256 : i % 4 ? 0xFF : 0x7F);
  for (std::size_t block : {std::size_t{1}, std::size_t{20}, std::size_t{23}, n})
    for (float s : {1.5f, 0.0f, inf, float_from_bits(0x7FA00001u), float_from_bits(0x00000003u), 3.0e38f})
      for (auto widening : {blockwise::NanWidening::Payload, blockwise::NanWidening::Quiet}) {
        const std::vector<float> scale(n / block, s);
        const std::vector<float> want = blockwise::torchao_fp8_dequantize(codes, scale, block, widening);
        const std::uint32_t nan_bits = widening == blockwise::NanWidening::Payload ? 0x7FF00000u : 0x7FC00000u;
        for (std::size_t i = 0; i < n; ++i) {
          CAPTURE(block);
          CAPTURE(i);
          CAPTURE(bits_of(s));
          CHECK(bits_of(lowbit_kernels::torchao::fp8_dequant(codes[i], s, nan_bits, i, block, n)) == bits_of(want[i]));
        }
      }
  // mul_x86 and div_x86 against this CPU's own SSE results (volatile: no constant folding)
  const float values[] = {0.0f, -0.0f, 1.0f, -2.5f, inf, -inf, float_from_bits(0x7FC00000u), float_from_bits(0xFFA00001u),
                          float_from_bits(0x7F800001u), float_from_bits(0x00000001u), 3.0e38f};
  for (float a : values)
    for (float b : values) {
      volatile float va = a, vb = b;
      const float product = va * vb, quotient = va / vb;
      CAPTURE(bits_of(a));
      CAPTURE(bits_of(b));
      // which NaN a product of two NaNs keeps is the compiler's operand order; the kernels never meet it
      if (!(std::isnan(a) && std::isnan(b))) CHECK(bits_of(lowbit_kernels::mul_x86(a, b)) == bits_of(product));
      CHECK(bits_of(lowbit_kernels::div_x86(a, b)) == bits_of(quotient));
    }
}

TEST_CASE("our kernels' bitsandbytes table (step positions) is the reference's lookup table on all 65 536 indices") {
  std::vector<float> shuffled = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true);
  std::reverse(shuffled.begin() + 100, shuffled.begin() + 140);  // unsorted: the scan's prefix maximum matters
  std::vector<float> with_nan = codebook::bnb_linear_map(true);
  with_nan[60] = std::numeric_limits<float>::quiet_NaN();
  with_nan[200] = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> maps = {codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true),
                                                codebook::dynamic_map(false, 7, 8, codebook::Linspace::Fma, true),
                                                codebook::bnb_linear_map(true), codebook::bnb_linear_map(false), shuffled, with_nan};
  for (std::size_t m = 0; m < maps.size(); ++m) {
    const codebook::BnbCpuLut lut(maps[m]);
    const std::vector<std::uint32_t> first = bnb_first_indices(maps[m]);
    std::uint64_t differ = 0, reached = 0;
    for (std::uint32_t i = 0; i < 65536; ++i) {
      // a y whose table index is i (the reference's own index_of says so), to read the reference's table[i]
      float y = static_cast<float>(-1.0 + 2.0 * i / 65535.0);
      while (codebook::BnbCpuLut::index_of(y) < i) y = std::nextafter(y, 2.0f);
      while (codebook::BnbCpuLut::index_of(y) > i) y = std::nextafter(y, -2.0f);
      if (codebook::BnbCpuLut::index_of(y) != i) continue;
      ++reached;
      differ += lowbit_kernels::bnb::code_of_index(i, first.data()) != lut(y);
    }
    CAPTURE(m);
    CHECK(reached == 65536);
    CHECK(differ == 0);
  }
  std::uint64_t differ = 0;
  for_each_probe([&](float y) { differ += lowbit_kernels::bnb::index_of(y) != codebook::BnbCpuLut::index_of(y); });
  CHECK(differ == 0);
}

// ---- honest classes and --strict ---------------------------------------------------------------

TEST_CASE("--strict: a mismatch the policy allows fails conform, verify and compare; the reports say strict") {
  TempDir dir("lowbit_strict_");
  // torchao's golden Adam steps differ from the reference only where torch's CPU sqrt rounded
  // differently, which the format's policy allows as library-rounding
  const Run plain = lowbit_cli("conform --format torchao.adam.codebook8 --report " + (dir / "c.json"));
  CAPTURE(plain.output);
  CHECK(plain.code == 0);
  CHECK(plain.output.find("library-rounding: ") != std::string::npos);
  const nlohmann::json c = nlohmann::json::parse(slurp(dir / "c.json"));
  CHECK(c.at("strict") == false);
  const auto& lr = c.at("by_format").at("torchao.adam.codebook8").at("library_rounding");
  CHECK(lr.at("count").get<std::uint64_t>() > 0);
  CHECK(lr.at("count") == c.at("by_format").at("torchao.adam.codebook8").at("mismatches"));
  CHECK(lr.at("rate") == 1.0);
  CHECK(lr.at("allowed") == true);
  const Run strict = lowbit_cli("conform --format torchao.adam.codebook8 --strict --report " + (dir / "s.json"));
  CAPTURE(strict.output);
  CHECK(strict.code == 1);
  const nlohmann::json s = nlohmann::json::parse(slurp(dir / "s.json"));
  CHECK(s.at("strict") == true);
  CHECK(s.at("by_format").at("torchao.adam.codebook8").at("allowed") == 0);
  CHECK(s.at("by_format").at("torchao.adam.codebook8").at("library_rounding").at("allowed") == false);

  // verify: the reference as the kernel; its generated step is bit-exact, the golden steps are not
  const Run v = lowbit_cli("verify --kernel " + plugin("reference_plugin") +
                           ":reference.torchao.adam.codebook8 --input normal:n=4096,seed=1 --steps 1 --strict --report " +
                           (dir / "v.json") + " --save-cases " + (dir / "cases"));
  CAPTURE(v.output);
  CHECK(v.code == 1);
  CHECK(v.output.find("ok       normal.n4096.seed1.step1:") != std::string::npos);
  CHECK(v.output.find("policy torch-cpu-eager (strict)") != std::string::npos);
  const nlohmann::json vj = nlohmann::json::parse(slurp(dir / "v.json"));
  CHECK(vj.at("strict") == true);
  CHECK(vj.at("library_rounding").at("count").get<std::uint64_t>() > 0);
  CHECK(vj.at("library_rounding").at("allowed") == false);
  // compare: a saved golden step passes without --strict and fails with it
  std::string stem;
  for (const auto& e : std::filesystem::directory_iterator(dir / "cases"))
    if (e.path().string().ends_with(".expected.safetensors"))
      stem = e.path().string().substr(0, e.path().string().size() - std::string(".expected.safetensors").size());
  REQUIRE(!stem.empty());
  const std::string pair = stem + ".expected.safetensors " + stem + ".actual.safetensors";
  const Run allowed = lowbit_cli("compare " + pair);
  CAPTURE(allowed.output);
  CHECK(allowed.code == 0);
  CHECK(allowed.output.find(", allowed by the policy") != std::string::npos);
  const Run failed = lowbit_cli("compare " + pair + " --strict --report " + (dir / "p.json"));
  CAPTURE(failed.output);
  CHECK(failed.code == 1);
  const nlohmann::json p = nlohmann::json::parse(slurp(dir / "p.json"));
  CHECK(p.at("strict") == true);
  for (const auto& t : p.at("tensors")) {
    CHECK(t.at("allowed") == 0);
    if (t.at("name") == "param.next") CHECK(t.at("classes").at("library-rounding") == t.at("mismatches"));
  }
}

namespace {

// The reference's case of a format on an input spec (its first case).
Case reference_case(const std::string& format, const std::string& spec) {
  return run_reference(*find_format(format), generated_input(format, spec));
}

const TensorComparison& compared(const ComparisonReport& r, const std::string& name) {
  for (const TensorComparison& t : r.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

}  // namespace

TEST_CASE("near-boundary only within the policy's ulp budget; beyond it genuine, with the distance kept") {
  const Case expected = reference_case("torchao.codebook8.signed", "normal:n=4096,seed=1");
  Case actual = expected;
  std::vector<std::uint8_t> codes = actual.require("codes").u8();
  for (auto& c : codes) c = c == 255 ? 254 : static_cast<std::uint8_t>(c + 1);  // every code its neighbour
  actual.add(Tensor::from_bytes("codes", DType::U8, actual.require("codes").shape, codes));
  std::uint64_t near_at_huge_budget = 0;
  for (double budget : {0.0, 1e5, 1e300}) {
    CAPTURE(budget);
    TolerancePolicy p;
    p.boundary_ulps = budget;
    const ComparisonReport r = compare_cases(expected, actual, p, SIZE_MAX);
    const TensorComparison& t = compared(r, "codes");
    REQUIRE(t.first_mismatches.size() == 4096);
    std::uint64_t near = 0, beyond = 0;
    for (const MismatchRecord& m : t.first_mismatches) {
      REQUIRE(m.why.input);  // the entry shows what the quantizer saw
      REQUIRE(m.why.scale);
      CHECK(bits_of(static_cast<float>(*m.why.input)) == bits_of(expected.require("input").f32()[m.index]));
      CHECK(bits_of(static_cast<float>(*m.why.scale)) == bits_of(expected.require("scale").f32()[m.index / 256]));
      if (m.why.cls == MismatchClass::NearBoundary) {
        ++near;
        CHECK(m.why.boundary_ulps <= budget);
        CHECK(m.allowed);
      } else if (m.why.cls == MismatchClass::Genuine) {
        REQUIRE(m.why.boundary);  // neighbouring codes: the boundary and the distance stay in the entry
        CHECK(m.why.boundary_ulps > budget);
        ++beyond;
      }
    }
    if (budget == 0.0) CHECK(near == 0);
    if (budget == 1e300) near_at_huge_budget = near;
    CHECK(near + beyond + t.by_class[static_cast<std::size_t>(MismatchClass::Tie)] +
              t.by_class[static_cast<std::size_t>(MismatchClass::ArithmeticVariant)] ==
          4096);
  }
  CHECK(near_at_huge_budget > 4000);  // a code moved by one is near its boundary, at some distance
}

TEST_CASE("flushed-subnormal: a subnormal input taken as zero; a zero for a normal input is genuine") {
  // fp8.perblock.e4m3, two blocks of 128: the first of float32 subnormals, which the block's scale
  // (amax / 448) makes ordinary E4M3 codes and a kernel that flushes its inputs (DAZ) writes as zero;
  // the second of normal inputs, where a zero code is no flush
  std::vector<float> x(256);
  for (std::size_t i = 0; i < 128; ++i) x[i] = static_cast<float>(i + 1) * 1e-41f;
  for (std::size_t i = 128; i < 256; ++i) x[i] = 0.25f + static_cast<float>(i) * 1e-3f;
  REQUIRE(std::fpclassify(x[127]) == FP_SUBNORMAL);
  Case in;
  in.metadata["format"] = "fp8.perblock.e4m3";
  in.add(Tensor::from_f32("input", {256}, x));
  const Case expected = run_reference(*find_format("fp8.perblock.e4m3"), in);
  Case actual = expected;
  std::vector<std::uint8_t> codes = actual.require("codes").u8();
  REQUIRE(codes[100] != 0);
  REQUIRE(codes[200] != 0);
  codes[100] = 0;  // a subnormal input flushed
  codes[200] = 0;  // a normal input written as zero: another bug
  actual.add(Tensor::from_bytes("codes", DType::F8_E4M3, {256}, codes));
  const ComparisonReport r = compare_cases(expected, actual, TolerancePolicy{});
  const TensorComparison& t = compared(r, "codes");
  REQUIRE(t.first_mismatches.size() == 2);
  CHECK(t.first_mismatches[0].why.cls == MismatchClass::FlushedSubnormal);
  CHECK(t.first_mismatches[1].why.cls == MismatchClass::Genuine);
  CHECK_FALSE(r.conformant);
  // a subnormal expected value written as zero, in a float tensor of its own: flushed too
  Case e2, a2;
  e2.add(Tensor::from_f32("values", {2}, std::vector<float>{1e-40f, 1.0f}));
  a2.add(Tensor::from_f32("values", {2}, std::vector<float>{-0.0f, 0.0f}));
  const ComparisonReport r2 = compare_cases(e2, a2, TolerancePolicy{});
  REQUIRE(r2.tensors.at(0).first_mismatches.size() == 2);
  CHECK(r2.tensors.at(0).first_mismatches[0].why.cls == MismatchClass::FlushedSubnormal);
  CHECK(r2.tensors.at(0).first_mismatches[1].why.cls == MismatchClass::Genuine);
  // NaN against NaN with another payload: an encoding, not a number
  Case e3, a3;
  e3.add(Tensor::from_f32("values", {2}, std::vector<float>{float_from_bits(0x7FC00000u), float_from_bits(0x7FC00000u)}));
  a3.add(Tensor::from_f32("values", {2}, std::vector<float>{float_from_bits(0xFFC00001u), 0.0f}));
  const ComparisonReport r3 = compare_cases(e3, a3, TolerancePolicy{});
  REQUIRE(r3.tensors.at(0).first_mismatches.size() == 2);
  CHECK(r3.tensors.at(0).first_mismatches[0].why.cls == MismatchClass::NanEncoding);
  CHECK(r3.tensors.at(0).first_mismatches[1].why.cls == MismatchClass::Genuine);
}

TEST_CASE("our COAT kernels' host twin is the reference on groups built for the trees' quirks, two steps") {
  // The default battery's moments never put a zero, a NaN or an Inf at chosen lanes, and the
  // expansion's minimum depends on where they are (docs/formats/coat-optimizer.md "Zeros hide
  // subtrees"). From the fresh state (m0 = v0 = 0) a zero gradient makes both new moments exactly 0,
  // a NaN or Inf gradient makes them NaN or Inf: so the gradient places them. Step 2 runs the same
  // gradients on the reference's state. Groups: zeros at lane 0, at lane 1, at lanes 5/13/29, at the
  // first lanes of warps 1 and 3; one value at lane 0 (R = 1), one at lane 5; all zeros; NaNs; an
  // Inf; all NaN; magnitudes above the 1e9 cap; one value everywhere; and a partial group of 50.
  const std::vector<std::vector<int>> zero_lanes = {{0}, {1}, {5, 13, 29}, {32, 96}};
  const std::size_t groups = 12, n = 128 * groups + 50;
  std::vector<float> grad(n), param(n);
  std::uint32_t h = 12345;
  auto next = [&] {  // deterministic values of magnitude 2^-20 .. 2^3, either sign
    h = h * 1664525u + 1013904223u;
    return float_from_bits((h & 0x80000000u) | ((107u + (h >> 8) % 24u) << 23) | (h & 0x7FFFFFu));
  };
  for (std::size_t i = 0; i < n; ++i) grad[i] = next(), param[i] = next();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto group = [&](std::size_t g) { return std::span<float>(grad).subspan(128 * g, 128); };
  for (std::size_t g = 0; g < zero_lanes.size(); ++g)
    for (int lane : zero_lanes[g]) group(g)[lane] = 0.0f;
  for (std::size_t g : {4u, 5u, 6u}) std::fill(group(g).begin(), group(g).end(), 0.0f);
  group(4)[0] = 1e-2f;  // m = (1 - beta1) g, about 1e-3
  group(5)[5] = 1e-2f;
  group(7)[3] = nan, group(7)[40] = nan;
  group(8)[70] = inf;
  std::fill(group(9).begin(), group(9).end(), nan);
  for (float& x : group(10)) x = x * 4e10f;
  std::fill(group(11).begin(), group(11).end(), 3.0f);
  for (const char* name : {"coat.optim.origin.e4m3", "coat.optim.expand.e4m3"}) {
    CAPTURE(name);
    const FormatSpec* f = find_format(name);
    REQUIRE(f != nullptr);
    const nlohmann::json params = f->default_params;
    Case state = f->fresh_state(param, params);
    state.add(Tensor::from_f32("grad", {static_cast<std::int64_t>(n)}, grad));
    for (int step = 1; step <= 2; ++step) {
      CAPTURE(step);
      const std::vector<Tensor> expected = f->run(state, params, 1);
      std::vector<const Tensor*> inputs, like;
      for (const auto& in : f->inputs) inputs.push_back(&state.require(in.name));
      for (const Tensor& t : expected) like.push_back(&t);
      const KernelRun r = run_plugin_kernel(plugin("coat_host_twin"), std::string("host-twin.") + name, inputs, params.dump(),
                                            like, 30);
      CAPTURE(r.failure);
      REQUIRE(r.completed);
      for (const Tensor& t : expected) {
        CAPTURE(t.name);
        CHECK(r.outputs.require(t.name).bytes == t.bytes);
      }
      if (std::string(name) == "coat.optim.expand.e4m3" && step == 1) {
        // the groups are what the comment says: one value at lane 0 gives R = 1 and k = +inf, the
        // same value (m about 1e-3) at lane 5 a zero minimum, R about 1e27 and k = floor(16 log2(100352) /
        // log2(1e27)) / 16 = 2 / 16 (coat-optimizer.md "Lane 0 decides")
        const auto at = std::find_if(expected.begin(), expected.end(), [](const Tensor& t) { return t.name == "exp_avg.expand.next"; });
        REQUIRE(at != expected.end());
        const std::vector<float> k = at->f32();
        CHECK(std::isinf(k[4]));
        CHECK(k[5] == 0.125f);
      }
      // the next step from the reference's state
      for (const Tensor& t : expected) {
        Tensor moved = t;
        moved.name = t.name == "param.next" ? "param" : t.name.substr(0, t.name.size() - 5);
        state.add(std::move(moved));
      }
      state.add(Tensor::from_i64("step", {}, std::vector<std::int64_t>{step + 1}));
    }
  }
}
