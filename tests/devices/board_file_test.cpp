#include "devices/board_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "devices/board_profile.h"

namespace ergon::devices {
namespace {

const std::filesystem::path kBoardsDir = std::filesystem::path(ERGON_TEST_DATA_DIR) / ".." / ".." / "boards";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(BoardFile, TheBuiltInBoardsAreTheRepositorysFilesWithTheirPublishedFigures) {
  const auto& files = builtin_board_files();
  ASSERT_EQ(files.size(), 4U);
  for (const auto& f : files) EXPECT_EQ(f.text, read_text(kBoardsDir / f.file)) << f.file;

  const BoardProfile pi4 = board_named("pi4");
  EXPECT_EQ(pi4.kind, BoardKind::kRaspberryPi4);
  EXPECT_EQ(pi4.origin, "built-in boards/pi4.json");
  EXPECT_DOUBLE_EQ(pi4.pagein_bytes_per_s, 45.5e6);  // POET's published Pi 4 profile
  EXPECT_DOUBLE_EQ(pi4.pageout_bytes_per_s, 24.5e6);
  EXPECT_EQ(pi4.rail_name, "5V");
  EXPECT_EQ(pi4.mode_control, "cpufreq");
  ASSERT_EQ(pi4.power_modes.size(), 3U);
  EXPECT_EQ(pi4.power_modes[2].name, "600MHz");
  EXPECT_EQ(pi4.power_modes[2].setting, "600000");
  EXPECT_EQ(pi4.power_mode, "1500MHz");

  const BoardProfile tx2 = board_named("tx2");
  EXPECT_DOUBLE_EQ(tx2.pagein_latency_s, 0.54e-3);
  EXPECT_EQ(tx2.sim_truth.cache_bytes, 2U << 20);
  EXPECT_EQ(tx2.probe_spec, "tegrastats");
  EXPECT_EQ(board_names(), "tx2, pi4, nrf52840, mkr1000");
}

TEST(BoardFile, AWrittenDescriptorReadsBackAsTheSameBoard) {
  for (const BoardProfile& b : builtin_boards()) {
    const BoardProfile back = parse_board_descriptor(board_descriptor_json(b, {"measured"}), "written");
    EXPECT_EQ(back.name, b.name);
    EXPECT_EQ(back.kind, b.kind);
    EXPECT_EQ(back.cores, b.cores);
    EXPECT_DOUBLE_EQ(back.flops_per_s, b.flops_per_s);
    EXPECT_DOUBLE_EQ(back.idle_w, b.idle_w);
    EXPECT_DOUBLE_EQ(back.pageout_latency_s, b.pageout_latency_s);
    EXPECT_EQ(back.firmware_version, b.firmware_version);
    EXPECT_EQ(back.power_modes.size(), b.power_modes.size());
    EXPECT_DOUBLE_EQ(back.sim_truth.spill_slowdown, b.sim_truth.spill_slowdown);
    EXPECT_DOUBLE_EQ(back.ina219.shunt_ohm, b.ina219.shunt_ohm);
    EXPECT_EQ(back.probe_spec, b.probe_spec);
  }
}

/// The example Pi 5 descriptor with one field replaced (a JSON pointer) or removed (null).
std::string pi5_with(const std::string& pointer, const nlohmann::json& value, bool remove = false) {
  nlohmann::json doc = nlohmann::json::parse(read_text(kBoardsDir / "examples" / "pi5.json"));
  const nlohmann::json::json_pointer at(pointer);
  if (remove) doc[at.parent_pointer()].erase(at.back());
  else doc[at] = value;
  return doc.dump();
}

std::string error_of(const std::string& text) {
  try {
    parse_board_descriptor(text, "pi5.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BoardFile, ANumberTooLargeOrBytesThatAreNotTextGetOnePrintableLine) {
  // Found by fuzz_user_files: a number past a double's range escaped the JSON reader's
  // parse-error handling, and the reader's own message quoted the file's bytes raw.
  std::string big = pi5_with("/power/idle_w", 1);
  big.replace(big.find("\"idle_w\":1") + 9, 1, "60e6144");
  EXPECT_EQ(error_of(big), "pi5.json: not JSON: number overflow parsing '60e6144'");
  const std::string raw = error_of("{\"schema\": \"ergon-board/1\", \"name\": \"M0\xfe\x01\"}");
  EXPECT_NE(raw.find("\\xfe"), std::string::npos) << raw;
  for (const char c : raw) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << raw;
}

TEST(BoardFile, AFileNestedThousandsDeepIsRefusedNotACrash) {
  // 200 000 levels crashed ergon plan --board FILE (the stack, after the parser).
  const std::string deep = "{\"schema\": \"ergon-board/1\", \"name\": " + std::string(200'000, '[') +
                           std::string(200'000, ']') + "}";
  EXPECT_EQ(error_of(deep), "pi5.json: nested deeper than 64 levels: not a board descriptor");
}

TEST(BoardFile, ABadFieldGetsOneLineNamingItAndWhatWasExpected) {
  EXPECT_EQ(error_of(pi5_with("/power/idle_w", "2,7")),
            "pi5.json: power.idle_w: expected a number > 0 and <= 1000 (watts with nothing running), got \"2,7\"");
  EXPECT_EQ(error_of(pi5_with("/cpu/flops_per_s", nullptr, true)),
            "pi5.json: cpu.flops_per_s: missing (expected a number > 0 (sustained fp32 FLOP/s of one core))");
  EXPECT_EQ(error_of(pi5_with("/schema", "ergon-board/2")),
            "pi5.json: schema: expected \"ergon-board/1\", got \"ergon-board/2\"");
  EXPECT_EQ(error_of("{\"schema\": \"ergon-board/1\",}").substr(0, 31), "pi5.json: not JSON: parse error");
  EXPECT_EQ(error_of(pi5_with("/kind", "pi4")),
            "pi5.json: kind: expected \"described\" for a board named pi5 (a built-in kind is its own name), got \"pi4\"");

  // A misspelt field is refused, never read as its default.
  const std::string typo = error_of(pi5_with("/simulator/truth/thermal_tau", 30));
  EXPECT_EQ(typo.substr(0, 72), "pi5.json: simulator.truth.thermal_tau: unknown field (expected one of: c");
  EXPECT_NE(typo.find("thermal_tau_s"), std::string::npos);

  EXPECT_NE(error_of(pi5_with("/name", "raspberry-pi-5-8gb")).find("name: expected text of 1 to 15 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/cpu/cores", 100000)).find("cpu.cores: expected a whole number from 1 to 4096"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/power_modes/modes", nlohmann::json::array()))
                .find("power_modes.modes: expected a list of at least one power mode"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/power_modes/modes/0/speed", 0.5))
                .find("power_modes.modes: expected the first mode to be the one the figures describe"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/power_modes/modes/1/name", "2400MHz"))
                .find("power_modes.modes[1].name: expected a name no other mode has"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/probe/spec", "ina219:/dev/i2c-1@0xZZ")).find("probe.spec: expected a probe spec"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/simulator/truth/release_c", 90))
                .find("simulator.truth.release_c: expected a temperature below throttle_c"),
            std::string::npos);
  EXPECT_NE(error_of(pi5_with("/ram_bytes", -1)).find("ram_bytes: expected a whole number >= 1 (bytes), got -1"),
            std::string::npos);
}

TEST(BoardFile, ABoardLoadedFromAFileIsKnownByItsNameAfterwards) {
  const auto path = kBoardsDir / "examples" / "pi5.json";
  const BoardProfile pi5 = board_named(path.string());
  EXPECT_EQ(pi5.name, "pi5");
  EXPECT_EQ(pi5.kind, BoardKind::kDescribed);
  EXPECT_EQ(pi5.origin, path.string());
  EXPECT_EQ(pi5.cpu, "Cortex-A76");
  EXPECT_EQ(pi5.cores, 4);
  EXPECT_DOUBLE_EQ(pi5.sim_truth.throttle_c, 85);
  EXPECT_EQ(pi5.tick_hz, 1'000'000'000U);
  ASSERT_TRUE(find_board("pi5"));
  EXPECT_DOUBLE_EQ(find_board("pi5")->idle_w, 2.7);
  // Its modes scale it as a built-in board's do.
  const BoardProfile slow = board_in_mode(pi5, "1500MHz");
  EXPECT_DOUBLE_EQ(slow.flops_per_s, 7.0e9 * 0.625);
  EXPECT_FALSE(find_board(BoardKind::kDescribed));
}

TEST(BoardFile, AMissingFileSaysItCannotBeRead) {
  try {
    board_named("/nonexistent/pi9.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/pi9.json: cannot read the board descriptor");
  }
  try {
    board_named("pi9");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, 26), "unknown board 'pi9' (known");
  }
}

}  // namespace
}  // namespace ergon::devices
