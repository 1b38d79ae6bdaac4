#pragma once
// Output files are written whole or not at all: the bytes go to a temporary file beside the target,
// which is renamed over it only once complete. A reader never sees a partial file.
#include <string>
#include <string_view>

namespace lowbit {

// Throws std::runtime_error naming the path and the system's reason when the file cannot be written.
void write_file_atomically(const std::string& path, std::string_view contents);

// Checks up front that `path` can be written (its folder exists and accepts files), so that a long
// run does not fail at its very end. Throws std::runtime_error like write_file_atomically.
void ensure_writable(const std::string& path);

}  // namespace lowbit
