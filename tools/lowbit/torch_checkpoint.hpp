#pragma once
// A torch checkpoint handed where lowbit reads a case file: reading one takes torch, so the Python
// package converts it (docs/python.md, "Sharded states"); this says exactly what to run.
#include <string>

namespace lowbit::cli {

// Throws UsageError naming `path` and the `python -m lowbit` command to run when `path` is a folder (a
// torch distributed checkpoint, with its .metadata, or any other) or a torch.save file (a zip
// archive); returns otherwise. `then` is the lowbit command line to run on the converted case file,
// states.safetensors; `audit`: also name `python -m lowbit audit PATH`, which audits the checkpoint directly.
void refuse_torch_checkpoint(const std::string& path, const std::string& then, bool audit = false);

}  // namespace lowbit::cli
