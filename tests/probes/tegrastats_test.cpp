#include "probes/tegrastats.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

namespace ergon::probes {
namespace {

std::string read_data(const std::string& name) {
  std::ifstream f(std::string(ERGON_TEST_DATA_DIR) + "/tegrastats/" + name);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<TegrastatsLine> parse_all(const std::string& text, TegrastatsStream& stream) {
  std::vector<TegrastatsLine> lines;
  stream.feed(text, [&](const TegrastatsLine& l) { lines.push_back(l); });
  return lines;
}

const TegrastatsRail& rail(const TegrastatsLine& l, const std::string& name) {
  for (const auto& r : l.rails)
    if (r.name == name) return r;
  throw std::runtime_error("no rail " + name);
}

TEST(Tegrastats, Tx2LinesGiveEveryRailWithVddInAsTheTotal) {
  TegrastatsStream stream;
  const auto lines = parse_all(read_data("tx2_jetpack4.txt"), stream);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(stream.malformed(), 0U);
  const auto& l = lines[1];
  EXPECT_FALSE(l.wall_s);
  ASSERT_EQ(l.rails.size(), 6U);  // RAM and SWAP are not rails
  ASSERT_GE(l.total, 0);
  EXPECT_EQ(l.rails[l.total].name, "VDD_IN");
  EXPECT_EQ(l.rails[l.total].now_mw, 3521U);
  EXPECT_EQ(l.rails[l.total].average_mw, 2832U);
  EXPECT_EQ(rail(l, "VDD_SYS_CPU").now_mw, 1069U);
  // The parts do not add up to the input (regulator losses, unmonitored rails): the total is
  // VDD_IN's reading, never a sum.
  uint32_t parts = 0;
  for (std::size_t i = 0; i < l.rails.size(); ++i)
    if (static_cast<int>(i) != l.total) parts += l.rails[i].now_mw;
  EXPECT_NE(parts, l.rails[l.total].now_mw);
}

TEST(Tegrastats, NanoAndXavierNxNameTheirInputRailAndAgxOrinHasNone) {
  struct Case {
    const char* file;
    const char* total;
    uint32_t now_mw;
    std::size_t rails;
  };
  for (const Case& c : {Case{"nano_jetpack46.txt", "POM_5V_IN", 4821, 3},
                        Case{"xavier_nx_jetpack5.txt", "VDD_IN", 3756, 3}}) {
    TegrastatsStream stream;
    const auto lines = parse_all(read_data(c.file), stream);
    ASSERT_FALSE(lines.empty()) << c.file;
    const auto& l = lines.back();
    SCOPED_TRACE(c.file);
    EXPECT_EQ(l.rails.size(), c.rails);
    ASSERT_GE(l.total, 0);
    EXPECT_EQ(l.rails[l.total].name, c.total);
    EXPECT_EQ(l.rails[l.total].now_mw, c.now_mw);
    EXPECT_EQ(stream.malformed(), 0U);
  }
  TegrastatsStream stream;
  const auto orin = parse_all(read_data("orin_jetpack6.txt"), stream);
  // VIN_SYS_5V0 is the 5 V system branch of an AGX Orin, not the module's input.
  EXPECT_EQ(orin[1].total, -1);
  ASSERT_TRUE(orin[0].wall_s);
  EXPECT_EQ(*orin[0].wall_s, 1795420800);  // 2026-11-23 08:00:00 UTC
  EXPECT_EQ(*orin[1].wall_s - *orin[0].wall_s, 1);
  EXPECT_EQ(rail(orin[1], "VDD_GPU_SOC").now_mw, 12405U);
}

TEST(Tegrastats, MalformedAndTruncatedLinesAreCountedAndSkippedNeverFatal) {
  TegrastatsStream stream;
  const auto lines = parse_all(read_data("malformed.txt"), stream);
  EXPECT_EQ(stream.lines(), 7U);
  EXPECT_EQ(stream.malformed(), 4U);  // empty, no rails, garbage, negative values
  ASSERT_EQ(lines.size(), 3U);
  // A truncated last rail is dropped; the rails before it stand.
  ASSERT_EQ(lines[0].rails.size(), 1U);
  EXPECT_EQ(lines[0].rails[0].name, "VDD_SYS_GPU");
  // Mixed units and absurd numbers are not readings; without VDD_IN the line has no total.
  EXPECT_EQ(lines[1].rails.size(), 1U);
  EXPECT_EQ(lines[1].total, -1);
  EXPECT_EQ(lines[2].rails[0].name, "VDD_SYS_DDR");
  // A partial line waits for its end; bytes split anywhere give the same lines.
  TegrastatsStream split;
  std::vector<TegrastatsLine> got;
  const std::string text = read_data("tx2_jetpack4.txt");
  for (char ch : text) split.feed(std::string_view(&ch, 1), [&](const TegrastatsLine& l) { got.push_back(l); });
  EXPECT_EQ(got.size(), 2U);
  std::string why;
  EXPECT_FALSE(parse_tegrastats_line("RAM 1/2MB", &why));
  EXPECT_EQ(why, "no power rail (NAME now/average) in the line");
}

TEST(Tegrastats, MutatedLinesNeverCrashTheParser) {
  const std::string seed = read_data("orin_jetpack6.txt") + read_data("tx2_jetpack4.txt");
  std::mt19937 rng(11);
  TegrastatsStream stream;
  for (int i = 0; i < 3000; ++i) {
    std::string s = seed;
    for (int e = 0; e < 8; ++e) s[rng() % s.size()] = static_cast<char>(rng() % 256);
    stream.feed(s, [](const TegrastatsLine& l) { EXPECT_FALSE(l.rails.empty()); });
  }
  EXPECT_GT(stream.lines(), 0U);
}

}  // namespace
}  // namespace ergon::probes
