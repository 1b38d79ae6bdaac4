// Registry entries of the fused optimizer steps, one file per library.
#include "lowbit/formats.hpp"

namespace lowbit {

void register_torchao_optimizer_formats(std::vector<FormatSpec>& out);
void register_bnb_optimizer_formats(std::vector<FormatSpec>& out);
void register_bnb_rule_formats(std::vector<FormatSpec>& out);

void register_optimizer_formats(std::vector<FormatSpec>& out) {
  register_torchao_optimizer_formats(out);
  register_bnb_optimizer_formats(out);
  register_bnb_rule_formats(out);
}

}  // namespace lowbit
