// lowbit golden generate | check: make case files with the reference for any registered format
// (how a maintainer makes golden files for their own tests), or with a kernel under review whose
// outputs a sample checks against the reference first (--kernel), and verify a golden folder.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <new>
#include <optional>
#include <string_view>

#include "command.hpp"
#include "number_option.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/case_maker.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/generators.hpp"
#include "lowbit/kernel_cases.hpp"
#include "lowbit/manifest.hpp"
#include "lowbit/printable.hpp"
#include "lowbit/sha256.hpp"
#include "kernel_option.hpp"
#include "param_option.hpp"
#include "shipped_data.hpp"
#include "subcommand.hpp"
#include "threads_option.hpp"

namespace lowbit::cli {

namespace {

struct GenerateOptions {
  std::string format;
  std::vector<std::string> params;  // K=V, V parsed as JSON when it parses, else taken as a string
  std::vector<std::string> inputs;
  std::string out;
  int steps = 1;         // optimizer formats: consecutive steps, one case each
  bool replace = false;  // overwrite an existing case of the same name that differs
  std::string kernel;    // LIB[:NAME]: the outputs come from this kernel (kernel_cases.hpp)
  std::uint64_t check_elements = std::uint64_t{1} << 20;  // --kernel: elements held to the reference
  double timeout = 600;  // --kernel: seconds per case
  std::string kernel_memory;  // --kernel: --kernel-memory (its default set with the option)
  bool kernel_options = false;  // --check-elements, --timeout or --kernel-memory given
  int threads = 1;               // the inputs' and the reference's (add_case_threads_option)
};

// --kernel: the kernel that makes the outputs, and what its cases' provenance says of it.
struct OutputKernel {
  KernelUnderReview k;
  std::uint64_t check_elements = 0;
  std::string source;  // "kernel NAME of LIB (sha256 ...), host memory" or "... on DEVICE"
};

// A case the kernel made that its check refused: nothing is written (not a std::exception: no
// --param or --input is to blame).
struct KernelRefused {
  std::string report;
};

int list_formats() {
  for (const FormatSpec& f : registered_formats()) {
    fmt::print("{}\n  {}\n  reproduces: {}\n  params: {}; default tolerance: {}\n", f.name, f.description, f.provenance,
               f.default_params.dump(), f.default_tolerance);
  }
  return kConformant;
}

// A case made in memory, not yet written.
struct GeneratedCase {
  std::string relative;  // <format>/<name>.safetensors under --out
  std::vector<std::uint8_t> bytes;
  std::string origin;  // what asked for it, for errors: "--input 'normal:n=300'"
};

// An error while making one --input's cases, naming that input (the generators' messages may already).
UsageError input_error(const std::string& text, const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return UsageError("--input '" + text + "': out of memory making its cases (what a size needs: docs/golden-files.md#memory)");
  const std::string what = e.what();
  if (what.find("'" + text + "'") != std::string::npos) return UsageError("--input: " + what);
  return UsageError("--input '" + text + "': " + what);
}

// The cases of one --input made in memory with `params` and appended to `made`; s null: the one case
// of a format without inputs (a table).
// kernel: null, the reference makes the outputs; else that kernel, each case checked (KernelRefused).
// threads: the inputs' and the reference's; the same bytes for any count.
void make_cases(const FormatSpec& spec, const nlohmann::json& params, const InputSpec* s, int steps, int threads,
                std::vector<GeneratedCase>& made, const OutputKernel* kernel = nullptr) {
  const MadeBy made_by{std::string("lowbit ") + version(), std::string("lowbit golden generate ") + version()};
  const std::string origin = s ? "--input '" + s->text + "'" : "--format " + spec.name;
  auto make_one = [&](CaseToRun to_run) {
    Case c;
    if (kernel) {
      KernelCase kc = run_checked_kernel(kernel->k, spec, to_run.inputs, kernel->check_elements);
      if (!kc.trusted()) throw KernelRefused{refusal_lines(to_run.stem, kernel->k.kernel, kc)};
      fmt::print("{}\n", checked_line(to_run.stem, kernel->k.kernel, kc));
      c = std::move(kc.made);
      c.metadata["source"] = kernel->source;
      c.metadata["function"] = "kernel " + kernel->k.kernel + " (format " + spec.name + ")";
      c.metadata["generator"] = made_by.generator + " --kernel";
      c.metadata["kernel_check"] = "outputs bit-identical to the reference on " + kc.sample_text();
    } else {
      c = run_reference(spec, to_run.inputs, threads);
    }
    made.push_back({spec.name + "/" + to_run.stem + ".safetensors", serialize_case(c), origin});
    return c;
  };
  if (s)
    for_each_case(spec, params, *s, steps, made_by, make_one, threads);
  else
    make_one(table_case(spec, params, made_by));
}

// A param as the user wrote it: "block_size=-1", "overflow=bogus".
std::string param_item(const std::string& key, const nlohmann::json& value) {
  return key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
}

// Which --param made a failing run fail, "KEY=VALUE" (all of them, joined, when only together they
// fail), or empty when the run fails with the format's defaults too (then the input is to blame).
// The reference checks most params only when it runs (an unknown overflow name, a string where a
// number belongs, a block size the input's length does not allow), so the run is tried again, on
// this error path only: with the defaults, then with each given param alone over them.
std::string failing_params(const FormatSpec& spec, const nlohmann::json& given, const InputSpec* s, int steps,
                           int threads) {
  const auto fails = [&](const nlohmann::json& over) {
    std::vector<GeneratedCase> scratch;
    try {
      make_cases(spec, resolve_params(spec, over), s, steps, threads, scratch);
      return false;
    } catch (const std::exception&) {
      return true;
    }
  };
  if (given.empty() || fails(nlohmann::json::object())) return {};
  std::string all;
  for (const auto& [key, value] : given.items()) {
    nlohmann::json one = nlohmann::json::object();
    one[key] = value;
    if (fails(one)) return param_item(key, value);
    all += (all.empty() ? "" : " ") + param_item(key, value);
  }
  return all;
}

// Every case the options ask for, made in memory before anything is written. An error names the
// --param to blame, else the --input (or the format of a table).
std::vector<GeneratedCase> generate_cases(const FormatSpec& spec, const nlohmann::json& params,
                                          const nlohmann::json& given, const std::vector<InputSpec>& specs,
                                          bool takes_input, int steps, int threads, const OutputKernel* kernel) {
  std::vector<GeneratedCase> made;
  std::vector<const InputSpec*> runs;
  if (!takes_input) runs.push_back(nullptr);
  for (const InputSpec& s : specs) runs.push_back(&s);
  for (const InputSpec* s : runs) {
    try {
      make_cases(spec, params, s, steps, threads, made, kernel);
    } catch (const PluginError& e) {  // the plugin itself: not a --param's or an --input's doing
      throw UsageError(std::string("--kernel: ") + e.what());
    } catch (const std::exception& e) {
      // out of memory is the size's doing, not a param's: no runs again
      const bool no_memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
      const std::string blamed = no_memory ? std::string() : failing_params(spec, given, s, steps, threads);
      if (!blamed.empty())
        throw UsageError("--param " + blamed + (s ? " (with --input '" + s->text + "')" : "") + ": " + e.what());
      if (s) throw input_error(s->text, e);
      throw UsageError("--format " + spec.name + ": " + e.what());
    }
  }
  return made;
}

// The manifest as publish finds it (under the folder's lock) against the one read before the cases
// were made: an entry added or changed since must describe its file (size and sha256), as one that
// another lowbit run published does. One that does not was planted (by a kernel under review, which
// runs in between): nothing is published over it.
void check_entries_since(const std::string& out, const Manifest& before, const Manifest& now) {
  namespace fs = std::filesystem;
  for (const ManifestEntry& e : now.files) {
    const ManifestEntry* earlier = find_entry(before, e.path);
    if (earlier && earlier->sha256 == e.sha256 && earlier->size == e.size) continue;
    const fs::path file = fs::path(out) / e.path;
    std::error_code ec;
    const bool described = fs::is_regular_file(file, ec) && fs::file_size(file, ec) == e.size && !ec &&
                           sha256_hex(read_file_bytes(file.string())) == e.sha256;
    if (!described)
      throw UsageError("--out: " + printable(manifest_path(out)) + " changed while the cases were made: its entry '" +
                       printable(e.path) + "' does not describe the file there; nothing written");
  }
}

// Writes the cases and the updated manifest all together or not at all. A case whose file (or
// manifest entry) already holds different bytes is refused, naming it, unless `replace`; the same
// bytes again are left as they are.
// `inputs`: the files of file: input specs, which no case may overwrite, --replace or not.
void publish(const std::string& out, const std::string& format, const std::vector<GeneratedCase>& made, bool replace,
             const std::vector<std::string>& inputs, const Manifest& before) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(out) / format;
  const bool had_out = fs::exists(out), had_folder = fs::exists(folder);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw UsageError("--out: cannot create '" + folder.string() + "': " + ec.message());
  std::vector<const GeneratedCase*> to_write, unique;
  Manifest manifest;
  try {
    // From here to the manifest's rename, another run into the same folder waits: it then reads
    // the manifest this one wrote and adds to it (without the lock, concurrent runs lost entries).
    const FolderLock lock(out);
    manifest = read_manifest(out);
    check_entries_since(out, before, manifest);
    for (const GeneratedCase& c : made) {
      const auto earlier = std::find_if(unique.begin(), unique.end(), [&](auto* u) { return u->relative == c.relative; });
      if (earlier != unique.end()) {
        if ((*earlier)->bytes != c.bytes)
          throw UsageError((*earlier)->origin + " and " + c.origin + " both make " + c.relative + " with different contents");
        continue;
      }
      unique.push_back(&c);
      const std::string target = (fs::path(out) / c.relative).string();
      const ManifestEntry entry = describe_case_bytes(c.relative, c.bytes, target);
      const bool on_disk = fs::exists(target);
      for (const std::string& input : inputs)
        if (on_disk && fs::exists(input) && fs::equivalent(target, input))
          throw UsageError("--out: '" + target + "' is the --input file " + input + "; write the cases elsewhere");
      const bool same_file = on_disk && read_file_bytes(target) == c.bytes;
      const ManifestEntry* listed = find_entry(manifest, c.relative);
      if (((on_disk && !same_file) || (listed && listed->sha256 != entry.sha256)) && !replace)
        throw UsageError("'" + target + "' holds a different case than " + c.origin +
                         " makes (file or MANIFEST.json entry); pass --replace to overwrite it");
      if (!same_file) to_write.push_back(&c);
      upsert(manifest, entry);
    }
    FileBatch batch;
    for (const GeneratedCase* c : to_write)
      batch.stage((fs::path(out) / c->relative).string(),
                  std::string_view(reinterpret_cast<const char*>(c->bytes.data()), c->bytes.size()));
    batch.stage(manifest_path(out), manifest_json(manifest));
    batch.publish();
  } catch (const std::exception&) {
    if (!had_folder) fs::remove(folder, ec);  // only when empty: nothing of ours was published there
    if (!had_out) fs::remove(out, ec);
    throw;
  }
  for (const GeneratedCase* c : unique)
    fmt::print("{} {}/{}\n", std::find(to_write.begin(), to_write.end(), c) != to_write.end() ? "wrote" : "unchanged",
               printable(out), printable(c->relative));
  fmt::print("manifest {} lists {} files\n", printable(manifest_path(out)), manifest.files.size());
}

int run_generate(GenerateOptions o) {
  if (o.format == "list") return list_formats();
  if (o.kernel.empty() && o.kernel_options) throw UsageError("--check-elements, --timeout and --kernel-memory apply with --kernel only");
  std::optional<OutputKernel> kernel;
  if (!o.kernel.empty()) {
    check_kernel_timeout(o.timeout);
    const std::uint64_t memory = kernel_memory_bytes(o.kernel_memory);
    if (o.check_elements < 1) throw UsageError("--check-elements must be at least 1");
    std::string library;
    const PluginKernel picked = pick_kernel(o.kernel, o.format, o.timeout, library);
    note_input_file(library);  // no case is written over the plugin
    kernel = OutputKernel{{library, picked.name, o.timeout, {}, memory, {}}, o.check_elements, {}};
    kernel->source = "kernel " + picked.name + " of " + library_identity(library);
    if (!picked.host) {
      const CudaDevice device = cuda_device_for(picked, library, o.timeout, kernel->k.cuda_runner);
      fmt::print("device: {}\n", device_text(device));
      kernel->source += " on " + device_text(device);
    } else {
      kernel->source += ", host memory";
    }
    o.format = picked.format;
  }
  if (o.format.empty()) throw UsageError("--format is required (or --kernel, whose format it is)");
  const FormatSpec* spec = find_format(o.format);
  if (!spec) {
    std::string names;
    for (const FormatSpec& f : registered_formats()) names += " " + f.name;
    throw UsageError("--format: unknown format '" + o.format + "'; registered:" + names);
  }
  const nlohmann::json given = parse_params(o.params);
  nlohmann::json params;
  try {
    params = resolve_params(*spec, given);
  } catch (const UsageError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--param: ") + e.what());
  }
  std::vector<InputSpec> specs;
  for (const std::string& text : o.inputs) {
    try {
      specs.push_back(parse_input_spec(text));
    } catch (const std::exception& e) {
      throw input_error(text, e);
    }
  }
  if (o.out.empty()) throw UsageError("--out is required");
  if (std::filesystem::exists(o.out) && !std::filesystem::is_directory(o.out))
    throw UsageError("--out '" + o.out + "' is not a folder");
  const bool optimizer = static_cast<bool>(spec->fresh_state);
  const bool needs_input = takes_input(*spec);
  if (needs_input && specs.empty()) throw UsageError("format " + spec->name + " needs at least one --input");
  if (!needs_input && !specs.empty()) throw UsageError("format " + spec->name + " takes no input; omit --input");
  if (o.steps > 1 && !optimizer) throw UsageError("--steps applies to optimizer formats only");

  // A malformed manifest fails before the work; publish reads it again, locked, and checks what changed.
  const Manifest before = read_manifest(o.out);
  std::vector<std::string> input_files;
  for (const InputSpec& s : specs)
    if (s.kind == "file") input_files.push_back(s.args.at("path"));
  std::vector<GeneratedCase> made;
  try {
    made = generate_cases(*spec, params, given, specs, needs_input, o.steps, o.threads, kernel ? &*kernel : nullptr);
  } catch (const KernelRefused& refused) {
    fmt::print("{}golden generate: kernel {}: refused (above); nothing written\n", refused.report,
               printable(kernel->k.kernel));
    return kNotConformant;
  }
  publish(o.out, spec->name, made, o.replace, input_files, before);
  return kConformant;
}

int run_check(const std::string& dir) {
  const FolderLock reading(dir, FolderLock::Mode::shared);  // a golden generate --replace waits for the check
  const Manifest m = read_golden_manifest(dir);
  // An empty list verifies nothing: bad input, as conform says of a filter that selects nothing.
  if (m.files.empty()) throw UsageError(manifest_path(dir) + " lists no file: nothing to check");
  int bad = 0;
  for (const ManifestEntry& e : m.files) {
    try {
      read_verified_case(dir, e);
      fmt::print("ok       {}\n", printable(e.path));  // a manifest's text: no escape sequence, no forged line
    } catch (const CaseError& err) {
      fmt::print("REFUSED  {}\n", printable(err.what()));
      ++bad;
    }
  }
  // Files present but not listed: not an error, but a maintainer should know.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    const std::string relative = std::filesystem::relative(entry.path(), dir).generic_string();
    if (!find_entry(m, relative)) fmt::print("unlisted {} (not in MANIFEST.json; not checked)\n", printable(relative));
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
      "OUT/<format>/, and add them to OUT/MANIFEST.json (sha256, size, provenance). All or nothing: a\n"
      "failing --input writes no file. A case is named after its input spec and the params that differ\n"
      "from the format's defaults. With --kernel the outputs come from that kernel (a plugin, as verify takes\n"
      "it, host or CUDA memory, in a child process with a time limit), and a case is written only when the\n"
      "kernel's outputs on a sample (--check-elements: the whole case, or its head and tail blocks) are\n"
      "bit-identical to the reference's; else exit 1, the mismatches by class, and nothing written.");
  auto g = std::make_shared<GenerateOptions>();
  gen->add_option("--format", g->format,
                  "Registered format name, e.g. fp8.e4m3fn.satfinite; 'list' lists them all (with --kernel: its format)");
  gen->add_option("--param", g->params, "Format parameter KEY=VALUE (repeatable), e.g. nan_encoding=ml_dtypes");
  gen->add_option("--input", g->inputs,
                  "Input spec KIND[:key=value,...] (repeatable). Kinds: normal(mean,std) uniform(lo,hi)\n"
                  "lognormal(mu,sigma) student-t(nu) constant(value) outliers(std,scale,block) special edges scaled-edges\n"
                  "table-edges tiny-blocks special-blocks nan-tiles gradient-blocks(std)\n"
                  "(docs/verifying-a-kernel.md#what-the-battery-reaches);\n"
                  "all take n (default 4096) and seed (default 1); file:PATH[:TENSOR] takes your own tensor from a\n"
                  "safetensors file (shape kept; optimizers: its param and grad). Formats without an input (tables) take none");
  gen->add_option("--out", g->out, "Output folder (required unless --format list)");
  add_whole_option(*gen, "--steps", g->steps, 1, 1000,
                   "Optimizer formats: the --input spec draws the parameter; from a fresh state, run this many\n"
                   "steps, each with a gradient drawn by the same spec with seed + step, one case per step\n"
                   "(gradient-blocks: the parameter is the normal draw, the gradients carry the blocks)");
  gen->add_flag("--replace", g->replace,
                "Overwrite a case of the same name that holds different bytes (by default such a case is\n"
                "refused and nothing is written; regenerating the same bytes is always fine)");
  add_case_threads_option(*gen, g->threads);

  gen->add_option("--kernel", g->kernel,
                  "A kernel under review, LIB or LIB:NAME (include/lowbit/kernel_plugin.h), that makes the outputs");
  add_whole_option(*gen, "--check-elements", g->check_elements, std::uint64_t{1}, kMaxCheckElements,
                   "--kernel: a case of at most this many elements is checked whole; a larger one on its first and last\n"
                   "blocks, this many elements together (a format that cannot be cut into blocks: whole)");
  add_real_option(*gen, "--timeout", g->timeout, kMinKernelTimeout, kMaxKernelTimeout,
                  "--kernel: seconds the kernel may take per case before it is killed");
  add_kernel_memory_option(*gen, g->kernel_memory);

  CLI::App* check = golden->add_subcommand("check", "Verify every file listed in a golden MANIFEST.json (size and sha256)");
  auto dir = std::make_shared<std::string>(shipped_golden_dir().string());
  check->add_option("--golden", *dir, "Folder holding MANIFEST.json")->capture_default_str();

  return {golden, [g, dir, gen]() -> int {
            if (gen->parsed()) {
              g->kernel_options = gen->get_option("--check-elements")->count() + gen->get_option("--timeout")->count() +
                                      gen->get_option("--kernel-memory")->count() > 0;
              return run_generate(*g);
            }
            return run_check(*dir);
          }};
}

}  // namespace lowbit::cli
