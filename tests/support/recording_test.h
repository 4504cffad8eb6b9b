#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

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
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ergon-rec-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

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
