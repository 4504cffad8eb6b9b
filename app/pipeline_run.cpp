#include "app/pipeline_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <map>
#include <memory>

#include "app/attribute.h"
#include "app/record.h"
#include "app/step_plans.h"
#include "common/error.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "planner/pipeline.h"

namespace ergon::app {
namespace {

using profiler::Phase;

devices::PlannedOp transfer_entry(uint64_t bytes, uint32_t tag, Phase phase) {
  if (bytes > UINT32_MAX) throw InputError(fmt::format("a transfer of {} bytes is more than a link test moves", bytes));
  return devices::PlannedOp{.shape = profiler::transfer(static_cast<uint32_t>(bytes), tag),
                            .phase = phase,
                            .windows = 1,
                            .idle_after_us = 0,
                            .warmup_reps = 0};
}

}  // namespace

uint32_t pipeline_transfer_tag(int link, int microbatch, bool gradient) {
  return 1 + static_cast<uint32_t>((link * 65536 + microbatch) * 2 + (gradient ? 1 : 0));
}

std::vector<devices::ProfilePlan> pipeline_board_plans(const PipelineOutcome& o, uint32_t idle_us) {
  const int S = static_cast<int>(o.stages.size());
  std::vector<devices::ProfilePlan> plans(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) {
    const PipelineStage& stage = o.stages[static_cast<std::size_t>(s)];
    const devices::ProfilePlan steps = schedule_plan(stage.graph, stage.schedule);
    // The schedule's entries (one per step but frees) split where the micro-batch's stash is
    // taken; the receive-gradient node's compute is where the gradient comes in.
    const std::size_t split_step = planner::backward_part_begins(stage.graph, stage.schedule);
    std::size_t split_entry = 0, entry = 0;
    std::optional<std::size_t> receive_entry;
    for (std::size_t i = 0; i < stage.schedule.steps.size(); ++i) {
      const planner::Step& st = stage.schedule.steps[i];
      if (st.kind == planner::StepKind::kFree) continue;
      if (i < split_step) split_entry = entry + 1;
      if (st.kind == planner::StepKind::kCompute &&
          stage.graph.nodes[static_cast<std::size_t>(st.node)].op == "receive" && !receive_entry)
        receive_entry = entry;
      ++entry;
    }
    if (s + 1 < S && (!receive_entry || *receive_entry < split_entry))
      throw InputError(fmt::format("stage {}'s schedule takes its gradient before its forward part ends", s));

    devices::ProfilePlan& plan = plans[static_cast<std::size_t>(s)];
    plan.min_window_us = 0;
    plan.ops.push_back({.shape = profiler::idle(idle_us), .phase = Phase::kIdle, .windows = 1});
    std::vector<const planner::PipelineTask*> tasks;
    for (const auto& t : o.prediction.timeline.tasks)
      if (t.stage == s && (t.kind == planner::PipelineTask::Kind::kForward ||
                           t.kind == planner::PipelineTask::Kind::kBackward))
        tasks.push_back(&t);
    std::stable_sort(tasks.begin(), tasks.end(), [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
    const uint64_t in_bytes = s > 0 ? o.links[static_cast<std::size_t>(s - 1)].bytes : 0;
    const uint64_t out_bytes = s + 1 < S ? o.links[static_cast<std::size_t>(s)].bytes : 0;
    for (const auto* t : tasks) {
      const int mb = t->microbatch;
      if (t->kind == planner::PipelineTask::Kind::kForward) {
        if (s > 0) plan.ops.push_back(transfer_entry(in_bytes, pipeline_transfer_tag(s - 1, mb, false), Phase::kLinkReceive));
        for (std::size_t e = 0; e < split_entry; ++e) plan.ops.push_back(steps.ops[e]);
        if (s + 1 < S) plan.ops.push_back(transfer_entry(out_bytes, pipeline_transfer_tag(s, mb, false), Phase::kLinkSend));
      } else {
        for (std::size_t e = split_entry; e < steps.ops.size(); ++e) {
          if (receive_entry && e == *receive_entry)
            plan.ops.push_back(transfer_entry(out_bytes, pipeline_transfer_tag(s, mb, true), Phase::kLinkReceive));
          else
            plan.ops.push_back(steps.ops[e]);
        }
        if (s > 0) plan.ops.push_back(transfer_entry(in_bytes, pipeline_transfer_tag(s - 1, mb, true), Phase::kLinkSend));
      }
    }
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      plan.ops[i].op_id = static_cast<uint32_t>(i);
      plan.ops[i].windows = 1;
      plan.ops[i].idle_after_us = 0;
      plan.ops[i].warmup_reps = 0;
    }
  }
  return plans;
}

PipelineRunResult run_pipeline(const PipelineArgs& args, const PipelineRunRequest& request,
                               const std::function<void(PipelineRunPhase)>& progress) {
  auto phase = [&](PipelineRunPhase p) {
    if (progress) progress(p);
  };
  phase(PipelineRunPhase::kPlanning);
  PipelineRunResult r;
  r.plan = plan_pipeline(args);
  const PipelineOutcome& o = r.plan;
  const int S = static_cast<int>(o.stages.size());
  if (!request.ports.empty() && static_cast<int>(request.ports.size()) != S)
    throw InputError(fmt::format("{} stages need {} ports, one per board in --boards order, not {}", S, S,
                                 request.ports.size()));
  if (request.ports.empty() && request.speed <= 0)
    throw InputError("a pipeline's simulated boards must run in real time (a speed above 0): one board's wait "
                     "for another is real time");
  const auto plans = pipeline_board_plans(o);

  phase(PipelineRunPhase::kRunning);
  std::vector<std::unique_ptr<devices::SimServer>> sims;
  RecordRequest rec;
  rec.db_path = request.db;
  rec.options.mode = devices::protocol::StartMode::kSchedule;
  rec.options.relay = std::make_shared<devices::LinkRelay>();
  rec.port_plans = plans;
  if (request.ports.empty()) {
    for (int s = 0; s < S; ++s) {
      const auto& stage = o.stages[static_cast<std::size_t>(s)];
      devices::SimServerOptions opt{.speed = request.speed,
                                    .seed = request.seed + static_cast<uint64_t>(s),
                                    .power_mode = stage.power_mode};
      if (s + 1 < S) opt.link = o.links[static_cast<std::size_t>(s)].kind;
      else if (s > 0) opt.link = o.links[static_cast<std::size_t>(s - 1)].kind;
      const auto board = devices::find_board(stage.board);
      if (!board) throw InputError("board '" + stage.board + "' cannot be simulated: give its --port");
      sims.push_back(devices::SimServer::open_pty(*board, opt));
      sims.back()->start();
      rec.ports.push_back(sims.back()->link_name());
    }
  } else {
    rec.ports = request.ports;
  }
  std::atomic<int> interrupts{0};
  const auto outcomes = record_boards(rec, {}, interrupts);
  for (auto& sim : sims) sim->stop();

  phase(PipelineRunPhase::kAttributing);
  auto db = costdb::Database::open(request.db);
  const int K = o.microbatches;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  bool energy_known = true;
  for (int s = 0; s < S; ++s) {
    const auto& out = outcomes[static_cast<std::size_t>(s)];
    const auto& stage_cost = o.prediction.stages[static_cast<std::size_t>(s)];
    PipelineBoardResult b;
    b.board = o.stages[static_cast<std::size_t>(s)].board;
    b.predicted_busy_s = K * (stage_cost.times.forward_s + stage_cost.times.backward_s);
    b.predicted_dynamic_j = K * stage_cost.dynamic_j;
    b.steps = static_cast<int>(plans[static_cast<std::size_t>(s)].ops.size()) - 1;
    if (out.state != devices::SessionState::kCompleted && r.incomplete.empty())
      r.incomplete = fmt::format("{} on {}: {} ({})", b.board, out.port, devices::to_string(out.state), out.error);
    if (!out.run_id) {
      r.boards.push_back(b);
      energy_known = false;
      continue;
    }
    b.run_id = *out.run_id;
    const AttributedRun a = attribute_run(db, b.run_id);
    b.idle_w = a.attribution.idle_power_w;
    double dynamic = 0;
    bool covered = a.attribution.samples_seen > 0;
    for (const auto& w : a.attribution.windows) {
      if (w.span.phase == Phase::kIdle) continue;
      ++b.steps_arrived;
      const double begin = a.attribution.clock.host_ns(w.span.begin_ticks);
      const double end = a.attribution.clock.host_ns(w.span.end_ticks);
      b.first_ns = b.steps_arrived == 1 ? begin : std::min(b.first_ns, begin);
      b.last_ns = std::max(b.last_ns, end);
      if (w.span.phase == Phase::kLinkSend || w.span.phase == Phase::kLinkReceive) {
        b.measured_transfer_s += w.time_s;
        b.measured_link_j += w.net_energy_j;
        covered = covered && w.covered;
        continue;
      }
      b.measured_busy_s += w.time_s;
      dynamic += w.net_energy_j;
      covered = covered && w.covered;
    }
    if (covered) b.measured_dynamic_j = dynamic;
    else energy_known = false;
    if (b.steps_arrived > 0) {
      first = std::min(first, b.first_ns);
      last = std::max(last, b.last_ns);
    }
    r.boards.push_back(b);
  }
  db.commit_batch();
  r.predicted_makespan_s = o.prediction.makespan_s;
  r.predicted_energy_j = o.prediction.energy_j();
  r.measured_makespan_s = last > first ? (last - first) * 1e-9 : 0;
  if (energy_known) {
    // Every board draws idle power over the whole makespan, and its steps' power above it.
    double e = 0;
    for (const auto& b : r.boards) e += b.idle_w * r.measured_makespan_s + *b.measured_dynamic_j + b.measured_link_j;
    r.measured_energy_j = e;
  }
  return r;
}

}  // namespace ergon::app
