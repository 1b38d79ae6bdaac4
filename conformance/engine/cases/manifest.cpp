#include "lowbit/manifest.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lowbit/atomic_file.hpp"
#include "lowbit/formats.hpp"
#include "lowbit/sha256.hpp"

namespace lowbit {

namespace {

// An entry's path is a plain relative path in normal form ("fmt/a.safetensors"): one spelling per
// file, so that every command finds the same entry for the same file ("./x" or "a//b" would
// never match the path a command looks up, and its file would go unverified).
void check_relative(const std::string& path, const std::string& origin) {
  const std::filesystem::path p(path);
  bool escapes = p.empty() || p.is_absolute();
  for (const auto& part : p)
    if (part == "..") escapes = true;
  if (escapes) throw CaseError(origin + ": entry path '" + path + "' is not a plain relative path");
  const std::string normal = p.lexically_normal().generic_string();
  if (normal != path)
    throw CaseError(origin + ": entry path '" + path + "' is not in normal form (write '" + normal + "')");
}

}  // namespace

std::string manifest_path(const std::string& dir) { return (std::filesystem::path(dir) / "MANIFEST.json").string(); }

namespace {

// The entries of a parsed manifest, every one checked; CaseError naming the manifest.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& path) {
  Manifest m;
  try {
    for (const auto& f : j.at("files")) {
      ManifestEntry e{f.at("path").get<std::string>(), f.at("sha256").get<std::string>(), f.at("size").get<std::uint64_t>(),
                      f.value("format", ""), f.value("source", ""), f.value("function", ""), f.value("generator", "")};
      check_relative(e.path, path);
      m.files.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw CaseError(path + ": not a valid manifest (" + e.what() + ")");
  }
  return m;
}

}  // namespace

Manifest read_manifest(const std::string& dir) {
  const std::string path = manifest_path(dir);
  if (!std::filesystem::exists(path)) return {};
  const auto bytes = read_file_bytes(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    throw CaseError(path + ": not a valid manifest (" + e.what() + ")");
  }
  return manifest_from_json(j, path);
}

std::optional<Manifest> read_manifest_if_lowbits(const std::string& dir) {
  const std::string path = manifest_path(dir);
  const auto bytes = read_file_bytes(path);
  // lowbit's manifests (manifest_json, the exporters' golden_io.py) are objects with "version": 1
  // and a "files" array; anything else is another tool's file of the same name
  const nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array() || j.value("version", nlohmann::json()) != 1)
    return std::nullopt;
  return manifest_from_json(j, path);
}

Manifest read_golden_manifest(const std::string& dir) {
  const std::string path = manifest_path(dir);
  if (!std::filesystem::exists(path)) throw CaseError("no golden cases: " + path + " does not exist (give --golden DIR)");
  if (!std::filesystem::is_regular_file(path)) throw CaseError("no golden cases: " + path + " is not a file");
  note_input_file(path);  // the run's input like its cases: `conform --markdown DIR/MANIFEST.json` replaced it
  return read_manifest(dir);
}

std::string manifest_json(const Manifest& m) {
  std::vector<ManifestEntry> files = m.files;
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  nlohmann::json j;
  j["version"] = 1;
  j["files"] = nlohmann::json::array();
  for (const auto& e : files)
    j["files"].push_back({{"path", e.path}, {"sha256", e.sha256}, {"size", e.size}, {"format", e.format},
                          {"source", e.source}, {"function", e.function}, {"generator", e.generator}});
  return j.dump(2) + "\n";
}

void write_manifest(const std::string& dir, const Manifest& m) { write_file_atomically(manifest_path(dir), manifest_json(m)); }

ManifestEntry describe_case_file(const std::string& dir, const std::string& relative_path) {
  const std::string full = (std::filesystem::path(dir) / relative_path).string();
  return describe_case_bytes(relative_path, read_file_bytes(full), full);
}

ManifestEntry describe_case_bytes(const std::string& relative_path, std::span<const std::uint8_t> bytes,
                                  const std::string& origin) {
  const Case c = parse_case(bytes, origin);
  return {relative_path, sha256_hex(bytes), bytes.size(), c.format(), c.meta("source"), c.meta("function"),
          c.meta("generator")};
}

std::vector<const ManifestEntry*> select_entries(const Manifest& m, const std::string& format_glob,
                                                 const std::string& path_glob) {
  std::vector<const ManifestEntry*> selected;
  for (const ManifestEntry& e : m.files)
    if (format_matches(format_glob, e.format) && fnmatch(path_glob.c_str(), e.path.c_str(), 0) == 0)
      selected.push_back(&e);
  return selected;
}

const ManifestEntry* find_entry(const Manifest& m, const std::string& relative_path) {
  for (const ManifestEntry& e : m.files)
    if (e.path == relative_path) return &e;
  return nullptr;
}

void upsert(Manifest& m, ManifestEntry e) {
  for (auto& f : m.files)
    if (f.path == e.path) {
      f = std::move(e);
      return;
    }
  m.files.push_back(std::move(e));
}

Case read_verified_case(const std::string& dir, const ManifestEntry& entry) {
  check_relative(entry.path, manifest_path(dir));
  const std::string full = (std::filesystem::path(dir) / entry.path).string();
  note_input_file(full);
  const auto bytes = read_file_bytes(full);
  if (bytes.size() != entry.size)
    throw CaseError(full + ": size " + std::to_string(bytes.size()) + " disagrees with the manifest (" +
                    std::to_string(entry.size) + "); refusing it");
  const std::string digest = sha256_hex(bytes);
  if (digest != entry.sha256)
    throw CaseError(full + ": sha256 " + digest + " disagrees with the manifest (" + entry.sha256 + "); refusing it");
  return parse_case(bytes, full);
}

Case read_case_guarded(const std::string& path) {
  namespace fs = std::filesystem;
  // The file as written (links kept: a link inside a golden folder is listed under its own name)
  // and as resolved (links followed: a link to a golden folder or file reaches its manifest).
  const fs::path as_written = fs::absolute(path).lexically_normal();
  const fs::path resolved = fs::weakly_canonical(as_written);
  for (const fs::path& file : {as_written, resolved}) {
    for (fs::path dir = file.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::exists(dir / "MANIFEST.json")) {
        // held while the manifest and the case are read: a golden generate --replace of this
        // folder (FolderLock, exclusive) waits for us, and we for it
        const FolderLock reading(dir.string(), FolderLock::Mode::shared);
        // another tool's MANIFEST.json (not lowbit's shape) guards nothing: the search goes on
        if (const std::optional<Manifest> m = read_manifest_if_lowbits(dir.string())) {
          note_input_file(manifest_path(dir.string()));  // read, so no output of the run may replace it
          if (const ManifestEntry* e = find_entry(*m, file.lexically_relative(dir).generic_string())) {
            Case c = read_verified_case(dir.string(), *e);
            c.origin = path;
            return c;
          }
        }
      }
      if (dir == dir.root_path()) break;
    }
  }
  return read_case(path);
}

}  // namespace lowbit
