#include "gui/model/views.h"

#include <algorithm>
#include <map>
#include <set>

namespace ergon::gui {

std::vector<ParetoSeries> pareto_series(const std::vector<costdb::PlanRow>& plans, const std::string& graph_digest,
                                        std::optional<double> deadline_s,
                                        const std::map<std::string, MemoryBasis>& basis) {
  // Without a digest: the latest plan's model, board and objective, in any power mode (each
  // mode's costs make a graph of its own).
  const costdb::PlanRow* latest = nullptr;
  for (const auto& p : plans)
    if (latest == nullptr || p.created_at_ns >= latest->created_at_ns) latest = &p;
  const auto same_graph = [&](const costdb::PlanRow& p) {
    if (!graph_digest.empty()) return p.graph_digest == graph_digest;
    return latest != nullptr && p.model == latest->model && p.board_kind == latest->board_kind &&
           p.cost_source == latest->cost_source && p.objective == latest->objective;
  };
  std::map<std::string, ParetoSeries> by_planner;
  for (const auto& p : plans) {
    if (!same_graph(p) || p.schedule.empty() || !p.energy_j) continue;
    if (deadline_s && p.deadline_s && *p.deadline_s > *deadline_s) continue;
    const std::string name = p.power_mode.empty() ? p.planner : p.planner + "@" + p.power_mode;
    auto& s = by_planner[name];
    s.planner = name;
    ParetoPoint point{.plan_id = p.id, .budget_bytes = p.budget_bytes, .activation_bytes = p.budget_bytes,
                      .energy_j = *p.energy_j, .time_s = p.time_s.value_or(0)};
    if (const auto b = basis.find(p.graph_digest); b != basis.end()) {
      const uint64_t fixed = p.objective == "total" ? b->second.fixed_bytes : 0;
      point.activation_bytes = p.budget_bytes > fixed ? p.budget_bytes - fixed : 0;
      if (b->second.store_all_bytes > 0)
        point.percent_of_store_all =
            100.0 * static_cast<double>(point.activation_bytes) / static_cast<double>(b->second.store_all_bytes);
    }
    s.points.push_back(point);
  }
  std::vector<ParetoSeries> out;
  for (auto& [name, s] : by_planner) {
    std::sort(s.points.begin(), s.points.end(), [](const ParetoPoint& a, const ParetoPoint& b) {
      return a.budget_bytes != b.budget_bytes ? a.budget_bytes < b.budget_bytes : a.energy_j < b.energy_j;
    });
    double best = 1e300;
    for (auto& p : s.points) {  // by growing budget: on the front when cheaper than all smaller
      p.on_front = p.energy_j < best;
      best = std::min(best, p.energy_j);
    }
    out.push_back(std::move(s));
  }
  return out;
}

ScheduleGrid schedule_grid(const planner::TrainingGraph& graph, const planner::Schedule& schedule) {
  ScheduleGrid g;
  g.nodes = graph.size();
  g.stages = graph.size();
  const auto n_nodes = static_cast<std::size_t>(g.nodes);
  g.cells.assign(n_nodes * n_nodes, Cell::kEmpty);
  std::vector<char> computed(n_nodes, 0), ram(n_nodes, 0), ssd(n_nodes, 0);
  std::size_t stage = 0;
  bool stage_computed = false;  // the stage's own node is done: a page-out or compute opens the next
  auto cell = [&](std::size_t node) -> Cell& { return g.cells[stage * n_nodes + node]; };
  auto close_stage = [&] {
    for (std::size_t j = 0; j < n_nodes; ++j) {
      if (cell(j) != Cell::kEmpty) continue;
      if (ram[j] != 0) cell(j) = Cell::kResident;
      else if (ssd[j] != 0) cell(j) = Cell::kOnStorage;
    }
    ++stage;
    stage_computed = false;
  };
  for (const planner::Step& st : schedule.steps) {
    if (st.node < 0 || st.node >= g.nodes) continue;
    const auto n = static_cast<std::size_t>(st.node);
    const bool opens = st.kind == planner::StepKind::kCompute || st.kind == planner::StepKind::kPageOut;
    if (opens && stage_computed) close_stage();
    if (stage >= n_nodes) break;
    switch (st.kind) {
      case planner::StepKind::kCompute:
        cell(n) = computed[n] != 0 ? Cell::kRecompute : Cell::kCompute;
        stage_computed = stage_computed || computed[n] == 0;
        computed[n] = 1;
        ram[n] = 1;
        break;
      case planner::StepKind::kFree:
        ram[n] = 0;
        break;
      case planner::StepKind::kPageOut:
        cell(n) = Cell::kPageOut;
        ssd[n] = 1;
        break;
      case planner::StepKind::kPageIn:
        cell(n) = Cell::kPageIn;
        ram[n] = 1;
        break;
    }
  }
  if (stage < n_nodes && stage_computed) close_stage();
  return g;
}

std::vector<uint64_t> memory_timeline(const planner::TrainingGraph& graph, const planner::Schedule& schedule) {
  std::vector<uint64_t> out;
  out.reserve(schedule.steps.size());
  std::vector<char> ram(static_cast<std::size_t>(graph.size()), 0);
  uint64_t held = 0;
  for (const planner::Step& st : schedule.steps) {
    if (st.node < 0 || st.node >= graph.size()) {
      out.push_back(held);
      continue;
    }
    const auto n = static_cast<std::size_t>(st.node);
    const uint64_t bytes = graph.nodes[n].output_bytes;
    const bool allocates = st.kind == planner::StepKind::kCompute || st.kind == planner::StepKind::kPageIn;
    if (allocates && ram[n] == 0) ram[n] = 1, held += bytes;
    if (st.kind == planner::StepKind::kFree && ram[n] != 0) ram[n] = 0, held -= bytes;
    out.push_back(held);
  }
  return out;
}

ScheduleTotals schedule_totals(const planner::TrainingGraph& graph, const planner::Schedule& schedule) {
  const planner::ScheduleReport r = planner::simulate(graph, schedule);
  return {r.energy_j, r.compute_time_s + r.paging_time_s, r.peak_bytes, r.recomputes, r.page_ins, r.page_outs};
}

PowerTrace power_trace(const costdb::RunData& run) {
  PowerTrace t;
  if (run.tick_hz == 0) return t;
  uint64_t origin = UINT64_MAX;
  for (const auto& s : run.samples) origin = std::min(origin, s.t_ticks);
  for (const auto& sp : run.spans) origin = std::min(origin, sp.begin_ticks);
  if (origin == UINT64_MAX) return t;
  const auto seconds = [&](uint64_t ticks) {
    return static_cast<double>(ticks - origin) / static_cast<double>(run.tick_hz);
  };
  for (const auto& s : run.samples) {
    t.t_s[s.rail].push_back(seconds(s.t_ticks));
    t.power_w[s.rail].push_back(static_cast<double>(s.power_uw) * 1e-6);
  }
  for (auto& [rail, xs] : t.t_s) {  // samples arrive in order per rail; keep them sorted anyway
    auto& ys = t.power_w[rail];
    if (std::is_sorted(xs.begin(), xs.end())) continue;
    std::vector<std::size_t> idx(xs.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return xs[a] < xs[b]; });
    std::vector<double> x2, y2;
    for (std::size_t i : idx) x2.push_back(xs[i]), y2.push_back(ys[i]);
    xs.swap(x2);
    ys.swap(y2);
  }
  for (const auto& sp : run.spans)
    t.bands.push_back({seconds(sp.begin_ticks), seconds(sp.end_ticks), sp.phase, sp.op_id});
  for (const auto& [rail, xs] : t.t_s)
    if (!xs.empty()) t.duration_s = std::max(t.duration_s, xs.back());
  for (const auto& b : t.bands) t.duration_s = std::max(t.duration_s, b.end_s);
  return t;
}

PowerTrace load_power_trace(costdb::Database& db, int64_t run_id) {
  PowerTrace t = power_trace(costdb::load_run_data(db, run_id));
  for (const auto& rail : costdb::list_rails(db, run_id)) t.rail_names[rail.id] = rail.name;
  return t;
}

Gantt pipeline_gantt(const planner::PipelineTimeline& timeline, const std::vector<std::string>& boards,
                     const std::vector<std::string>& links) {
  Gantt g;
  g.makespan_s = timeline.makespan_s;
  for (std::size_t s = 0; s < boards.size(); ++s) {
    g.lanes.push_back(boards[s]);
    if (s < links.size()) g.lanes.push_back(links[s]);
  }
  using Kind = planner::PipelineTask::Kind;
  for (const auto& t : timeline.tasks) {
    const bool transfer = t.kind == Kind::kActivation || t.kind == Kind::kGradient;
    g.bars.push_back({2 * t.stage + (transfer ? 1 : 0), t.start_s, t.end_s, t.kind, t.microbatch});
  }
  return g;
}

}  // namespace ergon::gui
