// lowbit golden generate | check: make case files with the reference for any registered format
// (how a maintainer makes golden files for their own tests), and verify a golden folder.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>

#include "command.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/sha256.hpp"
#include "shipped_data.hpp"
#include "subcommand.hpp"

namespace lowbit::cli {

namespace {

struct GenerateOptions {
  std::string format;
  std::vector<std::string> params;  // K=V, V parsed as JSON when it parses, else taken as a string
  std::vector<std::string> inputs;
  std::string out;
  int steps = 1;  // optimizer formats: consecutive steps, one case each
};

nlohmann::json parse_params(const std::vector<std::string>& items) {
  nlohmann::json p = nlohmann::json::object();
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--param '" + item + "' is not KEY=VALUE");
    const std::string value = item.substr(eq + 1);
    nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
    p[item.substr(0, eq)] = v.is_discarded() ? nlohmann::json(value) : v;
  }
  return p;
}

std::string sanitized(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return name;
}

// "normal:n=4096,seed=3" -> "normal.n4096.seed3": readable and stable.
std::string case_file_name(const InputSpec& spec) {
  std::string name = spec.kind;
  for (const auto& [k, v] : spec.args) name += "." + k + v;
  return sanitized(name) + ".safetensors";
}

// A case without generated inputs (a table) is named after its parameters: "map-signed8.linspace-fma".
std::string params_file_name(const nlohmann::json& params) {
  std::string name;
  for (const auto& [k, v] : params.items()) name += (name.empty() ? "" : ".") + k + "-" + (v.is_string() ? v.get<std::string>() : v.dump());
  return sanitized(name.empty() ? "case" : name) + ".safetensors";
}

int list_formats() {
  for (const FormatSpec& f : registered_formats()) {
    fmt::print("{}\n  {}\n  reproduces: {}\n  params: {}; default tolerance: {}\n", f.name, f.description, f.provenance,
               f.default_params.dump(), f.default_tolerance);
  }
  return kConformant;
}

// The same spec with another seed: the parameter draws seed, step k's gradient seed + k.
InputSpec reseeded(const InputSpec& s, std::uint64_t seed) {
  InputSpec r = s;
  r.args["seed"] = std::to_string(seed);
  return r;
}

// The case after a step as the next step's state: each "X.next" output becomes X; a format without
// "step.next" (bitsandbytes: step is the update's own number) counts its int64 step up.
Case advanced(const Case& done) {
  Case next;
  for (const Tensor& t : done.tensors)
    if (!t.name.ends_with(".next") && !done.find(t.name + ".next")) next.add(t);
  for (const Tensor& t : done.tensors) {
    if (!t.name.ends_with(".next")) continue;
    Tensor renamed = t;
    renamed.name = t.name.substr(0, t.name.size() - 5);
    next.add(std::move(renamed));
  }
  if (!done.find("step.next")) {
    std::vector<std::int64_t> step = done.require("step").i64();
    step[0] += 1;
    next.add(Tensor::from_i64("step", done.require("step").shape, step));
  }
  return next;
}

// Optimizer formats: the parameter from the input spec, a fresh state, then `steps` steps with a
// new gradient each (the input spec reseeded), one case per step named <spec>.step<k>.
template <typename WriteOne>
void run_steps(const FormatSpec& spec, const nlohmann::json& params, const InputSpec& s, int steps, WriteOne& write_one) {
  Case state;
  try {
    state = spec.fresh_state(generate_inputs(s, spec, params), params);
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  std::string base = case_file_name(s);
  base = base.substr(0, base.size() - std::string(".safetensors").size());
  for (int k = 1; k <= steps; ++k) {
    const InputSpec grad_spec = reseeded(s, s.seed() + static_cast<std::uint64_t>(k));
    const std::vector<float> grad = generate_inputs(grad_spec, spec, params);
    state.add(Tensor::from_f32("grad", state.require("param").shape, grad));
    const std::string name = base + ".step" + std::to_string(k) + ".safetensors";
    const std::string described = s.text + " (param; step " + std::to_string(k) + "'s gradient: the same spec with seed " +
                                  std::to_string(grad_spec.seed()) + ")";
    state = advanced(write_one(state, name, described, s.seed()));
  }
}

int run_generate(const GenerateOptions& o) {
  if (o.format == "list") return list_formats();
  const FormatSpec* spec = find_format(o.format);
  if (!spec) {
    std::string names;
    for (const FormatSpec& f : registered_formats()) names += " " + f.name;
    throw UsageError("unknown format '" + o.format + "'; registered:" + names);
  }
  nlohmann::json params;
  try {
    params = resolve_params(*spec, parse_params(o.params));
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  std::vector<InputSpec> specs;
  for (const std::string& text : o.inputs) {
    try {
      specs.push_back(parse_input_spec(text));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  if (o.out.empty()) throw UsageError("--out is required");
  const bool optimizer = static_cast<bool>(spec->fresh_state);
  const bool takes_input = optimizer || std::find(spec->inputs.begin(), spec->inputs.end(), "input") != spec->inputs.end();
  if (takes_input && specs.empty()) throw UsageError("format " + spec->name + " needs at least one --input");
  if (!takes_input && !specs.empty()) throw UsageError("format " + spec->name + " takes no input; omit --input");
  if (o.steps < 1) throw UsageError("--steps must be at least 1");
  if (o.steps > 1 && !optimizer) throw UsageError("--steps applies to optimizer formats only");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(o.out) / spec->name, ec);
  if (ec) throw UsageError("cannot create '" + o.out + "/" + spec->name + "': " + ec.message());

  Manifest manifest = read_manifest(o.out);
  auto write_one = [&](Case in, const std::string& file_name, const std::string& input_text, std::uint64_t seed) {
    if (spec->auxiliary_inputs)
      for (Tensor& t : spec->auxiliary_inputs(params)) in.add(std::move(t));
    in.metadata = {{"format", spec->name},
                   {"params", params.dump()},
                   {"source", std::string("lowbit ") + version()},
                   {"function", spec->provenance},
                   {"seed", std::to_string(seed)},
                   {"input", input_text},
                   {"generator", std::string("lowbit golden generate ") + version()}};
    const Case c = run_reference(*spec, in);
    const std::string relative = spec->name + "/" + file_name;
    write_case((std::filesystem::path(o.out) / relative).string(), c);
    upsert(manifest, describe_case_file(o.out, relative));
    fmt::print("wrote {}/{}\n", o.out, relative);
    return c;
  };
  if (!takes_input) write_one(Case{}, params_file_name(params), "none", 0);
  if (optimizer) {
    for (const InputSpec& s : specs) run_steps(*spec, params, s, o.steps, write_one);
    write_manifest(o.out, manifest);
    fmt::print("manifest {}/MANIFEST.json lists {} files\n", o.out, manifest.files.size());
    return kConformant;
  }
  for (const InputSpec& s : specs) {
    const std::vector<float> values = generate_inputs(s, *spec, params);
    Case in;
    in.add(Tensor::from_f32("input", {static_cast<std::int64_t>(values.size())}, values));
    write_one(std::move(in), case_file_name(s), s.text, s.seed());
  }
  write_manifest(o.out, manifest);
  fmt::print("manifest {}/MANIFEST.json lists {} files\n", o.out, manifest.files.size());
  return kConformant;
}

int run_check(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) throw UsageError("'" + dir + "' is not a folder");
  const Manifest m = read_manifest(dir);
  int bad = 0;
  for (const ManifestEntry& e : m.files) {
    try {
      read_verified_case(dir, e);
      fmt::print("ok       {}\n", e.path);
    } catch (const CaseError& err) {
      fmt::print("REFUSED  {}\n", err.what());
      ++bad;
    }
  }
  // Files present but not listed: not an error, but a maintainer should know.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    const std::string relative = std::filesystem::relative(entry.path(), dir).generic_string();
    bool listed = false;
    for (const ManifestEntry& e : m.files) listed = listed || e.path == relative;
    if (!listed) fmt::print("unlisted {} (not in MANIFEST.json; not checked)\n", relative);
  }
  fmt::print("{} files listed, {} verified, {} refused\n", m.files.size(), m.files.size() - bad, bad);
  return bad ? kBadInput : kConformant;
}

}  // namespace

Subcommand add_golden_command(CLI::App& parent) {
  CLI::App* golden = parent.add_subcommand("golden", "Make and verify golden case files");
  golden->require_subcommand(1);

  CLI::App* gen = golden->add_subcommand(
      "generate",
      "Write case files produced by the reference for a registered format, one per --input, into\n"
      "OUT/<format>/, and add them to OUT/MANIFEST.json (sha256, size, provenance).");
  auto g = std::make_shared<GenerateOptions>();
  gen->add_option("--format", g->format, "Registered format name, e.g. fp8.e4m3fn.satfinite; 'list' lists them all")
      ->required();
  gen->add_option("--param", g->params, "Format parameter KEY=VALUE (repeatable), e.g. nan_encoding=ml_dtypes");
  gen->add_option("--input", g->inputs,
                  "Input spec KIND[:key=value,...] (repeatable). Kinds: normal(mean,std) uniform(lo,hi)\n"
                  "lognormal(mu,sigma) student-t(nu) constant(value) outliers(std,scale,block) special edges;\n"
                  "all take n (default 4096) and seed (default 1). Formats without an input (tables) take none");
  gen->add_option("--out", g->out, "Output folder (required unless --format list)");
  gen->add_option("--steps", g->steps,
                  "Optimizer formats: the --input spec draws the parameter; from a fresh state, run this many\n"
                  "steps, each with a gradient drawn by the same spec with seed + step, one case per step")
      ->capture_default_str();

  CLI::App* check = golden->add_subcommand("check", "Verify every file listed in a golden MANIFEST.json (size and sha256)");
  auto dir = std::make_shared<std::string>(shipped_golden_dir().string());
  check->add_option("--golden", *dir, "Folder holding MANIFEST.json")->capture_default_str();

  return {golden, [g, dir, gen, check]() -> int {
            if (gen->parsed()) return run_generate(*g);
            return run_check(*dir);
          }};
}

}  // namespace lowbit::cli
