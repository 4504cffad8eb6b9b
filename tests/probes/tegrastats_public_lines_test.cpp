// tegrastats lines as Jetson boards of every generation printed them, copied verbatim from
// public sources (each named above its line; where a source wraps the line in a string or a
// code block, only the wrapper was removed). Each is read as a user of that board expects:
// the module's input rail as the total where the generation has one, and no total at all
// where it does not (AGX Xavier, AGX Orin), never 0 W and never a sum of parts.

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "probes/tegrastats.h"

namespace ergon::probes {
namespace {

struct Expected {
  const char* name;
  uint32_t now_mw;
  int64_t average_mw;  // -1: the line printed none
};

struct PublicLine {
  const char* generation;
  const char* line;
  const char* total;  // nullptr: the generation has no input-total rail
  std::vector<Expected> rails;
};

void PrintTo(const PublicLine& l, std::ostream* os) { *os << l.generation; }

// clang-format off
const std::vector<PublicLine>& public_lines() {
  static const std::vector<PublicLine> lines{
      // DataDog/datadog-agent pkg/collector/corechecks/nvidia/jetson/jetson_test.go
      // @a50b634caee0389882c39a7f2e8bc52991bebcbe, tx1Sample
      {"TX1, L4T 28",
       "RAM 1179/3983MB (lfb 120x4MB) IRAM 0/252kB(lfb 252kB) CPU [1%@102,4%@102,0%@102,0%@102] EMC_FREQ 7%@408 GR3D_FREQ 0%@76 APE 25 AO@42.5C CPU@37.5C GPU@39C PLL@37C Tdiode@42.75C PMIC@100C Tboard@42C thermal@38.5C VDD_IN 2532/2698 VDD_CPU 76/178 VDD_GPU 19/19",
       "VDD_IN", {{"VDD_IN", 2532, 2698}, {"VDD_CPU", 76, 178}, {"VDD_GPU", 19, 19}}},
      // rbonghi/jetson_stats tests/tegrastats@586e166ed1a3b3500a26949b0589f6f67cc501cc, line 44
      // (the echo of jtop's tegrastats emulator; L4T 28 rail names)
      {"TX2, L4T 28 (JetPack 3)",
       "RAM 4722/7844MB (lfb 1x512kB) CPU [55%@2035,14%@2034,27%@2034,55%@2035,47%@2035,45%@2035] EMC_FREQ 2%@1866 GR3D_FREQ 71%@1300 APE 150 MTS fg 0% bg 0% BCPU@45C MCPU@45C GPU@51C PLL@45C AO@47.5C Tboard@37C Tdiode@46.75C PMIC@100C thermal@46.4C VDD_IN 14025/14416 VDD_CPU 2209/2538 VDD_GPU 6854/6903 VDD_SOC 1371/1370 VDD_WIFI 19/19 VDD_DDR 2702/2702",
       "VDD_IN", {{"VDD_IN", 14025, 14416}, {"VDD_CPU", 2209, 2538}, {"VDD_GPU", 6854, 6903},
                  {"VDD_SOC", 1371, 1370}, {"VDD_WIFI", 19, 19}, {"VDD_DDR", 2702, 2702}}},
      // DataDog/datadog-agent jetson_test.go@a50b634caee0389882c39a7f2e8bc52991bebcbe, tx2Sample
      {"TX2, L4T 32 (JetPack 4)",
       "RAM 2344/7852MB (lfb 1154x4MB) SWAP 0/3926MB (cached 0MB) CPU [1%@345,off,off,1%@345,0%@345,2%@345] EMC_FREQ 4%@1600 GR3D_FREQ 0%@624 APE 150 PLL@37.5C MCPU@37.5C PMIC@100C Tboard@32C GPU@35C BCPU@37.5C thermal@36.5C Tdiode@34.25C VDD_SYS_GPU 152/152 VDD_SYS_SOC 687/687 VDD_4V0_WIFI 0/0 VDD_IN 3056/3056 VDD_SYS_CPU 152/152 VDD_SYS_DDR 883/883",
       "VDD_IN", {{"VDD_SYS_GPU", 152, 152}, {"VDD_SYS_SOC", 687, 687}, {"VDD_4V0_WIFI", 0, 0},
                  {"VDD_IN", 3056, 3056}, {"VDD_SYS_CPU", 152, 152}, {"VDD_SYS_DDR", 883, 883}}},
      // https://github.com/FindHao/tx-utils/issues/3 (issue text, 2019-09-05)
      {"TX2, L4T 32 (second board)",
       "RAM 2020/7852MB (lfb 1164x4MB) CPU [9%@345,21%@345,25%@345,3%@345,1%@345,1%@345] EMC_FREQ 0% GR3D_FREQ 0% PLL@42.5C MCPU@42.5C PMIC@100C Tboard@40C GPU@41C BCPU@42.5C thermal@41.9C Tdiode@41.25C VDD_SYS_GPU 153/158 VDD_SYS_SOC 536/547 VDD_4V0_WIFI 633/527 VDD_IN 3140/3208 VDD_SYS_CPU 536/590 VDD_SYS_DDR 557/601",
       "VDD_IN", {{"VDD_SYS_GPU", 153, 158}, {"VDD_SYS_SOC", 536, 547}, {"VDD_4V0_WIFI", 633, 527},
                  {"VDD_IN", 3140, 3208}, {"VDD_SYS_CPU", 536, 590}, {"VDD_SYS_DDR", 557, 601}}},
      // aptpod/zabbix-agent2-plugin-tegrastats stats_test.go@368a7738fe7cab7635e5a7f43b9413433de7ef1a
      // (a TX2 4GB: no VDD_4V0_WIFI rail)
      {"TX2 4GB, L4T 32",
       "RAM 1873/3830MB (lfb 144x4MB) CPU [8%@2016,26%@2034,24%@2035,7%@2026,7%@2034,6%@2034] EMC_FREQ 0%@1600 GR3D_FREQ 0%@114 APE 150 MTS fg 0% bg 1% PLL@39C MCPU@39C PMIC@50C Tboard@35C GPU@37C BCPU@39C thermal@38.5C Tdiode@37C VDD_SYS_GPU 77/77 VDD_SYS_SOC 539/539 VDD_IN 2930/3405 VDD_SYS_CPU 539/937 VDD_SYS_DDR 727/758",
       "VDD_IN", {{"VDD_SYS_GPU", 77, 77}, {"VDD_SYS_SOC", 539, 539}, {"VDD_IN", 2930, 3405},
                  {"VDD_SYS_CPU", 539, 937}, {"VDD_SYS_DDR", 727, 758}}},
      // DataDog/datadog-agent jetson_test.go@a50b634caee0389882c39a7f2e8bc52991bebcbe, nanoSample
      {"Nano, JetPack 4",
       "RAM 534/3964MB (lfb 98x4MB) SWAP 5/1982MB (cached 1MB) IRAM 0/252kB(lfb 252kB) CPU [16%@204,9%@204,0%@204,0%@204] EMC_FREQ 0%@204 GR3D_FREQ 0%@76 APE 25 PLL@34C CPU@36.5C PMIC@100C GPU@36C AO@39.5C thermal@36.25C POM_5V_IN 1022/1022 POM_5V_GPU 0/0 POM_5V_CPU 204/204",
       "POM_5V_IN", {{"POM_5V_IN", 1022, 1022}, {"POM_5V_GPU", 0, 0}, {"POM_5V_CPU", 204, 204}}},
      // rbonghi/jetson_stats jtop/jetson_test.ipynb@6173c6b1e3871fa735202e4ea1c90e308dc8b02f
      // (2018-11-24, before L4T 32.1), source line 17: bare rail names, run with sudo
      {"AGX Xavier, L4T 31",
       "RAM 1736/15827MB (lfb 3283x4MB) CPU [1%@1160,2%@1161,0%@1189,0%@1189,off,off,off,off] EMC_FREQ 0%@665 GR3D_FREQ 0%@114 APE 150 MTS fg 0% bg 0% AO@29C GPU@30C iwlwifi@34C Tboard@30C Tdiode@33C AUX@29C CPU@30C thermal@29.45C PMIC@100C GPU 466/466 CPU 466/466 SOC 932/932 CV 0/0 VDDRQ 0/0 SYS5V 1854/1854",
       nullptr, {{"GPU", 466, 466}, {"CPU", 466, 466}, {"SOC", 932, 932}, {"CV", 0, 0},
                 {"VDDRQ", 0, 0}, {"SYS5V", 1854, 1854}}},
      // the same notebook, source line 22 (without sudo: no frequencies)
      {"AGX Xavier, L4T 31 (no sudo)",
       "RAM 1733/15827MB (lfb 3283x4MB) CPU [1%@1190,0%@1190,0%@1190,0%@1190,off,off,off,off] EMC_FREQ 0% GR3D_FREQ 4% AO@25.5C GPU@26.5C iwlwifi@32C Tboard@27C Tdiode@29.75C AUX@25.5C CPU@26.5C thermal@26.1C PMIC@100C GPU 621/621 CPU 465/465 SOC 1397/1397 CV 0/0 VDDRQ 0/0 SYS5V 2053/2053",
       nullptr, {{"GPU", 621, 621}, {"CPU", 465, 465}, {"SOC", 1397, 1397}, {"CV", 0, 0},
                 {"VDDRQ", 0, 0}, {"SYS5V", 2053, 2053}}},
      // https://github.com/martinkersner/gtop/pull/7 (comment of 2019-06-17, a JetPack 4.2 thread)
      {"AGX Xavier, L4T 32",
       "RAM 14700/15692MB (lfb 3x2MB) SWAP 898/8192MB (cached 23MB) CPU [0%@1190,0%@1190,0%@1190,0%@1190,0%@1190,0%@1190,0%@1190,0%@1190] EMC_FREQ 0% GR3D_FREQ 0% AO@30C GPU@30.5C Tboard@31C Tdiode@32C AUX@30.5C CPU@31.5C thermal@30.8C PMIC@100C GPU 463/463 CPU 618/618 SOC 2936/2936 CV 0/0 VDDRQ 309/309 SYS5V 3306/3306",
       nullptr, {{"GPU", 463, 463}, {"CPU", 618, 618}, {"SOC", 2936, 2936}, {"CV", 0, 0},
                 {"VDDRQ", 309, 309}, {"SYS5V", 3306, 3306}}},
      // DataDog/datadog-agent jetson_test.go@a50b634caee0389882c39a7f2e8bc52991bebcbe, agXSample
      {"AGX Xavier 32GB, L4T 32",
       "RAM 721/31927MB (lfb 7291x4MB) SWAP 0/15963MB (cached 0MB) CPU [2%@1190,0%@1190,0%@1190,0%@1190,off,off,off,off] EMC_FREQ 0%@665 GR3D_FREQ 0%@318 APE 150 MTS fg 0% bg 0% AO@37.5C GPU@37.5C Tdiode@40C PMIC@100C AUX@36C CPU@37.5C thermal@36.9C Tboard@37C GPU 0/0 CPU 311/311 SOC 932/932 CV 0/0 VDDRQ 621/621 SYS5V 1482/1482",
       nullptr, {{"GPU", 0, 0}, {"CPU", 311, 311}, {"SOC", 932, 932}, {"CV", 0, 0},
                 {"VDDRQ", 621, 621}, {"SYS5V", 1482, 1482}}},
      // DataDog/datadog-agent jetson_test.go@a50b634caee0389882c39a7f2e8bc52991bebcbe, xavierNxSample
      {"Xavier NX, JetPack 4",
       "RAM 4412/7772MB (lfb 237x4MB) SWAP 139/3886MB (cached 2MB) CPU [9%@1190,6%@1190,6%@1190,5%@1190,4%@1190,8%@1267] EMC_FREQ 10%@1600 GR3D_FREQ 62%@306 APE 150 MTS fg 0% bg 0% AO@41.5C GPU@43C PMIC@100C AUX@41.5C CPU@43.5C thermal@42.55C VDD_IN 4067/4067 VDD_CPU_GPU_CV 738/738 VDD_SOC 1353/1353",
       "VDD_IN", {{"VDD_IN", 4067, 4067}, {"VDD_CPU_GPU_CV", 738, 738}, {"VDD_SOC", 1353, 1353}}},
      // catid/blog2022 content/posts/orin_opt.md@cf5321ecbf231a1b593aaa41c02528f584cff600
      // (https://catid.io/posts/orin_opt/, JetPack 5.1): NC channels are not connected
      {"AGX Orin, JetPack 5",
       "04-24-2023 00:01:24 RAM 1282/62795MB (lfb 15152x4MB) SWAP 0/31398MB (cached 0MB) CPU [0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729] EMC_FREQ 0%@2133 GR3D_FREQ 0%@0 GR3D2_FREQ 0%@0 VIC_FREQ 729 APE 174 CV0@-256C CPU@42.593C Tboard@32C SOC2@39.343C Tdiode@33.25C SOC0@39.375C CV1@-256C GPU@-256C tj@42.593C SOC1@40.468C CV2@-256C VDD_GPU_SOC 2399mW/2399mW VDD_CPU_CV 400mW/400mW VIN_SYS_5V0 4032mW/4032mW NC 0mW/0mW VDDQ_VDD2_1V8AO 301mW/301mW NC 0mW/0mW",
       nullptr, {{"VDD_GPU_SOC", 2399, 2399}, {"VDD_CPU_CV", 400, 400}, {"VIN_SYS_5V0", 4032, 4032},
                 {"VDDQ_VDD2_1V8AO", 301, 301}}},
      // rbonghi/jetson_stats jtop/tests/test_06_tegra_parse.py@2386a023d2d159808f579b2462ae27ad85a0db0f,
      // TEGRASTATS_ORIN_JP7 (JetPack 7.2, L4T R39.2; six string literals joined): now/average/max
      {"AGX Orin, JetPack 7",
       "07-25-2026 09:08:28 RAM 20642/62817MB (lfb 1x2MB) CPU [23%@2201,10%@2201,4%@2201,14%@2201,30%@2201,18%@2201,10%@2201,10%@2201,33%@2201,7%@2201,5%@2201,27%@2201] EMC_FREQ 3%@3199 GR3D_FREQ 12%@[1300,1300] NVENC0 off NVDEC0 off NVJPG0 off NVJPG1 off VIC off OFA off NVDLA0 off NVDLA1 off PVA0_FREQ off APE 174 cpu@52.968C/52.968C soc2@48.406C/48.406C soc0@49.531C/49.531C gpu@47.625C/47.625C VDD_GPU_SOC 5139mW/5139mW/5139mW VDD_CPU_CV 3268mW/3268mW/3268mW VIN_SYS_5V0 5500mW/5500mW/5500mW",
       nullptr, {{"VDD_GPU_SOC", 5139, 5139}, {"VDD_CPU_CV", 3268, 3268}, {"VIN_SYS_5V0", 5500, 5500}}},
      // https://github.com/rbonghi/jetson_stats/issues/624 (issue text, 2025-05-16)
      {"Orin NX, JetPack 6",
       "05-15-2025 18:30:28 RAM 6982/7620MB (lfb 5x1MB) SWAP 2640/16384MB (cached 202MB) CPU [97%@1984,95%@1984,95%@1984,91%@1984,88%@1984,93%@247] EMC_FREQ 18%@3199 GR3D_FREQ 84%@[713] NVENC 1%@115 NVDEC 40%@115 NVJPG off NVJPG1 off VIC 31%@115 OFA off NVDLA0 off PVA0_FREQ off APE 174 cv0@63.031C cpu@65.562C soc2@64.156C soc0@63.031C cv1@62.937C gpu@63.5C tj@65.562C soc1@64.718C cv2@60.875C VDD_IN 17946mW/15710mW VDD_CPU_GPU_CV 8896mW/7585mW VDD_SOC 3923mW/3515mW",
       "VDD_IN", {{"VDD_IN", 17946, 15710}, {"VDD_CPU_GPU_CV", 8896, 7585}, {"VDD_SOC", 3923, 3515}}},
      // henrygd/beszel agent/gpu_test.go@f1e5797c76a234b1c59a31c815f07edfbee0b0e9, line 382 ("orin nano")
      {"Orin Nano, JetPack 6",
       "06-18-2025 11:25:24 RAM 3452/7620MB (lfb 25x4MB) SWAP 1518/16384MB (cached 174MB) CPU [1%@1420,2%@1420,0%@1420,2%@1420,2%@729,1%@729] GR3D_FREQ 0% cpu@50.031C soc2@49.031C soc0@50C gpu@49.031C tj@50.25C soc1@50.25C VDD_IN 4824mW/4824mW VDD_CPU_GPU_CV 518mW/518mW VDD_SOC 1475mW/1475mW",
       "VDD_IN", {{"VDD_IN", 4824, 4824}, {"VDD_CPU_GPU_CV", 518, 518}, {"VDD_SOC", 1475, 1475}}},
      // henrygd/beszel agent/gpu_test.go@f1e5797c76a234b1c59a31c815f07edfbee0b0e9, line 369
      {"Orin Nano, JetPack 6 (second board)",
       "11-15-2024 08:38:09 RAM 6185/7620MB (lfb 8x2MB) SWAP 851/3810MB (cached 1MB) CPU [15%@729,11%@729,14%@729,13%@729,11%@729,8%@729] EMC_FREQ 43%@2133 GR3D_FREQ 63%@[621] NVDEC off NVJPG off NVJPG1 off VIC off OFA off APE 200 cpu@53.968C soc2@52.437C soc0@50.75C gpu@53.343C tj@53.968C soc1@51.656C VDD_IN 12479mW/12479mW VDD_CPU_GPU_CV 4667mW/4667mW VDD_SOC 2817mW/2817mW",
       "VDD_IN", {{"VDD_IN", 12479, 12479}, {"VDD_CPU_GPU_CV", 4667, 4667}, {"VDD_SOC", 2817, 2817}}},
      // henrygd/beszel agent/gpu_test.go@f1e5797c76a234b1c59a31c815f07edfbee0b0e9, line 356
      // ("valid data"; the test's author abridged a real line to one rail with no average)
      {"one rail, mW, date prefix",
       "11-14-2024 22:54:33 RAM 4300/30698MB GR3D_FREQ 45% tj@52.468C VDD_GPU_SOC 2171mW",
       nullptr, {{"VDD_GPU_SOC", 2171, -1}}},
  };
  return lines;
}
// clang-format on

class PublicTegrastatsLine : public ::testing::TestWithParam<PublicLine> {};

TEST_P(PublicTegrastatsLine, ReadsEveryRailAndTheTotalOnlyWhereTheGenerationHasOne) {
  const PublicLine& c = GetParam();
  std::string why;
  const auto parsed = parse_tegrastats_line(c.line, &why);
  ASSERT_TRUE(parsed) << why;
  ASSERT_EQ(parsed->rails.size(), c.rails.size());
  for (std::size_t i = 0; i < c.rails.size(); ++i) {
    SCOPED_TRACE(c.rails[i].name);
    EXPECT_EQ(parsed->rails[i].name, c.rails[i].name);
    EXPECT_EQ(parsed->rails[i].now_mw, c.rails[i].now_mw);
    if (c.rails[i].average_mw < 0) {
      EXPECT_FALSE(parsed->rails[i].average_mw);
    } else {
      ASSERT_TRUE(parsed->rails[i].average_mw);
      EXPECT_EQ(*parsed->rails[i].average_mw, static_cast<uint32_t>(c.rails[i].average_mw));
    }
  }
  if (c.total == nullptr) {
    EXPECT_EQ(parsed->total, -1) << "a part of the module taken for its input";
  } else {
    ASSERT_GE(parsed->total, 0);
    EXPECT_EQ(parsed->rails[static_cast<std::size_t>(parsed->total)].name, c.total);
  }
  const bool dated = std::string(c.line).find(':') == 13;  // "MM-DD-YYYY HH:MM:SS ..."
  EXPECT_EQ(parsed->wall_s.has_value(), dated);
}

std::string line_name(const ::testing::TestParamInfo<PublicLine>& info) {
  std::string name;
  for (const char* p = info.param.generation; *p != '\0'; ++p)
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Jetsons, PublicTegrastatsLine, ::testing::ValuesIn(public_lines()), line_name);

TEST(PublicTegrastatsLines, CoverTenGenerationsOrReleases) {
  std::vector<std::string> seen;
  for (const auto& l : public_lines()) {
    std::string g = l.generation;
    g = g.substr(0, g.find(" ("));
    if (std::find(seen.begin(), seen.end(), g) == seen.end()) seen.push_back(g);
  }
  EXPECT_GE(seen.size(), 10U);
}

// hordiales/jetson-tx1-dev SCRIPTS.md@a5a5cc70a6f40a0452cb59814fde50ae28cd12cd (L4T 28.1 on a
// TX1; indentation of the Markdown code block removed): this release printed no power rail.
TEST(PublicTegrastatsLines, ATx1OnL4T281PrintsNoRailAndIsRefusedSayingSo) {
  std::string why;
  EXPECT_FALSE(parse_tegrastats_line(
      "RAM 3468/3983MB (lfb 48x4MB) SWAP 873/8192MB (cached 295MB) cpu [17%,13%,29%,5%]@408 EMC "
      "1%@408 APE 25 GR3D 3%@76",
      &why));
  EXPECT_NE(why.find("no power rail"), std::string::npos) << why;
}

TEST(PublicTegrastatsLines, TheOrinDatePrefixIsReadAsUtcSeconds) {
  const auto parsed = parse_tegrastats_line(public_lines()[11].line);
  ASSERT_TRUE(parsed && parsed->wall_s);
  EXPECT_EQ(*parsed->wall_s, 1682294484);  // 2023-04-24 00:01:24
}

}  // namespace
}  // namespace ergon::probes
