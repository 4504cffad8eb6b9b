// libFuzzer target: any text given as a training-graph JSON file either reads into a graph that
// validates or is refused with an InputError; nothing else escapes, nothing crashes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "planner/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ergon::planner::TrainingGraph g;
  try {
    g = ergon::planner::parse_graph_json(text, "fuzz.json");
  } catch (const ergon::InputError&) {
    return 0;
  }
  try {
    g.validate();  // what was accepted must be well formed
  } catch (const ergon::InputError&) {
    std::abort();
  }
  return 0;
}
