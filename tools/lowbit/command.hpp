#pragma once
// What every subcommand shares: its exit codes and the error that means "bad input or usage".
#include <stdexcept>
#include <string>

namespace lowbit::cli {

enum ExitCode : int { kConformant = 0, kNotConformant = 1, kBadInput = 2 };

// Thrown for anything the user can fix on the command line or in an input file; main() prints
// it as one line and exits with kBadInput.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline const char* version() { return LOWBIT_VERSION; }

}  // namespace lowbit::cli
