#pragma once
// How a Markdown renderer splits a report's table rows, for the tests of report escaping.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <string>
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

// Checks that every table row of a Markdown text has its header's columns; returns the rows
// (separators too), so a test can also check that no row was forged or lost.
inline std::size_t checked_table_rows(const std::string& md) {
  std::istringstream lines(md);
  std::size_t header = 0, rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '|') {
      header = 0;
    } else if (header == 0) {
      header = markdown_columns(line);
    } else {
      CAPTURE(line);
      CHECK(markdown_columns(line) == header);
      ++rows;
    }
  }
  return rows;
}

// Whether a text holds a control byte other than the newline (a terminal escape, a NUL, DEL).
inline bool has_control_bytes(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7F; });
}

}  // namespace lowbit::test
