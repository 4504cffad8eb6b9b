#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "app/record.h"

namespace ergon::testing {

/// A fresh folder per test (removed after it) holding a cost database, and a recorder that
/// stores boards on real links (ptys, sockets) into it, as `ergon record` does.
class RecordingTest : public ::testing::Test {
 protected:
  // mkdtemp, not the test's name: a parameterized test's name holds a '/', and removing
  // "ergon-rec-N-Name/0" left "ergon-rec-N-Name" behind after every run.
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "ergon-rec-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::vector<app::BoardOutcome> record(std::vector<std::string> ports) {
    app::RecordRequest req;
    req.ports = std::move(ports);
    req.db_path = db_path();
    std::atomic<int> interrupts{0};
    return app::record_boards(req, {}, interrupts);
  }

  [[nodiscard]] std::filesystem::path db_path() const { return dir_ / "lab.db"; }

  std::filesystem::path dir_;
};

}  // namespace ergon::testing
