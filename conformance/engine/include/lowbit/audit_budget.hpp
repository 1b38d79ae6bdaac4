#pragma once
// Which configuration to pick: among an audit's rows, the (format, block size) with the fewest bits
// per element whose error is within a budget, per input and for all inputs together (docs/audit.md,
// "The smallest configuration within a budget").
#include <optional>
#include <string>
#include <vector>

#include "lowbit/audit.hpp"

namespace lowbit::audit {

// A limit on one measure: mean_abs, mean_rel, rel_l2 or max_abs at most `value`, or sqnr_db at least
// `value` (the CSV's column names, with or without their _error suffix, are accepted too).
struct Budget {
  std::string metric;  // canonical: mean_abs, mean_rel, rel_l2, max_abs, sqnr_db
  double value = 0;
  bool higher_is_better() const { return metric == "sqnr_db"; }
  std::string text() const;  // "rel_l2 <= 0.01"
};

// "METRIC=VALUE"; std::invalid_argument naming the fault (unknown metric, the list; a value that is
// not a finite number).
Budget parse_budget(const std::string& text);

// The row's value of the budget's measure.
double measure_of(const Metrics& m, const std::string& metric);
bool within(const Metrics& m, const Budget& b);

// The pick for one input, or (input empty) for all of them: one configuration used for every input,
// run and within the budget on each; its bits per element are the inputs' stored bits over their
// elements, its error the worst of theirs.
struct Choice {
  std::string input;  // empty: every input
  std::size_t candidates = 0;  // configurations that ran (on every input)
  std::optional<Row> best;     // none: no configuration meets the budget (best.input is the input, or empty)
};

// One choice per input (in the rows' order), then the overall one. Fewest bits first; equal bits: the
// better error, then the earlier row.
std::vector<Choice> choose(const std::vector<Row>& rows, const Budget& budget);

// "torchao.codebook8.signed at block 256: 8.1 bits per element, rel_l2 0.0093", or why there is none;
// already_quantized: an input looks already quantized in the chosen configuration (audit_exact.hpp),
// so its error there is an artefact, which the text says. One text for lowbit audit --budget and the
// Python package's lowbit.choose.
std::string choice_text(const Choice& c, const Budget& budget, bool already_quantized);

}  // namespace lowbit::audit
