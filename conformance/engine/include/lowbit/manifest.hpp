#pragma once
// golden/MANIFEST.json: every golden case file with its sha256, size, format and provenance. A
// golden file whose bytes disagree with its manifest entry is refused by every reader.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lowbit/case.hpp"

namespace lowbit {

struct ManifestEntry {
  std::string path;  // relative to the manifest's folder, '/'-separated, no '..'
  std::string sha256;
  std::uint64_t size = 0;
  std::string format;
  std::string source;     // library and version that produced the outputs
  std::string function;   // official function or kernel used
  std::string generator;  // tool and version that wrote the file
};

struct Manifest {
  std::vector<ManifestEntry> files;
};

// DIR/MANIFEST.json; an absent manifest reads as empty, a malformed one is a CaseError.
Manifest read_manifest(const std::string& dir);
// DIR/MANIFEST.json when it is lowbit's (an object with "version": 1 and a "files" array: then every
// entry is checked, a CaseError naming it); nothing when it is another tool's file of that name
// (not JSON, or another shape), which read_case_guarded then ignores.
std::optional<Manifest> read_manifest_if_lowbits(const std::string& dir);
// The same for a folder that must be a golden folder (check, conform): a CaseError naming
// DIR/MANIFEST.json when there is none (a missing folder, a file, a folder of unlisted cases), which
// would otherwise pass as "nothing to check".
Manifest read_golden_manifest(const std::string& dir);
std::string manifest_json(const Manifest& m);  // the file's text, entries sorted by path
void write_manifest(const std::string& dir, const Manifest& m);  // manifest_json, atomically
std::string manifest_path(const std::string& dir);                // DIR/MANIFEST.json

// An entry describing the case file DIR/relative_path as it is now (reads it and validates it).
ManifestEntry describe_case_file(const std::string& dir, const std::string& relative_path);
// The same for a case file's bytes before they are written; `origin` names them in errors.
ManifestEntry describe_case_bytes(const std::string& relative_path, std::span<const std::uint8_t> bytes,
                                  const std::string& origin);
// The entry with this path, or null.
const ManifestEntry* find_entry(const Manifest& m, const std::string& relative_path);
// The entries whose format and path match the shell globs (fnmatch), in manifest order.
std::vector<const ManifestEntry*> select_entries(const Manifest& m, const std::string& format_glob,
                                                 const std::string& path_glob = "*");

// Adds or replaces the entry with the same path.
void upsert(Manifest& m, ManifestEntry e);

// Reads DIR/entry.path, refusing it (CaseError naming the file) unless its size and sha256 match.
Case read_verified_case(const std::string& dir, const ManifestEntry& entry);

// Reads any case file; when a MANIFEST.json of lowbit's in one of its parent folders lists it, the
// file must match its entry (the golden-file guard every command goes through: inspect, compare,
// audit --state and every --input file:). Each such folder is read under a shared FolderLock.
Case read_case_guarded(const std::string& path);

}  // namespace lowbit
