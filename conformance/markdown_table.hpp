#pragma once
// How a Markdown renderer splits a report's table rows, for the tests of report escaping.
#include <cstddef>
#include <string_view>

namespace lowbit::test {

// The cells of a table row "| a | b |" as a renderer sees them: the row splits on every | that an
// odd run of backslashes does not escape.
inline std::size_t markdown_columns(std::string_view row) {
  std::size_t pipes = 0, backslashes = 0;
  for (char c : row) {
    if (c == '|' && backslashes % 2 == 0) ++pipes;
    backslashes = c == '\\' ? backslashes + 1 : 0;
  }
  return pipes == 0 ? 0 : pipes - 1;
}

}  // namespace lowbit::test
