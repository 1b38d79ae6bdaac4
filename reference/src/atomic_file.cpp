#include "lowbit/atomic_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace lowbit {

namespace {

std::string temporary_beside(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

[[noreturn]] void fail(const std::string& path, int err) {
  throw std::runtime_error("cannot write '" + path + "': " + std::strerror(err));
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  if (std::filesystem::is_directory(path)) fail(path, EISDIR);
  const std::string tmp = temporary_beside(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, errno);
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    fail(path, written ? errno : write_errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(path, err);
  }
}

void ensure_writable(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail(path, EISDIR);
  const std::string tmp = temporary_beside(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, errno);
  std::fclose(f);
  std::remove(tmp.c_str());
}

}  // namespace lowbit
