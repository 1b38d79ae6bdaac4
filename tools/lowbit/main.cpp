// lowbit: the command of lowbit-conformance. Exit codes: 0 conformant, 1 not conformant, 2 bad
// input or usage (one line on stderr says what and where).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <exception>
#include <new>
#include <vector>

#include "command.hpp"
#include "lowbit/atomic_file.hpp"
#include "lowbit/printable.hpp"
#include "subcommand.hpp"

int main(int argc, char** argv) {
  using namespace lowbit::cli;
  CLI::App app{"lowbit: bit-exact conformance checks for low-bit optimizer-state quantizers"};
  app.set_version_flag("--version", std::string("lowbit ") + version());
  app.require_subcommand(1);
  const std::vector<Subcommand> subcommands{add_audit_command(app), add_compare_command(app), add_conform_command(app),
                                           add_golden_command(app), add_inspect_command(app),
                                           add_study_command(app), add_sweep_command(app),
                                           add_verify_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 answers an unknown command with "A subcommand is required": name it instead.
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::string known;
      for (const Subcommand& s : subcommands) known += (known.empty() ? "" : ", ") + s.app->get_name();
      fmt::print(stderr, "lowbit: error: unknown command '{}' (commands: {}; see --help)\n", lowbit::printable(argv[1]),
                 known);
      return kBadInput;
    }
    fmt::print(stderr, "lowbit: error: {} (see --help)\n", lowbit::printable(e.what()));
    return kBadInput;
  }

  lowbit::guard_run_files();  // no output over an input or another output; temporaries removed on SIGINT/SIGTERM
  try {
    for (const Subcommand& s : subcommands)
      if (s.app->parsed()) return s.run();
  } catch (const UsageError& e) {
    fmt::print(stderr, "lowbit: error: {}\n", lowbit::printable(e.what()));
    return kBadInput;
  } catch (const std::bad_alloc&) {  // a command that names what it was making says so itself
    fmt::print(stderr, "lowbit: error: out of memory (what each command holds: docs/golden-files.md#memory)\n");
    return kBadInput;
  } catch (const std::exception& e) {  // unreadable or unwritable files, malformed inputs
    fmt::print(stderr, "lowbit: error: {}\n", lowbit::printable(e.what()));
    return kBadInput;
  }
  fmt::print(stderr, "lowbit: error: no command given (see --help)\n");
  return kBadInput;
}
