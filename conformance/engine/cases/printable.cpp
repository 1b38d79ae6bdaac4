#include "lowbit/printable.hpp"

#include <fmt/format.h>

#include "lowbit/utf8.hpp"

namespace lowbit {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x20 && b < 0x7F) {
      out += text[i++];
    } else if (b == '\n') {
      out += "\\n", ++i;
    } else if (b == '\t') {
      out += "\\t", ++i;
    } else if (b == '\r') {
      out += "\\r", ++i;
    } else if (const std::size_t len = b >= 0x80 ? utf8_sequence_length(text, i) : 0;
               len != 0 && !(b == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0)) {  // C1 controls escaped too
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += fmt::format("\\x{:02X}", b);
      ++i;
    }
  }
  return out;
}

std::string markdown_code(std::string_view text) {
  std::string out = "`";
  for (char c : printable(text)) {
    if (c == '`')
      out += "\\x60";
    else if (c == '|')
      out += "\\x7C";
    else
      out += c;
  }
  // An empty span would be two backticks, which Markdown shows as text; a space keeps it a span.
  return out + (out.size() == 1 ? " `" : "`");
}

std::string markdown_text(std::string_view text) {
  std::string out;
  for (char c : printable(text)) {
    if (std::string_view("\\`*_[]<>|&~").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace lowbit
