#include "number_option.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "lowbit/strict_number.hpp"

namespace lowbit::cli {

std::uint64_t option_whole(const std::string& name, const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  try {
    return parse_whole(text, name, lo, hi);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
}

double option_real(const std::string& name, const std::string& text, double lo, double hi) {
  try {
    return parse_real(text, name, lo, hi);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
}

CLI::Option* add_real_option(CLI::App& app, const std::string& name, double& target, double lo, double hi,
                             const std::string& description) {
  CLI::Option* o = app.add_option_function<std::string>(
      name, [&target, name, lo, hi](const std::string& text) { target = option_real(name, text, lo, hi); },
      description + fmt::format(" ({:g} to {:g})", lo, hi));
  return o->type_name("NUMBER")->default_str(fmt::format("{:g}", target));
}

}  // namespace lowbit::cli
