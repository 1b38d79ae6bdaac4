#pragma once
// What ships with the lowbit command, found relative to its own binary: <prefix>/share/lowbit when
// installed (bin/lowbit -> ../share/lowbit), and the same relative place in the build tree, which
// tools/lowbit/CMakeLists.txt lays out alike. No source path is compiled in, so an installed or
// relocated tree finds its own policies and golden cases.
#include <filesystem>

namespace lowbit::cli {

std::filesystem::path shipped_policy_dir();  // the tolerance policies, <data>/policies
std::filesystem::path shipped_golden_dir();  // the golden cases with MANIFEST.json, <data>/golden
// The CUDA runner library (device/harness/) beside lowbit: <bin>/../lib/liblowbit_cuda_runner.so, in the
// build tree as installed; present only where lowbit was built with a CUDA compiler.
std::filesystem::path shipped_cuda_runner();

}  // namespace lowbit::cli
