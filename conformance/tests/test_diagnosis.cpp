// The diagnosis of a failing kernel (conformance/engine/diagnosis/): lowbit verify names, for each
// mutant of the bank, the variant of the format's arithmetic its bug is, as declared in
// conformance/mutants/diagnoses.json (or none, for a bug that is no variant), and a conformant kernel
// gets no diagnosis. The mutants are wrong kernels written apart from the variants (their own code in
// conformance/mutants/ and device/kernels/), so that a variant that does not reproduce a bug bit for bit
// fails here. Every mutant in LOWBIT_MUTANTS must have its entry.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_run.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/diagnosis.hpp"
#include "lowbit/formats.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::string plugin(const std::string& name) { return std::string(LOWBIT_PLUGIN_DIR) + "/" + name + ".so"; }

nlohmann::json declared() { return nlohmann::json::parse(slurp(LOWBIT_DIAGNOSES))["mutants"]; }

bool contains(const nlohmann::json& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("every mutant of the bank declares the variant its diagnosis must name") {
  const nlohmann::json d = declared();
  std::istringstream mutants(LOWBIT_MUTANT_LIST);  // LOWBIT_MUTANTS of conformance/CMakeLists.txt
  std::size_t n = 0;
  for (std::string m; std::getline(mutants, m, ',');) {
    CAPTURE(m);
    ++n;
    CHECK_MESSAGE(d.contains("mutant_" + m), std::string("add mutant_" + m + " to conformance/mutants/diagnoses.json"));
  }
  CHECK(n >= 28);
  // every declared variant is one the engine knows for some format (a name typed wrong fails here)
  std::set<std::string> known;
  for (const FormatSpec& f : registered_formats())
    for (const KnownVariant& v : known_variants(f)) known.insert(v.name);
  for (const auto& [name, entry] : d.items())
    if (!entry.at("variant").is_null()) CHECK_MESSAGE(known.contains(entry.at("variant").get<std::string>()), name);
}

TEST_CASE("verify's diagnosis names each mutant's variant, none for a bug that is no variant, nothing for a conformant kernel") {
  const nlohmann::json d = declared();
  std::map<std::string, std::size_t> named;  // variant -> mutants diagnosed with it
  for (const auto& [name, entry] : d.items()) {
    CAPTURE(name);
    TempDir dir("lowbit_diagnosis_");
    const std::string kernel = plugin(name) + (entry.contains("kernel") ? ":" + entry.at("kernel").get<std::string>() : "");
    const Run r = lowbit_cli("verify --kernel " + kernel + " --report " + (dir / "r.json"));
    CAPTURE(r.output);
    REQUIRE(r.code == 1);
    const nlohmann::json j = nlohmann::json::parse(slurp(dir / "r.json"));
    REQUIRE(j.contains("diagnosis"));
    const nlohmann::json& diag = j.at("diagnosis");
    CHECK(diag.at("cases").get<std::size_t>() > 0);
    CHECK(diag.at("variants_tried").get<std::size_t>() == known_variants(*find_format(j.at("format").get<std::string>())).size());
    // the verdict line carries the diagnosis, and so does the Markdown
    CHECK(r.output.find("NOT conformant; ") != std::string::npos);
    CHECK(r.output.find(diag.at("line").get<std::string>()) != std::string::npos);
    CHECK(slurp(dir / "r.md").find("diagnosis: ") != std::string::npos);
    if (entry.at("variant").is_null()) {
      CHECK(diag.at("reproducing").empty());
      CHECK(!diag.contains("reproducing_but_nan"));
      CHECK(diag.at("line").get<std::string>().starts_with("diagnosis: no known variant of "));
      continue;
    }
    const std::string variant = entry.at("variant").get<std::string>();
    if (entry.value("nan_aside", false)) {
      CHECK(diag.at("reproducing").empty());
      REQUIRE(diag.contains("reproducing_but_nan"));
      CHECK(contains(diag.at("reproducing_but_nan").at("variants"), variant));
      CHECK(diag.at("reproducing_but_nan").at("nan_elements").get<std::uint64_t>() > 0);
    } else {
      CHECK(contains(diag.at("reproducing"), variant));
      CHECK(diag.at("line").get<std::string>().find(" of " + std::to_string(diag.at("mismatches").get<std::uint64_t>()) +
                                                    " mismatches") != std::string::npos);
    }
    // a kernel that repeats another's bug (a host twin built with a mutant's bug) names the same variant
    if (entry.contains("same_bug_as")) CHECK(d.at(entry.at("same_bug_as").get<std::string>()).at("variant") == variant);
    else ++named[variant];
  }
  // each variant named explains only its own bug: no variant reproduces two different mutants (the
  // reciprocals of torchao.fp8's element arithmetic, the CUDA per-block kernel's, torchao's codebook
  // and COAT's group quantizer are one variant on four formats)
  for (const auto& [variant, count] : named) CHECK_MESSAGE(count <= (variant == "reciprocal" ? 4u : 1u), variant);

  // a conformant kernel: no diagnosis in the report or the verdict line
  TempDir dir("lowbit_diagnosis_");
  const Run ok = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference.fp8.e4m3fn.satfinite --report " + (dir / "r.json"));
  CAPTURE(ok.output);
  CHECK(ok.code == 0);
  CHECK(ok.output.find("diagnosis") == std::string::npos);
  CHECK(!nlohmann::json::parse(slurp(dir / "r.json")).contains("diagnosis"));

  // the reference under --strict fails the golden steps where torch's sqrt rounded otherwise: it is
  // the reference itself that reproduces its outputs, and no variant is named
  const Run strict = lowbit_cli("verify --kernel " + plugin("reference_plugin") + ":reference.torchao.adam.fp8 --strict --report " +
                                (dir / "s.json"));
  CAPTURE(strict.output);
  CHECK(strict.code == 1);
  const nlohmann::json s = nlohmann::json::parse(slurp(dir / "s.json")).at("diagnosis");
  CHECK(s.at("reference") == true);
  CHECK(s.at("reproducing").empty());
  CHECK(strict.output.find("diagnosis: behaves as the reference itself") != std::string::npos);
}

TEST_CASE("each variant of bitsandbytes' blocks differs from the reference, its CPU library, on the input that shows its bug") {
  // On the default battery the reference is bitsandbytes' own CPU library bit for bit (test_bnb_cpu_verify):
  // a variant that gave the reference's outputs on the input where its bug shows would name a correct
  // kernel's arithmetic, and reproduce a wrong kernel only by chance.
  struct Shows {
    const char* variant;
    const char* spec;
    nlohmann::json params;
    const char* format = "bnb.blockwise8.dynamic";
  };
  const nlohmann::json unsigned_map = {{"map", "dynamic_unsigned"}};
  for (const Shows& s : std::vector<Shows>{{"absmax-subnormal-zero", "tiny-blocks", {}},
                                           {"flush-subnormal-inputs", "tiny-blocks", {}},
                                           {"flush-subnormal-dequant", "tiny-blocks", {}},
                                           {"absmax-from-first-element", "special-blocks", {}},
                                           {"tail-absmax-short", "special-blocks", {}},
                                           {"block-size-4096", "normal:n=4096,seed=5", {{"block_size", 64}}},
                                           {"dequant-nan-positive", "special-blocks", unsigned_map},
                                           {"table-grid-double", "table-edges", unsigned_map},
                                           {"table-code0-minus-one", "edges", {{"map", "linear_unsigned"}},
                                            "bnb.blockwise8.linear"},
                                           {"threads-split-mid-block", "normal:n=1049576,seed=7", {}}}) {
    const std::string name = s.variant;
    CAPTURE(name);
    const FormatSpec& f = *find_format(s.format);
    const std::vector<KnownVariant> variants = known_variants(f);
    const auto v = std::find_if(variants.begin(), variants.end(), [&](const KnownVariant& k) { return k.name == name; });
    REQUIRE(v != variants.end());
    std::size_t cases = 0, differing = 0;
    for_each_reference_case(
        f, {s.spec, resolve_params(f, s.params.is_null() ? nlohmann::json::object() : s.params)}, 1,
        {"lowbit test", "test_diagnosis"}, false,
        [&](const std::string&, const Case& c) {
          ++cases;
          const std::optional<Case> made = v->run(c, resolve_params(f, c.params()));
          REQUIRE(made.has_value());
          for (const TensorSpec& t : f.outputs) differing += made->require(t.name).bytes != c.require(t.name).bytes;
        },
        [](const std::string&, const std::string&) {});
    CHECK(cases == 1);
    CHECK(differing > 0);
  }
}
