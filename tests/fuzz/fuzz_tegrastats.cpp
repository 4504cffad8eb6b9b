// libFuzzer target: any bytes, fed in arbitrary pieces, must never crash the tegrastats
// parser; every line it accepts has at least one rail, a total that indexes one, and values
// a monitor could report.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "probes/tegrastats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  ergon::probes::TegrastatsStream stream;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  // Split at a point the input chooses: partial lines must wait for their end.
  const std::size_t cut = size > 0 ? data[0] % (size + 1) : 0;
  auto check = [](const ergon::probes::TegrastatsLine& line) {
    if (line.rails.empty()) std::abort();
    if (line.total >= static_cast<int>(line.rails.size())) std::abort();
    for (const auto& r : line.rails)
      if (r.name.empty() || r.now_mw > 999'999'999U || r.average_mw.value_or(0) > 999'999'999U) std::abort();
  };
  stream.feed(all.substr(0, cut), check);
  stream.feed(all.substr(cut), check);
  if (stream.malformed() > stream.lines()) std::abort();
  return 0;
}
