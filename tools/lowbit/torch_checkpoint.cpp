// A torch checkpoint handed where lowbit reads a case file: one line saying what to run instead.
#include "torch_checkpoint.hpp"

#include <fmt/core.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "command.hpp"
#include "lowbit/printable.hpp"

namespace lowbit::cli {

namespace {

// torch.save writes a zip archive (torch/serialization.py, _use_new_zipfile_serialization): its first
// four bytes are a local file header's signature
bool looks_like_torch_save(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 4> head{};
  return in.read(head.data(), head.size()) && head == std::array<char, 4>{'P', 'K', '\3', '\4'};
}

// A name as one word of a command the user may paste into a shell: as it is where every character is
// one a shell leaves alone, else in single quotes (each ' written '\''), so that `$(...)`, backquotes,
// spaces and globs in a path stay text. The name is printable() first: no control character remains.
std::string shell_word(const std::string& name) {
  const bool plain = !name.empty() && name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                             "0123456789_@%+=:,./-") == std::string::npos;
  if (plain) return name;
  std::string quoted = "'";
  for (const char c : name) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

void refuse_torch_checkpoint(const std::string& path, const std::string& then, bool audit) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  const bool folder = !ec && std::filesystem::is_directory(status);
  const bool file = !ec && std::filesystem::is_regular_file(status);
  // a file of a DCP folder (its .distcp data files are zip archives too): the commands name the folder
  const std::filesystem::path parent = std::filesystem::path(path).parent_path().empty()
                                           ? std::filesystem::path(".")
                                           : std::filesystem::path(path).parent_path();
  const bool in_dcp = file && std::filesystem::is_regular_file(parent / ".metadata", ec);
  std::string what;
  if (folder && std::filesystem::is_regular_file(std::filesystem::path(path) / ".metadata", ec))
    what = "a torch distributed checkpoint (DCP) folder";
  else if (folder)
    what = "a folder";
  else if (in_dcp)
    what = "a file of the torch distributed checkpoint (DCP) folder " + printable(parent.string());
  else if (file && looks_like_torch_save(path))
    what = "a zip archive (a torch.save file?)";
  else
    return;
  const std::string shown = shell_word(printable(in_dcp ? parent.string() : path));
  throw UsageError(fmt::format(
      "{}: {}, not a case file; lowbit reads safetensors case files. For an optimizer checkpoint, the Python "
      "package reads it (docs/python.md): `python -m lowbit inspect {}` shows its states and signature; {}"
      "`python -m lowbit state-case {} states.safetensors` writes their dequantized values, then `{}`",
      printable(path), what, shown,
      audit ? fmt::format("`python -m lowbit audit {}` audits their dequantized values directly; ", shown) : "", shown,
      then));
}

}  // namespace lowbit::cli
