#include "planner/graph_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/text.h"

namespace ergon::planner {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxQuotedChars = 120;  // of JSON text quoted in an error message
constexpr int kMaxJsonDepth = 64;

/// Quoted JSON text: one printable line (common/text.h), at most kMaxQuotedChars.
std::string printable(std::string_view s) { return ergon::printable(s, kMaxQuotedChars); }

/// Reports problems as "<source>: <where> <what>".
class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(source_ + ": " + problem);
  }

  const json& field(const json& object, const std::string& key, const std::string& where) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(where + "missing field \"" + key + "\"");
    return *it;
  }

  std::string string_field(const json& object, const std::string& key,
                           const std::string& where) const {
    const json& v = field(object, key, where);
    if (!v.is_string()) fail(where + key + " must be a string, not " + v.type_name());
    return v.get<std::string>();
  }

  uint64_t count_field(const json& object, const std::string& key, const std::string& where) const {
    const json& v = field(object, key, where);
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) fail(where + key + " is negative");
    fail(where + key + " must be a non-negative integer, not " +
         (v.is_number_float() ? std::string("a fraction") : std::string(v.type_name())));
  }

  double cost_field(const json& object, const std::string& key, const std::string& where) const {
    const json& v = field(object, key, where);
    if (!v.is_number()) fail(where + key + " must be a number, not " + v.type_name());
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(where + key + " is not finite");
    if (d < 0) fail(where + key + " is negative");
    return d;
  }

 private:
  const std::string& source_;
};

NodePhase parse_phase(const Reader& r, const std::string& text, const std::string& where) {
  if (text == "forward") return NodePhase::kForward;
  if (text == "loss") return NodePhase::kLoss;
  if (text == "backward") return NodePhase::kBackward;
  r.fail(where + "phase is \"" + printable(text) + "\", expected forward, loss or backward");
}

std::string_view phase_name(NodePhase phase) {
  switch (phase) {
    case NodePhase::kForward:
      return "forward";
    case NodePhase::kLoss:
      return "loss";
    case NodePhase::kBackward:
      return "backward";
  }
  return "forward";
}

/// Node ids and edge ends: integers that fit an int (the graph's node index type).
int parse_id(const Reader& r, const json& v, const std::string& what) {
  if (v.is_number_integer()) {
    const int64_t id = v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT_MAX))
      r.fail(what + " is out of range");
    if (id < 0) r.fail(what + " is negative");
    if (id > INT_MAX) r.fail(what + " is out of range");
    return static_cast<int>(id);
  }
  r.fail(what + " must be an integer node id, not " +
         (v.is_number_float() ? std::string("a fraction") : std::string(v.type_name())));
}

TrainingNode parse_node(const Reader& r, const json& v, std::size_t index) {
  const std::string where = "nodes[" + std::to_string(index) + "]";
  if (!v.is_object()) r.fail(where + " must be an object, not " + v.type_name());
  const std::string at = where + ".";
  TrainingNode n;
  n.id = parse_id(r, r.field(v, "id", where + ": "), at + "id");
  n.name = r.string_field(v, "name", at);
  const std::string ctx = where + " (" + printable(n.name) + "): ";
  n.op = r.string_field(v, "op", ctx);
  n.phase = parse_phase(r, r.string_field(v, "phase", ctx), ctx);
  n.time_s = r.cost_field(v, "time_s", ctx);
  n.energy_j = r.cost_field(v, "energy_j", ctx);
  n.output_bytes = r.count_field(v, "output_bytes", ctx);
  n.pagein_time_s = r.cost_field(v, "pagein_time_s", ctx);
  n.pagein_energy_j = r.cost_field(v, "pagein_energy_j", ctx);
  n.pageout_time_s = r.cost_field(v, "pageout_time_s", ctx);
  n.pageout_energy_j = r.cost_field(v, "pageout_energy_j", ctx);
  return n;
}

std::pair<int, int> parse_edge(const Reader& r, const json& v, std::size_t index) {
  const std::string where = "edges[" + std::to_string(index) + "]";
  if (!v.is_array() || v.size() != 2) r.fail(where + " must be a [from, to] pair of node ids");
  return {parse_id(r, v[0], where + "[0]"), parse_id(r, v[1], where + "[1]")};
}

/// "invalid json at line 3, column 7: syntax error while parsing ..." from nlohmann's error.
[[noreturn]] void fail_syntax(const Reader& r, std::string_view text, const json::parse_error& e) {
  // nlohmann's message is "[json.exception.parse_error.N] parse error at line L, column C: X";
  // keep X and compute the position from the byte offset (1-based: the last byte read).
  std::string detail = e.what();
  const auto column = detail.find("column ");
  const auto colon = detail.find(": ", column == std::string::npos ? 0 : column);
  if (colon != std::string::npos) detail = detail.substr(colon + 2);
  std::size_t line = 1;
  std::size_t col = 0;
  const std::size_t end = std::min<std::size_t>(e.byte, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 0;
    } else {
      ++col;
    }
  }
  r.fail("invalid json at line " + std::to_string(line) + ", column " + std::to_string(col) + ": " +
         printable(detail));
}

/// A JSON scalar as compact text: strings escaped (invalid UTF-8 replaced), doubles in the
/// shortest form that reads back to the same bits.
std::string scalar(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

/// strerror, lower-cased to fit an error message ("no such file or directory").
std::string errno_text() {
  std::string text = std::strerror(errno);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace

namespace {

/// "12 nodes and 14 edges read; ignored fields other tools added: color (top level), flops
/// (in 12 nodes)", or "...; nothing ignored".
std::string ignored_fields_note(const json& doc, const TrainingGraph& g) {
  static const std::set<std::string> top{"format", "name", "fixed_bytes", "idle_power_w", "nodes", "edges"};
  static const std::set<std::string> node{"id", "name", "op", "phase", "time_s", "energy_j", "output_bytes",
                                          "pagein_time_s", "pagein_energy_j", "pageout_time_s",
                                          "pageout_energy_j"};
  std::vector<std::string> ignored;
  for (const auto& [key, value] : doc.items())
    if (top.count(key) == 0) ignored.push_back("\"" + printable(key) + "\" (top level)");
  std::map<std::string, int> in_nodes;
  for (const auto& n : doc.at("nodes"))
    if (n.is_object())
      for (const auto& [key, value] : n.items())
        if (node.count(key) == 0) ++in_nodes[key];
  for (const auto& [key, count] : in_nodes)
    ignored.push_back("\"" + printable(key) + "\" (in " + std::to_string(count) + " nodes)");
  std::string out = std::to_string(g.nodes.size()) + " nodes and " + std::to_string(g.edges.size()) +
                    " edges read; ";
  if (ignored.empty()) return out + "nothing ignored";
  out += "ignored fields Ergon does not use: ";
  for (std::size_t k = 0; k < ignored.size() && k < 8; ++k) out += (k == 0 ? "" : ", ") + ignored[k];
  if (ignored.size() > 8) out += " and " + std::to_string(ignored.size() - 8) + " more";
  return out;
}

}  // namespace

TrainingGraph parse_graph_json(std::string_view text, const std::string& source) {
  const Reader r(source);
  json doc;
  try {
    // A graph nests a few levels; a file nested thousands deep (corrupt, or made to) would
    // exhaust the stack in what reads it after the parser.
    doc = json::parse(text.begin(), text.end(), [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) r.fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels: not a training graph");
      return true;
    });
  } catch (const json::parse_error& e) {
    fail_syntax(r, text, e);
  } catch (const json::exception& e) {
    // Numbers too large for a double land here ("number overflow parsing ...").
    std::string detail = e.what();
    const auto bracket = detail.find("] ");
    if (bracket != std::string::npos) detail = detail.substr(bracket + 2);
    r.fail("invalid json: " + printable(detail));
  }
  if (!doc.is_object())
    r.fail("not an ergon.training-graph/1 file: the top level is not an object");
  const auto format = doc.find("format");
  if (format == doc.end()) r.fail("missing field \"format\": not an ergon.training-graph/1 file");
  if (!format->is_string() || format->get<std::string>() != kGraphJsonFormat)
    r.fail("format is " + printable(scalar(*format)) + ", expected \"" +
           std::string(kGraphJsonFormat) + "\"");

  TrainingGraph g;
  g.name = r.string_field(doc, "name", "");
  g.fixed_bytes = r.count_field(doc, "fixed_bytes", "");
  // Optional (later than the first files of this format): 0 when absent.
  if (doc.contains("idle_power_w")) g.idle_power_w = r.cost_field(doc, "idle_power_w", "");
  const json& nodes = r.field(doc, "nodes", "");
  if (!nodes.is_array()) r.fail(std::string("nodes must be an array, not ") + nodes.type_name());
  g.nodes.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) g.nodes.push_back(parse_node(r, nodes[i], i));
  const json& edges = r.field(doc, "edges", "");
  if (!edges.is_array()) r.fail(std::string("edges must be an array, not ") + edges.type_name());
  g.edges.reserve(edges.size());
  for (std::size_t i = 0; i < edges.size(); ++i) g.edges.push_back(parse_edge(r, edges[i], i));

  try {
    g.validate();
  } catch (const InputError& e) {
    r.fail(e.what());
  }
  g.import_note = ignored_fields_note(doc, g);
  return g;
}

TrainingGraph read_graph_json(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError("cannot read graph file " + path.string() + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read graph file " + path.string() + ": " + errno_text());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError("cannot read graph file " + path.string() + ": read failed");
  return parse_graph_json(text.str(), path.string());
}

std::string to_graph_json(const TrainingGraph& graph) {
  graph.validate();
  std::string out = "{\n";
  out += "  \"format\": " + scalar(std::string(kGraphJsonFormat)) + ",\n";
  out += "  \"name\": " + scalar(graph.name) + ",\n";
  out += "  \"fixed_bytes\": " + scalar(graph.fixed_bytes) + ",\n";
  if (graph.idle_power_w != 0) out += "  \"idle_power_w\": " + scalar(graph.idle_power_w) + ",\n";
  out += "  \"nodes\": [";
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const TrainingNode& n = graph.nodes[i];
    out += i == 0 ? "\n" : ",\n";
    out += "    {\"id\": " + scalar(n.id);
    out += ", \"name\": " + scalar(n.name);
    out += ", \"op\": " + scalar(n.op);
    out += ", \"phase\": " + scalar(std::string(phase_name(n.phase)));
    out += ", \"time_s\": " + scalar(n.time_s);
    out += ", \"energy_j\": " + scalar(n.energy_j);
    out += ", \"output_bytes\": " + scalar(n.output_bytes);
    out += ", \"pagein_time_s\": " + scalar(n.pagein_time_s);
    out += ", \"pagein_energy_j\": " + scalar(n.pagein_energy_j);
    out += ", \"pageout_time_s\": " + scalar(n.pageout_time_s);
    out += ", \"pageout_energy_j\": " + scalar(n.pageout_energy_j) + "}";
  }
  out += graph.nodes.empty() ? "],\n" : "\n  ],\n";
  out += "  \"edges\": [";
  for (std::size_t i = 0; i < graph.edges.size(); ++i) {
    out += i == 0 ? "\n" : ",\n";
    out += "    [" + std::to_string(graph.edges[i].first) + ", " +
           std::to_string(graph.edges[i].second) + "]";
  }
  out += graph.edges.empty() ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

void write_graph_json(const TrainingGraph& graph, const std::filesystem::path& path) {
  const std::string text = to_graph_json(graph);
  static std::atomic<unsigned> counter{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const std::string what = "cannot write graph file " + path.string() + ": ";

  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw InputError(what + errno_text());
  auto fail = [&](const std::string& reason) {
    ::close(fd);
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw InputError(what + reason);
  };
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno_text());
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail(errno_text());
  if (::close(fd) != 0) {
    const std::string reason = errno_text();
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw InputError(what + reason);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    errno = ec.value();
    throw InputError(what + errno_text());
  }
}

}  // namespace ergon::planner
