#pragma once
// Output files are written whole or not at all: the bytes go to a temporary file beside the target,
// which is renamed over it only once complete. A reader never sees a partial file. Only regular
// files are written: a device, FIFO, symbolic link or folder at the target is refused, never
// replaced.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lowbit {

// Throws std::runtime_error naming the path and the reason when the file cannot or may not be written.
void write_file_atomically(const std::string& path, std::string_view contents);

// Checks up front that `path` can be written (its folder exists and accepts files, nothing but a
// regular file stands there), so that a long run does not fail at its very end.
void ensure_writable(const std::string& path);

// Several files published together (golden case files and the manifest that lists them): stage()
// writes each to a temporary beside its target, checked as write_file_atomically checks it;
// publish() renames them into place in staging order once all are complete. Until publish() no
// target is touched; a batch destroyed unpublished (an error on the way) removes its temporaries.
class FileBatch {
 public:
  FileBatch();
  FileBatch(const FileBatch&) = delete;
  FileBatch& operator=(const FileBatch&) = delete;
  ~FileBatch();

  void stage(const std::string& path, std::string_view contents);
  void publish();

 private:
  struct Staged;
  std::vector<std::unique_ptr<Staged>> staged_;
};

// A lock on a folder (flock on the folder itself: no lock file is left in it), held while the object
// lives; waits for a holder of the other kind. Writers of one manifest take it exclusive around
// their read-modify-write, so that two runs into one folder merge their entries instead of dropping
// some; readers of a golden folder take it shared while they read its manifest and cases, so that a
// golden generate --replace never changes a file between the manifest's check and the read. A
// reader that cannot open the folder (no read permission) reads without the lock.
class FolderLock {
 public:
  enum class Mode { exclusive, shared };
  // std::runtime_error naming the folder (exclusive only)
  explicit FolderLock(const std::string& dir, Mode mode = Mode::exclusive);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// Whether two paths name the same file (resolving ".", "..", repeated slashes and links).
bool same_file(const std::string& a, const std::string& b);

// The guard of one run of a command (the CLI turns it on; a library user may): from then on every
// case file read is an input of the run, and no output may be written over an input or over an
// output the run already wrote; SIGINT and SIGTERM remove the temporary file of a write in progress
// before the process ends.
void guard_run_files();
// Records a case file as an input of the run (read_case and the manifest's readers call it).
void note_input_file(const std::string& path);

}  // namespace lowbit
