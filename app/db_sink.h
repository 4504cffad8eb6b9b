#pragma once

#include <optional>
#include <string>

#include "costdb/database.h"
#include "devices/host/record_session.h"

namespace ergon::app {

/// Stores one board's session in the cost database: the glue between devices (which knows
/// nothing of SQLite) and costdb (which knows nothing of links).
class DbSink final : public devices::RecordSink {
 public:
  /// `link`: set for a link test, the link kind it runs over (runs.link); empty: ethernet
  /// for a tcp: port, else devices::default_link() of the board the Hello names.
  DbSink(costdb::Database& db, std::string source, costdb::RunPlan plan = costdb::RunPlan::kProfile,
         std::optional<std::string> link = std::nullopt)
      : db_(db), source_(std::move(source)), plan_(plan), link_(std::move(link)) {}

  void begin(const devices::BoardHello& hello, const devices::ProfilePlan& plan,
             int64_t host_ns) override;
  void span(const profiler::OpSpan& span) override;
  void samples(std::span<const probes::PowerSample> samples) override;
  void sync(const profiler::SyncPoint& point) override;
  void event(int64_t host_ns, std::string_view kind, std::string_view text) override;
  void status(devices::SessionState state, const devices::LinkStats& stats,
              int64_t host_ns) override;

  /// The run's id once the board answered.
  [[nodiscard]] std::optional<int64_t> run_id() const;
  /// Samples and spans as of the last database commit (the caller commits).
  void mark_committed(const devices::LinkStats& stats);
  [[nodiscard]] uint64_t committed_samples() const { return committed_samples_; }
  [[nodiscard]] uint64_t committed_spans() const { return committed_spans_; }

 private:
  costdb::Database& db_;
  std::string source_;
  costdb::RunPlan plan_;
  std::optional<std::string> link_;
  std::optional<costdb::RunWriter> writer_;
  int64_t wall_offset_ns_ = 0;  ///< host steady clock -> wall clock for people-facing times
  uint64_t committed_samples_ = 0;
  uint64_t committed_spans_ = 0;
};

}  // namespace ergon::app
