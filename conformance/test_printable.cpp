// Text from files reaches the terminal escaped: no forged lines, no escape sequences.
#include <doctest/doctest.h>

#include <string>

#include "lowbit/printable.hpp"

using lowbit::printable;

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
