#include "app/record.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "app/db_sink.h"
#include "common/clock.h"
#include "common/error.h"
#include "costdb/database.h"
#include "devices/host/recorder.h"
#include "probes/ppk2.h"
#include "probes/probe.h"
#include "profiler/sync.h"

namespace ergon::app {

namespace {

/// Reads a host-attached probe on a thread of its own into a power logger's run on the host's
/// clock. The database is the recording's connection (a writer holds its batch open, so a
/// second writer would wait for ever): the thread only queues samples, and the recorder's
/// commit callback writes them with an exact sync point, so the logger's clock fit is the
/// identity and attribution maps its samples as any logger's.
class HostProbeRecorder {
 public:
  HostProbeRecorder(const std::string& spec_text, costdb::Database& db, const Clock& clock) : clock_(clock) {
    const auto spec = probes::parse_probe_spec(spec_text);
    probe_ = probes::open_probe(spec, 0, clock);  // a bad spec or absent device fails before recording
    const auto& info = probe_->info();
    costdb::BoardInfo board;
    board.kind = std::string(devices::kPowerLoggerKindName);
    board.name = (info.kind + " " + info.location).substr(0, 63);
    board.tick_hz = 1'000'000'000;  // host steady-clock ns
    board.rails = info.channels;
    run_.emplace(db, board, spec_text, wall_time_ns());
    run_->add_event(wall_time_ns(), "info",
                    info.kind + " at " + info.location + " read by this host, " + std::to_string(info.max_rate_hz) +
                        " samples/s");
    outcome_.run_id = run_->run_id();
  }

  ~HostProbeRecorder() {
    // Reached without stop() only when recording threw: end the thread, keep nothing else.
    stop_ = true;
    try {
      probe_->stop();
    } catch (const Error&) {
    }
    if (thread_.joinable()) thread_.join();
  }
  HostProbeRecorder(const HostProbeRecorder&) = delete;
  HostProbeRecorder& operator=(const HostProbeRecorder&) = delete;

  void start() {
    probe_->start();
    sync_now();
    thread_ = std::thread([this] { loop(); });
  }

  /// On the recorder's thread, before each commit: what the probe read since.
  void flush() {
    std::vector<probes::PowerSample> samples;
    std::vector<probes::Ppk2Edge> edges;
    {
      std::lock_guard lock(mutex_);
      samples.swap(queue_);
      edges.swap(edge_queue_);
    }
    run_->add_samples(samples);
    // Op markers, at the probe's own ticks (the samples' clock): attribution pairs their
    // rising edges with the board's window starts.
    char logic[8];
    for (const auto& e : edges) {
      std::snprintf(logic, sizeof logic, "0x%02x", e.logic);
      run_->add_event(e.t_ns, "marker", logic);
    }
    outcome_.samples += samples.size();
    sync_now();
  }

  HostProbeOutcome stop(costdb::RunStatus board_status) {
    // Stopping the probe first ends a read that waits for data (a library's session, a
    // meter that went quiet); the thread then sees stop_ and takes that end as the normal one.
    stop_ = true;
    try {
      probe_->stop();
    } catch (const Error&) {
    }
    if (thread_.joinable()) thread_.join();
    flush();
    outcome_.read_errors = probe_->read_errors();
    {
      std::lock_guard lock(mutex_);
      outcome_.error = error_;
    }
    run_->update(outcome_.error.empty() ? board_status : costdb::RunStatus::kFailed, costdb::LinkCounters{},
                 wall_time_ns());
    if (!outcome_.error.empty()) run_->add_event(wall_time_ns(), "failed", outcome_.error);
    return outcome_;
  }

 private:
  void sync_now() {
    const int64_t t = clock_.now_ns();
    run_->add_sync({.sync_id = next_sync_++,
                    .host_tx_ns = t,
                    .device_rx_ticks = static_cast<uint64_t>(t),
                    .device_tx_ticks = static_cast<uint64_t>(t),
                    .host_rx_ns = t});
  }

  void loop() {
    std::vector<probes::PowerSample> samples;
    while (!stop_) {
      samples.clear();
      try {
        probe_->read(samples);
      } catch (const Error& e) {
        if (stop_) return;  // stopped under a waiting read
        std::lock_guard lock(mutex_);
        error_ = e.what();
        return;
      }
      const auto edges = probes::take_ppk2_edges(*probe_);  // a PPK2's digital inputs; none for others
      std::lock_guard lock(mutex_);
      queue_.insert(queue_.end(), samples.begin(), samples.end());
      edge_queue_.insert(edge_queue_.end(), edges.begin(), edges.end());
    }
  }

  const Clock& clock_;
  std::unique_ptr<probes::Probe> probe_;
  std::optional<costdb::RunWriter> run_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  uint32_t next_sync_ = 1;
  HostProbeOutcome outcome_;
  std::mutex mutex_;
  std::vector<probes::PowerSample> queue_;  ///< read, not yet written
  std::vector<probes::Ppk2Edge> edge_queue_;
  std::string error_;
};

/// The database failed under the recorder (a shared server restarted, a disk filled): what
/// arrived after the last commit is gone, and its runs cannot go on. They are ended as failed,
/// saying why, on a fresh connection; a server that is back within kReconnectWindow takes the
/// note, otherwise the runs read back as interrupted (PostgreSQL) or recording (SQLite).
void end_runs_after_losing(const std::filesystem::path& db_path, const std::vector<int64_t>& runs,
                           const std::string& what) {
  constexpr auto kReconnectWindow = std::chrono::seconds(20);
  if (runs.empty()) return;
  const std::string reason = "the recorder lost the database (" + what +
                             "); samples and spans after its last commit are not stored";
  const auto deadline = std::chrono::steady_clock::now() + kReconnectWindow;
  while (true) {
    try {
      auto db = costdb::Database::open(db_path);
      for (int64_t run : runs) costdb::end_run_failed(db, run, reason, wall_time_ns());
      db.commit_batch();
      return;
    } catch (const Error&) {
      if (std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}

}  // namespace

std::vector<BoardOutcome> record_boards(const RecordRequest& request, const RecordProgress& progress,
                                        const std::atomic<int>& interrupts, HostProbeOutcome* host_probe_outcome) {
  if (request.logger_port && request.ports.size() != 1)
    throw InputError("a power logger measures one board: pass exactly one --port with --logger");
  if (request.host_probe && (request.ports.size() != 1 || request.logger_port))
    throw InputError("a host probe measures one board: pass exactly one --port with --host-probe, and no --logger");
  costdb::Database db = costdb::Database::open(request.db_path);
  const SteadyClock clock;
  std::optional<HostProbeRecorder> host_probe;
  if (request.host_probe) host_probe.emplace(*request.host_probe, db, clock);
  devices::Recorder recorder(clock);
  std::vector<std::unique_ptr<DbSink>> sinks;
  std::vector<std::string> ports = request.ports;
  if (request.logger_port) ports.push_back(*request.logger_port);
  for (const auto& port : ports) {
    const auto mode = request.options.mode;
    sinks.push_back(std::make_unique<DbSink>(db, port,
                                             mode == devices::protocol::StartMode::kExecute    ? costdb::RunPlan::kExecute
                                             : mode == devices::protocol::StartMode::kSchedule ? costdb::RunPlan::kSchedule
                                                                                               : costdb::RunPlan::kProfile,
                                             request.options.link_test ? std::optional<std::string>(request.options.link)
                                                                       : std::nullopt));
    const std::size_t i = sinks.size() - 1;
    if (i < request.port_plans.size()) {
      devices::RecordOptions own = request.options;
      own.plan = request.port_plans[i];
      if (i < request.port_executes.size()) own.execute = request.port_executes[i];
      recorder.add(port, request.baud, own, *sinks.back());
    } else {
      recorder.add(port, request.baud, request.options, *sinks.back());
    }
  }

  std::vector<const devices::RecordSession*> final_sessions;
  std::vector<BoardStatus> statuses(ports.size());
  auto on_commit = [&](std::span<const devices::RecordSession* const> sessions) {
    final_sessions.assign(sessions.begin(), sessions.end());
    const int64_t now = clock.now_ns();
    for (std::size_t i = 0; i < sessions.size(); ++i)
      sinks[i]->status(sessions[i]->state(), sessions[i]->stats(), now);
    if (host_probe) host_probe->flush();
    db.commit_batch();
    for (std::size_t i = 0; i < sessions.size(); ++i) sinks[i]->mark_committed(sessions[i]->stats());
    if (!progress) return;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      const auto& s = *sessions[i];
      statuses[i] = {.name = s.hello() ? s.hello()->name : s.source(),
                     .state = s.state(),
                     .stats = s.stats(),
                     .committed_samples = sinks[i]->committed_samples()};
    }
    progress(statuses, now);
  };
  if (host_probe) host_probe->start();
  try {
    recorder.run(on_commit, interrupts);
  } catch (const DatabaseError& e) {
    std::vector<int64_t> runs;
    for (const auto& sink : sinks)
      if (sink->run_id()) runs.push_back(*sink->run_id());
    end_runs_after_losing(request.db_path, runs, e.what());
    throw;
  }

  // The recorder has returned: sessions are final and their last status is stored.
  std::string not_linked_because;
  if (request.logger_port && sinks[0]->run_id() && sinks[1]->run_id()) {
    if (final_sessions[1]->is_power_logger()) {
      costdb::set_power_run(db, *sinks[0]->run_id(), *sinks[1]->run_id());
      db.commit_batch();
    } else {
      not_linked_because = request.logger_port.value() + " is not a power logger (its Hello says " +
                           (final_sessions[1]->hello() ? final_sessions[1]->hello()->kind_name : "nothing") +
                           "); the runs are not linked";
    }
  }
  std::vector<BoardOutcome> outcomes;
  for (std::size_t i = 0; i < final_sessions.size(); ++i) {
    const auto& s = *final_sessions[i];
    outcomes.push_back({.port = s.source(),
                        .state = s.state(),
                        .error = s.error(),
                        .run_id = sinks[i]->run_id(),
                        .stats = s.stats()});
    if (s.hello() && s.hello()->mode_switch_ns)
      outcomes.back().mode_switch_s = static_cast<double>(*s.hello()->mode_switch_ns) * 1e-9;
  }
  if (request.logger_port && outcomes.size() == 2) outcomes[1].not_linked_because = not_linked_because;
  if (host_probe) {
    const auto status = final_sessions.empty() ? costdb::RunStatus::kFailed
                        : final_sessions[0]->state() == devices::SessionState::kCompleted ? costdb::RunStatus::kCompleted
                                                                                           : costdb::RunStatus::kStopped;
    const HostProbeOutcome probe = host_probe->stop(status);
    if (sinks[0]->run_id()) costdb::set_power_run(db, *sinks[0]->run_id(), probe.run_id);
    db.commit_batch();
    if (host_probe_outcome) *host_probe_outcome = probe;
  }
  return outcomes;
}

}  // namespace ergon::app
