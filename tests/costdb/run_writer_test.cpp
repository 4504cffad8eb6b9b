// Recording runs and reading them back.

#include "costdb/database.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "costdb_test_util.h"

namespace ergon::costdb {
namespace {

using ::testing::ElementsAre;
using testing::make_samples;
using testing::raw_query;
using testing::read_lines;
using testing::sim_board;

class RunWriterTest : public testing::TempDirTest {};

TEST_F(RunWriterTest, RunRoundTripsEverythingItRecorded) {
  const auto samples = make_samples(1000);
  const auto conv = profiler::conv2d(1, 3, 16, 32, 32, 3, profiler::Phase::kForward);
  const auto relu = profiler::relu(16 * 32 * 32, profiler::Phase::kForward);
  LinkCounters counters;
  counters.bytes = 123'456;
  counters.frames_ok = 999;
  counters.frames_lost = 2;
  counters.crc_errors = 1;
  counters.malformed = 3;
  counters.device_spans_sent = 3;
  counters.device_samples_sent = 1000;
  counters.device_frames_sent = 1001;
  int64_t run_id = 0;
  {
    Database db = Database::open(db_path());
    RunWriter run(db, sim_board(), "serial:/dev/ttyACM0", 1'000'000'000);
    run_id = run.run_id();
    run.add_op(0, conv, profiler::Phase::kForward);
    run.add_op(1, relu, profiler::Phase::kForward);
    run.add_span({0, profiler::Phase::kForward, 100, 200, 4});
    run.add_span({1, profiler::Phase::kForward, 200, 250, 1});
    run.add_span({0, profiler::Phase::kBackward, 250, 400, 1});
    // Uneven pieces exercise every statement size, not only full ones.
    std::span<const probes::PowerSample> rest(samples);
    for (std::size_t piece : {1U, 59U, 64U, 65U, 130U, 7U}) {
      run.add_samples(rest.first(piece));
      rest = rest.subspan(piece);
    }
    run.add_samples(rest);
    run.add_samples({});
    run.add_sync({1, 10, 1000, 1001, 30});
    run.add_sync({2, 1'000'010, 2000, 2001, 1'000'040});
    run.add_event(5, "log", "hello, \"world\"");
    run.update(RunStatus::kRecording, {}, 0);
    run.update(RunStatus::kCompleted, counters, 2'000'000'000);
    db.commit_batch();
  }

  Database db = Database::open_read_only(db_path());
  const auto runs = list_runs(db);
  ASSERT_EQ(runs.size(), 1U);
  const RunSummary& run = runs[0];
  EXPECT_EQ(run.id, run_id);
  EXPECT_EQ(run.board_kind, "pi4");
  EXPECT_EQ(run.board_name, "pi4-sim");
  EXPECT_EQ(run.source, "serial:/dev/ttyACM0");
  EXPECT_EQ(run.started_at_ns, 1'000'000'000);
  EXPECT_EQ(run.ended_at_ns, 2'000'000'000);
  EXPECT_EQ(run.status, RunStatus::kCompleted);
  EXPECT_EQ(run.spans, 3U);
  EXPECT_EQ(run.samples, 1000U);
  EXPECT_EQ(run.sync_points, 2U);
  EXPECT_EQ(run.counters.bytes, counters.bytes);
  EXPECT_EQ(run.counters.frames_ok, counters.frames_ok);
  EXPECT_EQ(run.counters.frames_lost, counters.frames_lost);
  EXPECT_EQ(run.counters.crc_errors, counters.crc_errors);
  EXPECT_EQ(run.counters.malformed, counters.malformed);
  EXPECT_EQ(run.counters.device_spans_sent, counters.device_spans_sent);
  EXPECT_EQ(run.counters.device_samples_sent, counters.device_samples_sent);
  EXPECT_EQ(run.counters.device_frames_sent, counters.device_frames_sent);

  EXPECT_EQ(raw_query(db_path(), "SELECT group_concat(rail_id || ':' || name, ' ') FROM probes"),
            "0:5V 1:VDD_CORE");
  EXPECT_EQ(raw_query(db_path(), "SELECT firmware_version || ' ' || tick_hz || ' ' || ram_bytes "
                                 "FROM boards"),
            "3 1000000 4294967296");

  // Samples come back bit for bit and in order.
  export_run_csv(db, run_id, dir_ / "out");
  const auto lines = read_lines(dir_ / "out" / "samples.csv");
  ASSERT_EQ(lines.size(), samples.size() + 1);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    ASSERT_EQ(lines[i + 1], std::to_string(s.rail) + "," + std::to_string(s.t_ticks) + "," +
                                std::to_string(s.bus_uv) + "," + std::to_string(s.current_ua) +
                                "," + std::to_string(s.power_uw) + "," + std::to_string(s.flags))
        << "sample " << i;
  }
  const auto op_line = [](uint32_t op_id, const profiler::OpShape& shape) {
    return std::to_string(op_id) + ",forward," + std::string(profiler::to_string(shape.kind)) +
           "," + profiler::dims_text(shape) + "," + std::to_string(shape.flops) + "," +
           std::to_string(shape.bytes_in) + "," + std::to_string(shape.bytes_out) + ",0";
  };
  EXPECT_THAT(read_lines(dir_ / "out" / "ops.csv"),
              ElementsAre("op_id,phase,kind,dims,flops,bytes_in,bytes_out,copies",
                          op_line(0, conv), op_line(1, relu)));
  EXPECT_EQ(op_line(1, relu), "1,forward,relu,16384,16384,65536,65536,0");
  EXPECT_THAT(read_lines(dir_ / "out" / "spans.csv"),
              ElementsAre("op_id,phase,begin_ticks,end_ticks,repetitions", "0,forward,100,200,4",
                          "1,forward,200,250,1", "0,backward,250,400,1"));
  EXPECT_THAT(read_lines(dir_ / "out" / "sync.csv"),
              ElementsAre("sync_id,host_tx_ns,device_rx_ticks,device_tx_ticks,host_rx_ns",
                          "1,10,1000,1001,30", "2,1000010,2000,2001,1000040"));
  EXPECT_THAT(read_lines(dir_ / "out" / "events.csv"),
              ElementsAre("host_ns,kind,text", "5,log,\"hello, \"\"world\"\"\""));
}

TEST_F(RunWriterTest, NewRunIsRecordingWithoutEndOrDeviceCounts) {
  Database db = Database::open(db_path());
  RunWriter run(db, sim_board(), "sim", 42);
  const auto summary = find_run(db, run.run_id());
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->status, RunStatus::kRecording);
  EXPECT_FALSE(summary->ended_at_ns.has_value());
  EXPECT_FALSE(summary->counters.device_samples_sent.has_value());
  EXPECT_EQ(summary->samples, 0U);
  EXPECT_FALSE(find_run(db, run.run_id() + 1).has_value());
}

TEST_F(RunWriterTest, RunsShareBoardsAndShapesAndCountSeparately) {
  Database db = Database::open(db_path());
  BoardInfo board = sim_board();
  RunWriter first(db, board, "sim", 1);
  board.firmware_version = 4;
  board.rails[1].name = "VDD_SOC";
  RunWriter second(db, board, "sim", 2);
  RunWriter other(db, BoardInfo{.name = "tx2-lab", .kind = "tx2", .rails = {{0, "VDD_IN"}}},
                  "tcp:10.0.0.2", 3);
  const auto shape = profiler::linear(8, 128, 10, profiler::Phase::kForward);
  first.add_op(0, shape, profiler::Phase::kForward);
  second.add_op(0, shape, profiler::Phase::kForward);
  second.add_op(1, shape, profiler::Phase::kBackward);
  first.add_samples(make_samples(100));
  second.add_samples(make_samples(59));
  first.add_samples(make_samples(3));
  db.commit_batch();

  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM boards"), "2");
  EXPECT_EQ(raw_query(db_path(), "SELECT firmware_version FROM boards WHERE kind = 'pi4'"), "4");
  EXPECT_EQ(raw_query(db_path(), "SELECT name FROM probes WHERE rail_id = 1"), "VDD_SOC");
  EXPECT_EQ(raw_query(db_path(), "SELECT count(*) FROM op_shapes"), "1");
  const auto runs = list_runs(db);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].samples, 103U);
  EXPECT_EQ(runs[1].samples, 59U);
  EXPECT_EQ(runs[2].samples, 0U);
  EXPECT_EQ(runs[2].board_kind, "tx2");
}

TEST_F(RunWriterTest, DeclaringAnOpTwiceIsAnErrorNamingTheRun) {
  Database db = Database::open(db_path());
  RunWriter run(db, sim_board(), "sim", 1);
  run.add_op(7, profiler::relu(10, profiler::Phase::kForward), profiler::Phase::kForward);
  try {
    run.add_op(7, profiler::relu(10, profiler::Phase::kForward), profiler::Phase::kForward);
    FAIL();
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("run " + std::to_string(run.run_id())));
  }
  // The writer and its batch stay usable.
  run.add_samples(make_samples(3));
  db.commit_batch();
  EXPECT_EQ(find_run(db, run.run_id())->samples, 3U);
}

TEST_F(RunWriterTest, ExtremeValuesSurvive) {
  Database db = Database::open(db_path());
  RunWriter run(db, sim_board(), "sim", -5);
  probes::PowerSample extreme{255, UINT64_MAX, INT32_MIN, INT32_MAX, -1,
                              probes::kSampleOverflow | probes::kSampleNotReady};
  run.add_samples({&extreme, 1});
  run.add_span({UINT32_MAX, profiler::Phase::kSync, UINT64_MAX - 1, UINT64_MAX, UINT32_MAX});
  export_run_csv(db, run.run_id(), dir_);
  EXPECT_THAT(read_lines(dir_ / "samples.csv"),
              ElementsAre(::testing::_, "255,18446744073709551615,-2147483648,2147483647,-1,3"));
  EXPECT_THAT(read_lines(dir_ / "spans.csv"),
              ElementsAre(::testing::_,
                          "4294967295,sync,18446744073709551614,18446744073709551615,4294967295"));
}

TEST_F(RunWriterTest, ExportWritesEveryCsvWithHeaderAndRowCounts) {
  Database db = Database::open(db_path());
  RunWriter run(db, sim_board(), "sim", 1);
  RunWriter noise(db, sim_board(), "sim", 2);
  noise.add_samples(make_samples(50));
  run.add_samples(make_samples(5000));
  run.add_span({0, profiler::Phase::kForward, 1, 2, 1});
  run.add_event(1, "disconnect", "link lost");
  run.add_event(2, "log", "reconnected");
  run.add_op(0, profiler::add(4, profiler::Phase::kForward), profiler::Phase::kForward);
  db.commit_batch();

  const auto out = dir_ / "nested" / "export";
  export_run_csv(db, run.run_id(), out);
  EXPECT_EQ(read_lines(out / "samples.csv").size(), 5001U);
  EXPECT_EQ(read_lines(out / "spans.csv").size(), 2U);
  EXPECT_EQ(read_lines(out / "sync.csv").size(), 1U);
  EXPECT_EQ(read_lines(out / "events.csv").size(), 3U);
  EXPECT_EQ(read_lines(out / "ops.csv").size(), 2U);
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    EXPECT_EQ(entry.path().extension(), ".csv") << entry.path();
  }
}

TEST_F(RunWriterTest, ExportOfUnknownRunThrowsInputError) {
  Database db = Database::open(db_path());
  RunWriter run(db, sim_board(), "sim", 1);
  try {
    export_run_csv(db, run.run_id() + 100, dir_ / "out");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("no run " + std::to_string(run.run_id() + 100)));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out"));
}

TEST(RunStatusTest, NamesAreTheStoredStrings) {
  EXPECT_EQ(to_string(RunStatus::kRecording), "recording");
  EXPECT_EQ(to_string(RunStatus::kCompleted), "completed");
  EXPECT_EQ(to_string(RunStatus::kStopped), "stopped");
  EXPECT_EQ(to_string(RunStatus::kDisconnected), "disconnected");
  EXPECT_EQ(to_string(RunStatus::kFailed), "failed");
}

}  // namespace
}  // namespace ergon::costdb
