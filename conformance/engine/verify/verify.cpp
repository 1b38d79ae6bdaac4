#include "lowbit/verify.hpp"

#include <algorithm>

#include "lowbit/plugin_host.hpp"
#include "lowbit/schema.hpp"

namespace lowbit {

VerifiedCase verify_case(const KernelUnderReview& k, const FormatSpec& format, const Case& expected,
                         const TolerancePolicy& policy, std::string label) {
  validate_case(format, expected, CaseScope::Complete);
  std::vector<const Tensor*> inputs, outputs;
  for (const Tensor& t : expected.tensors()) {
    const bool input = std::find(format.inputs.begin(), format.inputs.end(), t.name) != format.inputs.end() ||
                       std::find(format.optional_inputs.begin(), format.optional_inputs.end(), t.name) !=
                           format.optional_inputs.end();
    (input ? inputs : outputs).push_back(&t);
  }
  const std::string params = resolve_params(format, expected.params()).dump();
  VerifiedCase v;
  v.label = std::move(label);
  v.expected = expected;
  KernelRun run = k.in_process ? k.in_process(inputs, params, outputs)
                               : run_plugin_kernel(k.library, k.kernel, inputs, params, outputs, k.timeout_seconds,
                                                   k.cuda_runner, k.memory_bytes);
  v.actual.metadata = expected.metadata;
  v.actual.origin = "kernel " + k.kernel + " on " + v.label;
  for (const Tensor* t : inputs) v.actual.add(*t);
  if (!run.completed) {
    v.failure = run.failure;
    return v;
  }
  v.kernel_ms = run.kernel_ms;
  for (Tensor& t : run.outputs.take_tensors()) v.actual.add(std::move(t));
  v.report = compare_cases(expected, v.actual, policy);
  return v;
}

}  // namespace lowbit
