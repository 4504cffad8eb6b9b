#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "costdb/database.h"

namespace ergon::costdb::testing {

/// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "ergon-costdb-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  [[nodiscard]] std::filesystem::path db_path() const { return dir_ / "ergon.db"; }

  std::filesystem::path dir_;
};

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// First column of the first row of `sql` on a separate raw connection, as text ("" if none).
inline std::string raw_query(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string result;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return result;
}

/// Runs SQL on a separate raw read-write connection; returns SQLite's result code.
inline int raw_exec(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open(path.c_str(), &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return rc;
}

inline BoardInfo sim_board() {
  BoardInfo board;
  board.name = "pi4-sim";
  board.kind = "pi4";
  board.firmware_version = 3;
  board.tick_hz = 1'000'000;
  board.ram_bytes = 4ULL << 30;
  board.rails = {{0, "5V"}, {1, "VDD_CORE"}};
  return board;
}

inline std::vector<probes::PowerSample> make_samples(std::size_t count, uint64_t first_tick = 0) {
  std::vector<probes::PowerSample> samples(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto& s = samples[i];
    s.rail = static_cast<uint8_t>(i % 2);
    s.t_ticks = first_tick + i * 100;
    s.bus_uv = 5'000'000 - static_cast<int32_t>(i % 1000);
    s.current_ua = 600'000 + static_cast<int32_t>(i % 777);
    s.power_uw = 3'000'000 + static_cast<int32_t>(i % 555);
    s.flags = i % 97 == 0 ? probes::kSampleOverflow : probes::kSampleOk;
  }
  return samples;
}

}  // namespace ergon::costdb::testing
