#pragma once
// The committed golden cases as the tests see them: golden/MANIFEST.json read once per test
// program, cases chosen by exact path or by format and path globs, and every case file verified
// against its manifest entry (size and sha256) when it is read. LOWBIT_GOLDEN_DIR is set by CMake.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "lowbit/manifest.hpp"

namespace lowbit::test {

inline const std::string& golden_dir() {
  static const std::string dir = LOWBIT_GOLDEN_DIR;
  return dir;
}

inline const Manifest& golden_manifest() {
  static const Manifest manifest = read_golden_manifest(golden_dir());  // a missing folder fails, never passes empty
  return manifest;
}

// Entries whose format and path (relative to golden/) match the globs, in manifest order.
inline std::vector<const ManifestEntry*> golden_entries(const std::string& format_glob,
                                                        const std::string& path_glob = "*") {
  return select_entries(golden_manifest(), format_glob, path_glob);
}

// The case file of an entry, refused (CaseError) when its bytes disagree with the entry.
inline Case golden_case(const ManifestEntry& entry) { return read_verified_case(golden_dir(), entry); }

// The case at `path` (relative to golden/, e.g. "coat/coat.fake.symm/e4m3.8x64.b1x16.safetensors").
inline Case golden_case(const std::string& path) {
  const std::vector<const ManifestEntry*> found = golden_entries("*", path);
  if (found.size() != 1) {
    FAIL("golden/MANIFEST.json lists no case " << path);
    return {};
  }
  return golden_case(*found.front());
}

}  // namespace lowbit::test
