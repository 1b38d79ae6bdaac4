// The smallest configuration within an error budget (audit_budget.hpp).
#include "lowbit/audit_budget.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <stdexcept>

namespace lowbit::audit {

namespace {

const char* const kMetrics[] = {"mean_abs", "mean_rel", "rel_l2", "max_abs", "sqnr_db"};

std::string canonical(std::string name) {
  if (name.ends_with("_error")) name.resize(name.size() - 6);
  for (const char* m : kMetrics)
    if (name == m) return name;
  return {};
}

// a better than b on the budget's measure
bool better(double a, double b, const Budget& budget) { return budget.higher_is_better() ? a > b : a < b; }

// The pick among candidates (rows that ran and met the budget): fewest bits, then better error, then first.
std::optional<Row> pick(const std::vector<Row>& candidates, const Budget& budget) {
  std::optional<Row> best;
  for (const Row& r : candidates) {
    if (!best || r.m.bits_per_element < best->m.bits_per_element ||
        (r.m.bits_per_element == best->m.bits_per_element &&
         better(measure_of(r.m, budget.metric), measure_of(best->m, budget.metric), budget)))
      best = r;
  }
  return best;
}

}  // namespace

std::string Budget::text() const {
  return metric + (higher_is_better() ? " >= " : " <= ") + [&] {
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
    return std::string(buf, end);
  }();
}

Budget parse_budget(const std::string& text) {
  const auto eq = text.find('=');
  const std::string known = "mean_abs, mean_rel, rel_l2, max_abs, sqnr_db";
  if (eq == std::string::npos)
    throw std::invalid_argument("budget '" + text + "' must be METRIC=VALUE, e.g. rel_l2=0.01 (metrics: " + known + ")");
  Budget b;
  b.metric = canonical(text.substr(0, eq));
  if (b.metric.empty())
    throw std::invalid_argument("budget '" + text + "': unknown metric '" + text.substr(0, eq) + "' (metrics: " + known + ")");
  const std::string v = text.substr(eq + 1);
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), b.value);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !std::isfinite(b.value))
    throw std::invalid_argument("budget '" + text + "': the value '" + v + "' is not a finite number");
  if (!b.higher_is_better() && b.value < 0)
    throw std::invalid_argument("budget '" + text + "': an error limit cannot be negative");
  return b;
}

double measure_of(const Metrics& m, const std::string& metric) {
  if (metric == "mean_abs") return m.mean_abs;
  if (metric == "mean_rel") return m.mean_rel;
  if (metric == "rel_l2") return m.rel_l2;
  if (metric == "max_abs") return m.max_abs;
  if (metric == "sqnr_db") return m.sqnr_db;
  throw std::invalid_argument("unknown measure '" + metric + "'");
}

bool within(const Metrics& m, const Budget& b) {
  const double v = measure_of(m, b.metric);
  return b.higher_is_better() ? v >= b.value : v <= b.value;
}

std::vector<Choice> choose(const std::vector<Row>& rows, const Budget& budget) {
  std::vector<std::string> inputs;
  for (const Row& r : rows)
    if (std::find(inputs.begin(), inputs.end(), r.input) == inputs.end()) inputs.push_back(r.input);
  std::vector<Choice> out;
  for (const std::string& in : inputs) {
    Choice c{in, 0, std::nullopt};
    std::vector<Row> ok;
    for (const Row& r : rows) {
      if (r.input != in || !r.note.empty()) continue;
      ++c.candidates;
      if (within(r.m, budget)) ok.push_back(r);
    }
    c.best = pick(ok, budget);
    out.push_back(std::move(c));
  }
  // every input: the configurations that ran on all of them, combined
  std::vector<std::pair<const FormatSpec*, std::size_t>> configs;
  for (const Row& r : rows)
    if (std::find(configs.begin(), configs.end(), std::pair{r.format, r.block}) == configs.end())
      configs.emplace_back(r.format, r.block);
  Choice all{"", 0, std::nullopt};
  std::vector<Row> ok;
  for (const auto& [format, block] : configs) {
    Row combined{"", format, block, "", {}};
    double bits = 0, n = 0;
    std::size_t ran = 0;
    bool meets = true;
    for (const Row& r : rows) {
      if (r.format != format || r.block != block || !r.note.empty()) continue;
      const double e = measure_of(r.m, budget.metric);
      if (ran == 0 || better(measure_of(combined.m, budget.metric), e, budget)) combined.m = r.m;  // the worst input's
      ++ran;
      bits += r.m.bits_per_element * static_cast<double>(r.m.n);
      n += static_cast<double>(r.m.n);
      meets = meets && within(r.m, budget);
    }
    if (ran != inputs.size()) continue;
    ++all.candidates;
    combined.m.bits_per_element = n > 0 ? bits / n : 0.0;
    if (meets) ok.push_back(combined);
  }
  all.best = pick(ok, budget);
  out.push_back(std::move(all));
  return out;
}

std::string choice_text(const Choice& c, const Budget& b, bool already_quantized) {
  if (!c.best)
    return fmt::format("none of the {} configuration(s) that ran{} meets {}", c.candidates,
                       c.input.empty() ? " on every input" : "", b.text());
  return fmt::format("{} at block {}: {:.4g} bits per element, {} {:.4g}{}{}", c.best->format->name, c.best->block,
                     c.best->m.bits_per_element, b.metric, measure_of(c.best->m, b.metric),
                     c.input.empty() ? " (the worst input's)" : "",
                     already_quantized ? " (but the input looks already quantized in it: see the warning)" : "");
}

}  // namespace lowbit::audit
