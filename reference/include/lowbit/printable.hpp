#pragma once
// Text from a file (tensor names, metadata, paths) made safe for a terminal line: control characters
// (newline, escape sequences, ...) and invalid UTF-8 are written as escapes, so a file cannot forge
// a second line, an error message or terminal colours. Valid UTF-8 text and backslashes pass as they are.
#include <string>
#include <string_view>

namespace lowbit {

std::string printable(std::string_view text);

}  // namespace lowbit
