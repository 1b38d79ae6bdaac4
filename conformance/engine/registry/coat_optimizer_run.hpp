#pragma once
// One COAT FP8 AdamW launch on a case's state, as the registry's coat.optim.origin.e4m3 and
// coat.optim.expand.e4m3 run it (formats_coat_optimizer.cpp), with the expansion's k and centre rule
// as the diagnosis's knob (diagnosis/variants_coat_optimizer.cpp): the reference's outputs under another rule.
#include <nlohmann/json.hpp>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/coat_optimizer.hpp"

namespace lowbit {

// The outputs (param.next and each moment's ".next" tensors) for the case's inputs and params.
std::vector<Tensor> run_coat_adamw(const Case& in, const nlohmann::json& p, bool expansion,
                                   const coat::ExpandRule& rule = {});

}  // namespace lowbit
