// libFuzzer target: what users type or write. Any bytes, as a --probe spec and as a board
// descriptor file, either parse or are refused with an InputError of one printable line;
// nothing else is thrown and nothing crashes. A spec that parses names a kind and a 7-bit
// address; a descriptor that parses has a name, RAM and a first power mode.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "devices/board_file.h"
#include "probes/probe.h"

namespace {

void check_message(std::string_view what) {
  if (what.empty() || what.size() > 2000) std::abort();
  for (const char c : what)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto spec = ergon::probes::parse_probe_spec(text);
    if (spec.kind.empty() || spec.address < 0x03 || spec.address > 0x77) std::abort();
  } catch (const ergon::InputError& e) {
    check_message(e.what());
  }
  try {
    const auto board = ergon::devices::parse_board_descriptor(text, "fuzz.json");
    if (board.name.empty() || board.ram_bytes == 0 || board.power_modes.empty()) std::abort();
  } catch (const ergon::InputError& e) {
    check_message(e.what());
  }
  return 0;
}
