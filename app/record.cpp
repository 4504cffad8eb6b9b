#include "app/record.h"

#include <memory>

#include "app/db_sink.h"
#include "common/clock.h"
#include "common/error.h"
#include "costdb/database.h"
#include "devices/host/recorder.h"

namespace ergon::app {

std::vector<BoardOutcome> record_boards(const RecordRequest& request, const RecordProgress& progress,
                                        const std::atomic<int>& interrupts) {
  if (request.logger_port && request.ports.size() != 1)
    throw InputError("a power logger measures one board: pass exactly one --port with --logger");
  costdb::Database db = costdb::Database::open(request.db_path);
  const SteadyClock clock;
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
  recorder.run(on_commit, interrupts);

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
  return outcomes;
}

}  // namespace ergon::app
