#include "planner/graph_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace ergon::planner {
namespace {

namespace fs = std::filesystem;

fs::path graphs_dir() { return fs::path(ERGON_TEST_DATA_DIR) / "graphs"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_identical(const TrainingGraph& a, const TrainingGraph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.fixed_bytes, b.fixed_bytes);
  EXPECT_EQ(a.edges, b.edges);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const TrainingNode& x = a.nodes[i];
    const TrainingNode& y = b.nodes[i];
    SCOPED_TRACE("node " + std::to_string(i));
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.phase, y.phase);
    EXPECT_EQ(x.output_bytes, y.output_bytes);
    EXPECT_TRUE(same_bits(x.time_s, y.time_s)) << x.time_s << " vs " << y.time_s;
    EXPECT_TRUE(same_bits(x.energy_j, y.energy_j));
    EXPECT_TRUE(same_bits(x.pagein_time_s, y.pagein_time_s));
    EXPECT_TRUE(same_bits(x.pagein_energy_j, y.pagein_energy_j));
    EXPECT_TRUE(same_bits(x.pageout_time_s, y.pageout_time_s));
    EXPECT_TRUE(same_bits(x.pageout_energy_j, y.pageout_energy_j));
  }
}

/// The error message of parsing `text`, or "" if it parsed.
std::string parse_error(const std::string& text) {
  try {
    parse_graph_json(text, "g.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

/// One line, lower-case after the source, no trailing period: fit for `ergon: <message>`.
void expect_clean_message(const std::string& message) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  ASSERT_FALSE(message.empty());
  EXPECT_NE(message.back(), '.') << message;
}

TEST(GraphJson, ReadsTheSixNodeChain) {
  const TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  EXPECT_EQ(g.name, "chain6");
  EXPECT_EQ(g.fixed_bytes, 3200u);
  ASSERT_EQ(g.size(), 6);
  EXPECT_EQ(g.nodes[0].name, "fc1");
  EXPECT_EQ(g.nodes[0].op, "linear");
  EXPECT_EQ(g.nodes[0].phase, NodePhase::kForward);
  EXPECT_EQ(g.nodes[3].phase, NodePhase::kLoss);
  EXPECT_EQ(g.nodes[5].phase, NodePhase::kBackward);
  EXPECT_EQ(g.nodes[2].time_s, 0.30000000000000004);
  EXPECT_EQ(g.nodes[2].pagein_time_s, 2e-6);
  EXPECT_EQ(g.nodes[0].output_bytes, 4096u);
  const std::vector<std::pair<int, int>> edges{{0, 1}, {1, 2}, {2, 3}, {3, 4},
                                               {4, 5}, {1, 4}, {1, 5}};
  EXPECT_EQ(g.edges, edges);
}

TEST(GraphJson, IgnoresFieldsItDoesNotKnow) {
  // chain6.json has a top-level "comment" and a node with "flops".
  const std::string text = slurp(graphs_dir() / "chain6.json");
  ASSERT_NE(text.find("\"comment\""), std::string::npos);
  ASSERT_NE(text.find("\"flops\""), std::string::npos);
  EXPECT_EQ(parse_error(text), "");
}

TEST(GraphJson, SaysInOneLineWhichFieldsItIgnored) {
  const TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  EXPECT_EQ(g.import_note,
            "6 nodes and 7 edges read; ignored fields Ergon does not use: \"comment\" (top level), "
            "\"flops\" (in 1 nodes)");
  const TrainingGraph plain = parse_graph_json(to_graph_json(g), "written.json");
  EXPECT_EQ(plain.import_note, "6 nodes and 7 edges read; nothing ignored");
}

TEST(GraphJson, RoundTripsTheChainExactly) {
  const TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  const std::string text = to_graph_json(g);
  const TrainingGraph back = parse_graph_json(text, "round trip");
  expect_identical(g, back);
  EXPECT_EQ(to_graph_json(back), text) << "the writer's output is stable";
}

TEST(GraphJson, WritesKeysInTheDocumentedOrder) {
  const std::string text = to_graph_json(read_graph_json(graphs_dir() / "chain6.json"));
  std::size_t last = 0;
  for (const char* key :
       {"\"format\"", "\"name\"", "\"fixed_bytes\"", "\"nodes\"", "\"id\"", "\"op\"", "\"phase\"",
        "\"time_s\"", "\"energy_j\"", "\"output_bytes\"", "\"pagein_time_s\"",
        "\"pagein_energy_j\"", "\"pageout_time_s\"", "\"pageout_energy_j\"", "\"edges\""}) {
    const std::size_t at = text.find(key, last);
    ASSERT_NE(at, std::string::npos) << key;
    last = at;
  }
  EXPECT_EQ(text.rfind("{\n  \"format\": \"ergon.training-graph/1\",", 0), 0u);
  EXPECT_NE(text.find("\n    [0, 1],\n"), std::string::npos) << "one edge per line";
}

TEST(GraphJson, RoundTripsAwkwardNumbersBitForBit) {
  TrainingGraph g;
  g.name = "awkward \"quoted\" \\ name\twith tab";
  g.fixed_bytes = std::numeric_limits<uint64_t>::max();
  const std::vector<double> awkward{0.1 + 0.2, 1.0 / 3.0, 5e-324, DBL_MIN,     DBL_MAX,
                                    -0.0,      1e-300,    1e300,  123456789.0, 2.0 / 3.0 * 1e-7,
                                    0.0,       1.0};
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200; ++i) {
    TrainingNode n;
    n.id = i;
    n.name = "node " + std::to_string(i) + " \xc3\xa9";  // UTF-8 survives
    n.op = i % 2 == 0 ? "conv2d" : "relu";
    n.phase = i == 100 ? NodePhase::kLoss : (i < 100 ? NodePhase::kForward : NodePhase::kBackward);
    auto value = [&](int k) {
      if (k < static_cast<int>(awkward.size()) && i < static_cast<int>(awkward.size()))
        return awkward[static_cast<std::size_t>((i + k) % static_cast<int>(awkward.size()))];
      // Random finite non-negative doubles across the whole exponent range.
      for (;;) {
        uint64_t bits = rng() & ~(uint64_t{1} << 63);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        if (std::isfinite(d)) return d;
      }
    };
    n.time_s = value(0);
    n.energy_j = value(1);
    n.pagein_time_s = value(2);
    n.pagein_energy_j = value(3);
    n.pageout_time_s = value(4);
    n.pageout_energy_j = value(5);
    n.output_bytes = rng();
    g.nodes.push_back(n);
    if (i > 0) g.edges.emplace_back(i - 1, i);
    if (i > 10) g.edges.emplace_back(i - 11, i);
  }
  const TrainingGraph back = parse_graph_json(to_graph_json(g), "awkward");
  expect_identical(g, back);
}

class GraphFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ergon_graph_json_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  [[nodiscard]] std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    return names;
  }

  fs::path dir_;
};

TEST_F(GraphFile, WriteThenReadGivesTheSameGraphAndLeavesNoTemporaryFile) {
  const TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  const fs::path out = dir_ / "plan.json";
  write_graph_json(g, out);
  expect_identical(g, read_graph_json(out));
  EXPECT_EQ(files(), std::vector<std::string>{"plan.json"});
}

TEST_F(GraphFile, WriteReplacesAnExistingFileWhole) {
  const fs::path out = dir_ / "plan.json";
  std::ofstream(out) << std::string(100000, 'x');
  const TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  write_graph_json(g, out);
  EXPECT_EQ(slurp(out), to_graph_json(g));
  EXPECT_EQ(files(), std::vector<std::string>{"plan.json"});
}

TEST_F(GraphFile, WriteToAMissingFolderFailsAndLeavesNothing) {
  const TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  const fs::path out = dir_ / "no" / "such" / "plan.json";
  try {
    write_graph_json(g, out);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write graph file " + out.string() + ": no such file or directory");
  }
  EXPECT_TRUE(files().empty());
}

TEST_F(GraphFile, WriteOfAnInvalidGraphFailsAndLeavesNothing) {
  TrainingGraph g = read_graph_json(graphs_dir() / "chain6.json");
  g.nodes[2].energy_j = -1;
  EXPECT_THROW(write_graph_json(g, dir_ / "plan.json"), InputError);
  EXPECT_TRUE(files().empty());
}

TEST(GraphJson, MissingFileNamesThePath) {
  const fs::path path = graphs_dir() / "does_not_exist.json";
  try {
    read_graph_json(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read graph file " + path.string() + ": no such file or directory");
  }
}

TEST(GraphJson, ADirectoryIsNotAGraphFile) {
  EXPECT_THROW(read_graph_json(graphs_dir()), InputError);
}

struct BadFile {
  const char* file;
  const char* message;  // after "<path>: "
};

class MalformedFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(MalformedFile, GivesItsMessage) {
  const fs::path path = graphs_dir() / GetParam().file;
  try {
    read_graph_json(path);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    expect_clean_message(message);
    EXPECT_EQ(message.rfind(path.string() + ": " + GetParam().message, 0), 0u) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    GraphJson, MalformedFile,
    ::testing::Values(
        BadFile{"bad_cycle.json",
                "edge [2, 0] goes backwards: ids must be topologically ordered (a cycle"},
        BadFile{"bad_missing_field.json", "nodes[1] (loss): missing field \"time_s\""},
        BadFile{"bad_syntax.json", "invalid json at line 7, column 3: syntax error"}));

/// A small valid document, mutated by replacing one substring.
const std::string kSmall = R"({
  "format": "ergon.training-graph/1",
  "name": "small",
  "fixed_bytes": 16,
  "nodes": [
    {"id": 0, "name": "a", "op": "relu", "phase": "forward", "time_s": 1, "energy_j": 2, "output_bytes": 8, "pagein_time_s": 0, "pagein_energy_j": 0, "pageout_time_s": 0, "pageout_energy_j": 0},
    {"id": 1, "name": "loss", "op": "cross_entropy", "phase": "loss", "time_s": 1, "energy_j": 2, "output_bytes": 8, "pagein_time_s": 0, "pagein_energy_j": 0, "pageout_time_s": 0, "pageout_energy_j": 0},
    {"id": 2, "name": "a.backward", "op": "relu", "phase": "backward", "time_s": 1, "energy_j": 2, "output_bytes": 8, "pagein_time_s": 0, "pagein_energy_j": 0, "pageout_time_s": 0, "pageout_energy_j": 0}
  ],
  "edges": [[0, 1], [1, 2], [0, 2]]
})";

struct Mutation {
  const char* what;
  const char* from;  // replaced once in kSmall ("" replaces the whole document)
  const char* to;
  const char* message;  // after "g.json: "
};

class MalformedText : public ::testing::TestWithParam<Mutation> {};

TEST_P(MalformedText, GivesItsMessage) {
  const Mutation& m = GetParam();
  std::string text = kSmall;
  if (std::string(m.from).empty()) {
    text = m.to;
  } else {
    const std::size_t at = text.find(m.from);
    ASSERT_NE(at, std::string::npos) << m.from;
    text.replace(at, std::strlen(m.from), m.to);
  }
  const std::string message = parse_error(text);
  expect_clean_message(message);
  EXPECT_EQ(message, std::string("g.json: ") + m.message) << m.what;
}

INSTANTIATE_TEST_SUITE_P(
    GraphJson, MalformedText,
    ::testing::Values(
        Mutation{"not an object", "", "[1, 2]",
                 "not an ergon.training-graph/1 file: the top level is not an object"},
        Mutation{"empty", "", "",
                 "invalid json at line 1, column 0: syntax error while parsing "
                 "value - unexpected end of input; expected '[', '{', or a "
                 "literal"},
        Mutation{"no format", R"("format": "ergon.training-graph/1",)", "",
                 "missing field \"format\": not an ergon.training-graph/1 file"},
        Mutation{"other format", "ergon.training-graph/1", "ergon.training-graph/2",
                 "format is \"ergon.training-graph/2\", expected \"ergon.training-graph/1\""},
        Mutation{"format not a string", R"("ergon.training-graph/1")", "1",
                 "format is 1, expected \"ergon.training-graph/1\""},
        Mutation{"no name", R"("name": "small",)", "", "missing field \"name\""},
        Mutation{"name not a string", R"("name": "small")", R"("name": 3)",
                 "name must be a string, not number"},
        Mutation{"negative fixed bytes", "16", "-16", "fixed_bytes is negative"},
        Mutation{"fractional fixed bytes", "16", "16.5",
                 "fixed_bytes must be a non-negative integer, not a fraction"},
        Mutation{"unclosed object", R"("nodes": [)", R"("nodes": {"x": [)",
                 "invalid json at line 11, column 1: syntax error while parsing object - "
                 "unexpected end of input; expected '}'"},
        Mutation{"nodes an object", R"("nodes": [)", R"("nodes": 1, "x": [)",
                 "nodes must be an array, not number"},
        Mutation{"no nodes", R"("nodes": [)", R"("x": [)", "missing field \"nodes\""},
        Mutation{"node not an object", R"({"id": 0, "name": "a")", R"(7, {"id": 0, "name": "a")",
                 "nodes[0] must be an object, not number"},
        Mutation{"node without id", R"({"id": 0, )", "{", "nodes[0]: missing field \"id\""},
        Mutation{"id a string", R"("id": 0)", R"("id": "0")",
                 "nodes[0].id must be an integer node id, not string"},
        Mutation{"id negative", R"("id": 0)", R"("id": -1)", "nodes[0].id is negative"},
        Mutation{"id huge", R"("id": 0)", R"("id": 99999999999)", "nodes[0].id is out of range"},
        Mutation{"ids out of order", R"("id": 1)", R"("id": 2)",
                 "node 1 (loss) has id 2: ids must be 0, 1, 2, ... in topological order"},
        Mutation{"bad phase", R"("phase": "loss")", R"("phase": "Loss")",
                 "nodes[1] (loss): phase is \"Loss\", expected forward, loss or backward"},
        Mutation{"time as a string", R"("time_s": 1)", R"("time_s": "1")",
                 "nodes[0] (a): time_s must be a number, not string"},
        Mutation{"energy null", R"("energy_j": 2)", R"("energy_j": null)",
                 "nodes[0] (a): energy_j must be a number, not null"},
        Mutation{"negative cost", R"("pageout_energy_j": 0})", R"("pageout_energy_j": -0.5})",
                 "nodes[0] (a): pageout_energy_j is negative"},
        Mutation{"bytes a fraction", R"("output_bytes": 8)", R"("output_bytes": 8.5)",
                 "nodes[0] (a): output_bytes must be a non-negative integer, not a fraction"},
        Mutation{"bytes negative", R"("output_bytes": 8)", R"("output_bytes": -8)",
                 "nodes[0] (a): output_bytes is negative"},
        Mutation{"number overflow", R"("time_s": 1)", R"("time_s": 1e999)",
                 "invalid json: number overflow parsing '1e999'"},
        Mutation{"no edges", R"("edges")", R"("edgez")", "missing field \"edges\""},
        Mutation{"edges not an array", "[[0, 1], [1, 2], [0, 2]]", "{}",
                 "edges must be an array, not object"},
        Mutation{"edge not a pair", "[1, 2]", "[1, 2, 3]",
                 "edges[1] must be a [from, to] pair of node ids"},
        Mutation{"edge end a string", "[1, 2]", "[1, \"2\"]",
                 "edges[1][1] must be an integer node id, not string"},
        Mutation{"backward edge", "[1, 2]", "[2, 1]",
                 "edge [2, 1] goes backwards: ids must be topologically ordered (a cycle, or "
                 "nodes out of order)"},
        Mutation{"self loop", "[1, 2]", "[1, 1]",
                 "edge [1, 1] goes backwards: ids must be topologically ordered (a cycle, or "
                 "nodes out of order)"},
        Mutation{"dangling edge", "[1, 2]", "[1, 7]",
                 "edge [1, 7] names a node that does not exist"},
        Mutation{"duplicate edge", "[0, 2]", "[0, 1]", "edge [0, 1] appears twice"},
        Mutation{"no nodes at all", R"("nodes": [)", R"("nodes": [], "x": [)",
                 "graph 'small' has no nodes"},
        Mutation{"idle power a string", R"("fixed_bytes": 16,)",
                 R"("fixed_bytes": 16, "idle_power_w": "1",)",
                 "idle_power_w must be a number, not string"},
        Mutation{"idle power negative", R"("fixed_bytes": 16,)",
                 R"("fixed_bytes": 16, "idle_power_w": -1,)", "idle_power_w is negative"},
        Mutation{"energy below idle power", R"("fixed_bytes": 16,)",
                 R"("fixed_bytes": 16, "idle_power_w": 3,)",
                 "node 0 (a) costs less energy than idle power over the same time"}));

TEST(GraphJson, AFileNestedThousandsDeepIsRefusedNotACrash) {
  // 200 000 levels crashed ergon plan --graph (the stack, after the parser).
  const std::string deep = "{\"format\": " + std::string(200'000, '[') + std::string(200'000, ']') + "}";
  const std::string message = parse_error(deep);
  expect_clean_message(message);
  EXPECT_EQ(message, "g.json: nested deeper than 64 levels: not a training graph");
}

TEST(GraphJson, IdlePowerIsOptionalAndRoundTrips) {
  EXPECT_EQ(parse_graph_json(kSmall, "g.json").idle_power_w, 0);
  std::string text = kSmall;
  text.replace(text.find(R"("fixed_bytes": 16,)"), 18, R"("fixed_bytes": 16, "idle_power_w": 1.5,)");
  const TrainingGraph g = parse_graph_json(text, "g.json");
  EXPECT_EQ(g.idle_power_w, 1.5);
  const std::string written = to_graph_json(g);
  EXPECT_NE(written.find("\"idle_power_w\": 1.5"), std::string::npos) << written;
  EXPECT_EQ(parse_graph_json(written, "again").idle_power_w, 1.5);
}

TEST(GraphJson, RandomByteEditsEitherParseOrThrowInputError) {
  const std::string valid = slurp(graphs_dir() / "chain6.json");
  ASSERT_FALSE(valid.empty());
  static constexpr char kAlphabet[] = "{}[]\",:0123456789-+.eE \n\\tfnu\x00\xff\xc3";
  const std::string alphabet(kAlphabet, sizeof kAlphabet - 1);  // with the NUL byte
  std::mt19937 rng(20240601);
  int parsed = 0;
  int rejected = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string text = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const std::size_t at = rng() % text.size();
      const char c = rng() % 2 == 0 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
      switch (rng() % 4) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(at, 1, c);
          break;
        case 2:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.resize(at);  // truncated
          break;
      }
    }
    try {
      const TrainingGraph g = parse_graph_json(text, "fuzz.json");
      g.validate();
      (void)parse_graph_json(to_graph_json(g), "fuzz round trip");
      ++parsed;
    } catch (const InputError& e) {
      const std::string message = e.what();
      ASSERT_EQ(message.rfind("fuzz.json: ", 0), 0u) << message;
      ASSERT_EQ(message.find('\n'), std::string::npos) << message;
      ++rejected;
    }
    // Any other exception escapes and fails the test.
  }
  EXPECT_GT(parsed, 0) << "some edits (inside strings, digits) keep the file valid";
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace ergon::planner
