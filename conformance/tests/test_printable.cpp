// Text from files reaches the terminal escaped: no forged lines, no escape sequences.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "lowbit/printable.hpp"
#include "markdown_table.hpp"

using lowbit::printable;
using lowbit::test::markdown_columns;

TEST_CASE("control characters and invalid UTF-8 are escaped; text and valid UTF-8 pass") {
  CHECK(printable("exp_avg.codes.next") == "exp_avg.codes.next");
  CHECK(printable("a\nlowbit: error: forged") == "a\\nlowbit: error: forged");
  CHECK(printable("x\x1b[31mRED") == "x\\x1B[31mRED");
  CHECK(printable(std::string("nul\0here", 8)) == "nul\\x00here");
  CHECK(printable("tab\there\rcr\x7f") == "tab\\there\\rcr\\x7F");
  CHECK(printable("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(printable("\xC2\x9B" "31m") == "\\xC2\\x9B31m");  // C1 CSI: some terminals take it as ESC [
  CHECK(printable("\xC0\xAF") == "\\xC0\\xAF");           // overlong '/'
  CHECK(printable("\xE2\x82") == "\\xE2\\x82");           // truncated
  CHECK(printable("back\\slash") == "back\\slash");
}

TEST_CASE("markdown_code: a code span that no name can end or break out of; markdown_text: markup escaped") {
  using lowbit::markdown_code;
  using lowbit::markdown_text;
  CHECK(markdown_code("exp_avg.codes") == "`exp_avg.codes`");
  CHECK(markdown_code("a|b") == "`a\\x7Cb`");
  CHECK(markdown_code("x`y``z") == "`x\\x60y\\x60\\x60z`");
  CHECK(markdown_code("<script>alert(1)</script>") == "`<script>alert(1)</script>`");  // text inside a span
  CHECK(markdown_code("two\nlines\x1b[31m") == "`two\\nlines\\x1B[31m`");
  CHECK(markdown_code("") == "` `");
  CHECK(markdown_text("a|b") == "a\\|b");
  CHECK(markdown_text("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)\\>");
  CHECK(markdown_text("*bold* _em_ [l](u) ~s~ &lt; `c` back\\slash") ==
        "\\*bold\\* \\_em\\_ \\[l\\](u) \\~s\\~ \\&lt; \\`c\\` back\\\\slash");
  CHECK(markdown_text("line\nbreak\x1b") == "line\\\\nbreak\\\\x1B");

  // In a table row: one cell whatever the text, no byte below 0x20
  const std::string hostile = "a|b`|`c\\|d\n| forged | row |\r\x1b[2J<script>x</script>";
  for (const std::string& cell : {markdown_code(hostile), markdown_text(hostile)}) {
    CAPTURE(cell);
    const std::string row = "| " + cell + " | 2 |";
    CHECK(markdown_columns(row) == 2);
    CHECK(std::none_of(row.begin(), row.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }));
  }
  CHECK(markdown_columns("| a | b \\| c | d \\\\| e |") == 4);  // the counter itself: \| joins, \\| splits
}
