#include "app/pipeline_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <unistd.h>

#include <atomic>
#include <filesystem>
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
#include "planner/schedule.h"
#include "planner/pipeline.h"
#include "runtime/executor.h"

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

std::vector<PipelineBoardRun> pipeline_board_runs(const PipelineOutcome& o, uint32_t idle_us) {
  const int S = static_cast<int>(o.stages.size());
  std::vector<PipelineBoardRun> runs(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) {
    const PipelineStage& stage = o.stages[static_cast<std::size_t>(s)];
    const devices::ProfilePlan base = schedule_plan(stage.graph, stage.schedule);
    const auto& steps = stage.schedule.steps;
    // The schedule's steps split where the micro-batch's stash is taken; the
    // receive-gradient node's compute is where the gradient comes in.
    const std::size_t split = planner::backward_part_begins(stage.graph, stage.schedule);
    std::vector<std::size_t> entry_of(steps.size(), 0);  // step -> its schedule_plan entry
    std::optional<std::size_t> receive_step;
    for (std::size_t k = 0, e = 0; k < steps.size(); ++k) {
      if (steps[k].kind == planner::StepKind::kFree) continue;
      entry_of[k] = e++;
      if (steps[k].kind == planner::StepKind::kCompute &&
          stage.graph.nodes[static_cast<std::size_t>(steps[k].node)].op == "receive" && !receive_step)
        receive_step = k;
    }
    if (s + 1 < S && (!receive_step || *receive_step < split))
      throw InputError(fmt::format("stage {}'s schedule takes its gradient before its forward part ends", s));

    PipelineBoardRun& run = runs[static_cast<std::size_t>(s)];
    devices::ProfilePlan& plan = run.plan;
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
    auto move = [&](uint64_t bytes, uint32_t tag, Phase phase) {
      plan.ops.push_back(transfer_entry(bytes, tag, phase));
      run.steps.emplace_back(phase == Phase::kLinkSend ? 4 : 5, tag);
    };
    auto part = [&](std::size_t from, std::size_t to, int mb) {
      for (std::size_t k = from; k < to; ++k) {
        const uint32_t code = static_cast<uint32_t>(steps[k].node) | static_cast<uint32_t>(mb) << 24;
        if (receive_step && k == *receive_step) {
          move(out_bytes, pipeline_transfer_tag(s, mb, true), Phase::kLinkReceive);
          continue;
        }
        run.steps.emplace_back(static_cast<uint8_t>(steps[k].kind), code);
        if (steps[k].kind != planner::StepKind::kFree) plan.ops.push_back(base.ops[entry_of[k]]);
      }
    };
    for (const auto* t : tasks) {
      const int mb = t->microbatch;
      if (mb > 255) throw InputError("a pipeline run takes at most 256 micro-batches");
      if (t->kind == planner::PipelineTask::Kind::kForward) {
        if (s > 0) move(in_bytes, pipeline_transfer_tag(s - 1, mb, false), Phase::kLinkReceive);
        part(0, split, mb);
        if (s + 1 < S) move(out_bytes, pipeline_transfer_tag(s, mb, false), Phase::kLinkSend);
      } else {
        part(split, steps.size(), mb);
        if (s > 0) move(in_bytes, pipeline_transfer_tag(s - 1, mb, true), Phase::kLinkSend);
      }
    }
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      plan.ops[i].op_id = static_cast<uint32_t>(i);
      plan.ops[i].windows = 1;
      plan.ops[i].idle_after_us = 0;
      plan.ops[i].warmup_reps = 0;
    }
  }
  return runs;
}

std::vector<devices::ProfilePlan> pipeline_board_plans(const PipelineOutcome& o, uint32_t idle_us) {
  std::vector<devices::ProfilePlan> plans;
  for (auto& r : pipeline_board_runs(o, idle_us)) plans.push_back(std::move(r.plan));
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
  const auto board_runs = pipeline_board_runs(o);
  std::vector<devices::ProfilePlan> plans;
  for (const auto& br : board_runs) plans.push_back(br.plan);
  if (request.execute && request.ports.empty())
    throw InputError("executing on real tensors needs an ergon-agent per stage: give --port for each");

  phase(PipelineRunPhase::kRunning);
  std::vector<std::unique_ptr<devices::SimServer>> sims;
  RecordRequest rec;
  rec.db_path = request.db;
  rec.options.mode = request.execute ? devices::protocol::StartMode::kExecute : devices::protocol::StartMode::kSchedule;
  rec.options.relay = std::make_shared<devices::LinkRelay>();
  rec.port_plans = plans;
  if (request.execute) {
    if (!o.forward || o.model.empty()) throw InputError("executing on real tensors needs a zoo model (--model)");
    for (int s = 0; s < S; ++s) {
      const auto& stage = o.stages[static_cast<std::size_t>(s)];
      devices::ExecuteRequest e;
      e.model = args.model;
      e.batch = static_cast<uint16_t>(args.batch);
      e.seed = 1;
      e.steps = board_runs[static_cast<std::size_t>(s)].steps;
      e.stage = devices::ExecuteRequest::Stage{.first_op = static_cast<uint32_t>(stage.first_op),
                                               .end_op = static_cast<uint32_t>(stage.end_op),
                                               .microbatches = static_cast<uint16_t>(o.microbatches)};
      rec.port_executes.push_back(std::move(e));
    }
  }
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
  std::atomic<int> no_interrupts{0};
  const auto outcomes = record_boards(rec, {}, request.interrupts ? *request.interrupts : no_interrupts);
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
        // A transfer's own power above idle is small beside its wait; a window the samples
        // did not cover adds none rather than making the board's energy unknown.
        if (w.covered) b.measured_link_j += w.net_energy_j;
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
  if (request.execute) {
    // The whole model, store-all, in this process: micro-batch j with seed j + 1 and the
    // parameters of seed 1, each stage's ops' gradients digested in micro-batch order.
    const planner::ForwardGraph& forward = *o.forward;
    const planner::TrainingGraph whole = runtime::structure_of(forward);
    const auto params = runtime::initial_parameters(forward, whole, 1);
    std::vector<uint64_t> expected(static_cast<std::size_t>(S), 0xcbf29ce484222325ULL);
    const auto scratch = std::filesystem::temp_directory_path() /
                         fmt::format("ergon-pipeline-reference-{}-{}", ::getpid(), request.seed);
    for (int j = 0; j < K; ++j) {
      const runtime::ExecutionResult ref =
          runtime::execute(forward, whole, planner::store_all_schedule(whole), scratch / std::to_string(j),
                           static_cast<uint32_t>(j + 1), &params);
      for (int s = 0; s < S; ++s) {
        const auto& st = o.stages[static_cast<std::size_t>(s)];
        expected[static_cast<std::size_t>(s)] = runtime::gradient_digest(
            {ref.parameter_grads.begin() + st.first_op, ref.parameter_grads.begin() + st.end_op},
            expected[static_cast<std::size_t>(s)]);
      }
    }
    std::error_code ignored;
    std::filesystem::remove_all(scratch, ignored);
    for (int s = 0; s < S; ++s) {
      const auto& report = outcomes[static_cast<std::size_t>(s)].stats.execution;
      r.gradients_equal.push_back(report ? std::optional<bool>(report->gradient_digest == expected[static_cast<std::size_t>(s)])
                                         : std::nullopt);
    }
  }
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
