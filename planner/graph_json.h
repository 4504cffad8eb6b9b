#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "planner/graph.h"

namespace ergon::planner {

/// The format string every `ergon.training-graph/1` file carries in its "format" field.
inline constexpr std::string_view kGraphJsonFormat = "ergon.training-graph/1";

/// Reads an `ergon.training-graph/1` document:
///
///   {"format": "ergon.training-graph/1", "name": "...", "fixed_bytes": 123,
///    "nodes": [{"id": 0, "name": "...", "op": "...", "phase": "forward|loss|backward",
///               "time_s": 0.1, "energy_j": 0.2, "output_bytes": 4096,
///               "pagein_time_s": 0.0, "pagein_energy_j": 0.0,
///               "pageout_time_s": 0.0, "pageout_energy_j": 0.0}, ...],
///    "edges": [[from, to], ...]}
///
/// Every field shown is required; byte counts and ids are non-negative integers, times and
/// energies non-negative finite numbers. Fields not listed (anywhere) are ignored, so other
/// tools may annotate files. The graph is checked as TrainingGraph::validate does (ids 0, 1, 2,
/// ... in topological order, edges from < to, no dangling or duplicate edges).
/// Throws InputError "<source>: <problem>" for bad JSON syntax (with line and column), a
/// wrong or missing format, a missing or mistyped field, or a malformed graph.
TrainingGraph parse_graph_json(std::string_view text, const std::string& source);

/// parse_graph_json of a file's contents, with the path as the source. Throws InputError when
/// the file cannot be read.
TrainingGraph read_graph_json(const std::filesystem::path& path);

/// The document for a graph: keys in the order shown above, one node and one edge per line.
/// Doubles are written so they read back bit-identical. Throws InputError if the graph does not
/// validate (so nothing unreadable is ever produced).
std::string to_graph_json(const TrainingGraph& graph);

/// Writes to_graph_json(graph) to a temporary file beside `path`, flushes it to disk and
/// renames it over `path`: readers see the old file or the whole new one, never part of it.
/// Throws InputError when the file cannot be written (the temporary file is removed).
void write_graph_json(const TrainingGraph& graph, const std::filesystem::path& path);

}  // namespace ergon::planner
