#pragma once

// Text from outside (a device's answer, a file, a command line) shown in a message: one
// printable line whatever the bytes were, and short.

#include <cstddef>
#include <string>
#include <string_view>

namespace ergon {

/// `text` with control and non-ASCII bytes written as \xNN, cut with "..." once it has
/// `max_chars` characters (a file pasted where a name was expected).
inline std::string printable(std::string_view text, std::size_t max_chars = 200) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::size_t used = 0;
  for (; used < text.size() && out.size() < max_chars; ++used) {
    const auto u = static_cast<unsigned char>(text[used]);
    if (u >= 0x20 && u < 0x7f) {
      out += text[used];
    } else {
      out += {'\\', 'x', kHex[u >> 4], kHex[u & 15]};
    }
  }
  return used < text.size() ? out + "..." : out;
}

}  // namespace ergon
