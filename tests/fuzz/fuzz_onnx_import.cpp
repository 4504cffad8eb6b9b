// libFuzzer target: any bytes given as an ONNX model either import into a well-formed forward
// graph or are refused with an InputError; nothing else escapes, nothing crashes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "planner/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ergon::planner::ForwardGraph g = ergon::planner::import_onnx_bytes(bytes, "fuzz.onnx");
    if (g.ops.empty()) std::abort();
    for (std::size_t i = 0; i < g.ops.size(); ++i)
      for (int in : g.ops[i].inputs)
        if (in != ergon::planner::kGraphInput && (in < 0 || in >= static_cast<int>(i))) std::abort();
  } catch (const ergon::InputError&) {
  }
  return 0;
}
