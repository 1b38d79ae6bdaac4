#pragma once
// Text from a file (tensor names, metadata, paths) made safe for a terminal line: control characters
// (newline, escape sequences, ...) and invalid UTF-8 are written as escapes, so a file cannot forge
// a second line, an error message or terminal colours. Valid UTF-8 text and backslashes pass as they are.
#include <string>
#include <string_view>

namespace lowbit {

std::string printable(std::string_view text);

// The same text for a Markdown report, where a file's text must neither end a table cell nor become
// markup (a `|` in a tensor name split its row into more columns; `<script>`, `[link](...)` and
// backticks rendered). Both start from printable(), so a report holds no control byte and no line
// break, and shows a name as a terminal line would.
//
// markdown_code: a complete code span. Inside a code span nothing is markup, so only the two
// characters that would end the span or the table cell are escaped, ` as \x60 and | as \x7C, in
// printable()'s own style (a backslash escape of | inside a code span is taken literally outside a
// table). Names, paths, format and policy names.
std::string markdown_code(std::string_view text);
// markdown_text: running text (a policy's description, a fault message), the characters Markdown
// reads as markup backslash-escaped: \ ` * _ [ ] < > | & ~. For text that never starts a line.
std::string markdown_text(std::string_view text);

}  // namespace lowbit
