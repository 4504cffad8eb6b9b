// libFuzzer target: the metadata text a Nordic PPK2 answers over USB serial (GetMetadata) is
// bytes from a device, and a corrupted answer must never crash the driver. Any bytes either
// give a calibration of finite numbers, with a regulator voltage and mode in range, or an
// InputError of one printable line of bounded length.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "probes/ppk2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ergon::probes::Ppk2Calibration cal = ergon::probes::parse_ppk2_metadata(text);
    for (const auto* a : {&cal.r, &cal.gs, &cal.gi, &cal.ug, &cal.o, &cal.s, &cal.i})
      for (const double v : *a)
        if (!std::isfinite(v)) std::abort();
    if (cal.vdd_mv < 800 || cal.vdd_mv > 5000 || (cal.mode != 1 && cal.mode != 2)) std::abort();
  } catch (const ergon::InputError& e) {
    const std::string_view what(e.what());
    if (what.size() > 300) std::abort();
    for (const char c : what)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
  }
  return 0;
}
