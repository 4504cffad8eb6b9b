#include "cli/pipeline_cmd.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/units.h"
#include "cli/plan_cmd.h"
#include "cli/record_status.h"
#include "app/pipeline_run.h"
#include "planner/graph_json.h"
#include "planner/schedule.h"

namespace ergon::cli {
namespace {

std::vector<int> parse_split(const std::string& text) {
  std::vector<int> starts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int op = -1;
    try {
      op = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw InputError("--split takes best, equal, or the op numbers where stages 1.. begin (e.g. 34,67), not '" +
                       text + "'");
    starts.push_back(op);
  }
  return starts;
}

nlohmann::json to_json(const app::PipelineOutcome& o) {
  nlohmann::json j;
  j["model"] = o.model;
  j["schedule"] = o.order;
  j["microbatches"] = o.microbatches;
  j["ops"] = o.ops;
  j["bounds"] = o.prediction.bounds;
  auto& cuts = j["cut_points"] = nlohmann::json::array();
  for (const auto& c : o.cuts) cuts.push_back({{"op", c.op}, {"bytes", c.bytes}});
  auto& stages = j["stages"] = nlohmann::json::array();
  for (std::size_t s = 0; s < o.stages.size(); ++s) {
    const auto& st = o.stages[s];
    const auto& c = o.prediction.stages[s];
    stages.push_back({{"board", st.board},
                      {"power_mode", st.power_mode},
                      {"first_op", st.first_op},
                      {"end_op", st.end_op},
                      {"first", st.first_name},
                      {"last", st.last_name},
                      {"nodes", st.nodes},
                      {"planner", st.planner},
                      {"gap", st.gap},
                      {"in_flight", st.in_flight},
                      {"budget_bytes", st.budget_bytes},
                      {"memory_bytes", st.memory_bytes},
                      {"fixed_bytes", st.fixed_bytes},
                      {"input_bytes", st.input_bytes},
                      {"peak_bytes", st.peak_bytes},
                      {"stash_bytes", st.stash_bytes},
                      {"forward_s", c.times.forward_s},
                      {"backward_s", c.times.backward_s},
                      {"dynamic_j", c.dynamic_j},
                      {"idle_w", st.idle_w},
                      {"recomputes", st.sim.recomputes},
                      {"page_ins", st.sim.page_ins},
                      {"page_outs", st.sim.page_outs},
                      {"steps", st.schedule.steps.size()},
                      {"bubble_fraction", o.prediction.timeline.bubble_fraction(static_cast<int>(s))},
                      {"costs", st.cost_source}});
  }
  auto& links = j["links"] = nlohmann::json::array();
  for (const auto& l : o.links) {
    nlohmann::json x{{"kind", l.kind}, {"bytes", l.bytes}, {"transfer_s", l.transfer_s}, {"sources", l.sources}};
    x["energy_j_per_byte"] = l.energy_j_per_byte ? nlohmann::json(*l.energy_j_per_byte) : nlohmann::json(nullptr);
    links.push_back(std::move(x));
  }
  const auto& p = o.prediction;
  j["prediction"] = {{"time_per_batch_s", p.makespan_s},
                     {"energy_per_batch_j", p.energy_j()},
                     {"compute_j", p.compute_j},
                     {"idle_j", p.idle_j},
                     {"link_j", p.link_j},
                     {"energy_is_lower_bound", !o.missing_link_energy.empty()},
                     {"missing", o.missing_link_energy}};
  auto& timeline = j["timeline"] = nlohmann::json::array();
  for (const auto& t : p.timeline.tasks)
    timeline.push_back({{"kind", planner::to_string(t.kind)},
                        {"stage", t.stage},
                        {"microbatch", t.microbatch},
                        {"start_s", t.start_s},
                        {"end_s", t.end_s}});
  j["search"] = {{"stages_evaluated", o.stages_evaluated},
                 {"splits_simulated", o.splits_simulated},
                 {"stages_refined", o.stages_refined},
                 {"stopped_early", o.stopped_early},
                 {"wall_s", o.wall_s}};
  return j;
}

void print_text(const app::PipelineOutcome& o, std::ostream& out) {
  const auto& p = o.prediction;
  out << fmt::format("pipeline: {}, {} boards, {} micro-batches per batch, {}\n", o.model, o.stages.size(),
                     o.microbatches, o.order);
  for (std::size_t s = 0; s < o.stages.size(); ++s) {
    const auto& st = o.stages[s];
    const auto& c = p.stages[s];
    out << fmt::format("stage {} on {}{}: ops {}..{} ({} .. {}), {}{}\n", s, st.board,
                       st.power_mode.empty() ? "" : " in " + st.power_mode, st.first_op, st.end_op - 1,
                       st.first_name, st.last_name, st.planner,
                       st.planner == "store-all" ? "" : fmt::format(" (gap {:.2f} %)", 100 * st.gap));
    out << fmt::format("  memory {} of {} ({} in flight: fixed {}, stash {} each), forward {:.4g} s, backward "
                       "{:.4g} s, {:.4g} J above idle per micro-batch; {} recomputes, {} page-ins; idle {:.0f} % "
                       "of the batch\n",
                       format_bytes(st.memory_bytes), format_bytes(st.budget_bytes), st.in_flight,
                       format_bytes(st.fixed_bytes), format_bytes(st.stash_bytes), c.times.forward_s,
                       c.times.backward_s, c.dynamic_j, st.sim.recomputes, st.sim.page_ins,
                       100 * p.timeline.bubble_fraction(static_cast<int>(s)));
    // Which costs the stage was planned on: measured, or the profile (and why, when --db's
    // could not be used).
    std::istringstream sources(st.cost_source);
    for (std::string line; std::getline(sources, line);) out << "  " << line << "\n";
    if (s < o.links.size()) {
      const auto& l = o.links[s];
      out << fmt::format("link {} ({}): {} each way per micro-batch, {:.4g} s a transfer, {}\n", s, l.kind,
                         format_bytes(l.bytes), l.transfer_s,
                         l.energy_j_per_byte ? fmt::format("{:.3g} J per byte", *l.energy_j_per_byte)
                                             : std::string("energy per byte not published"));
      for (const auto& src : l.sources)
        if (src.starts_with("measured:")) out << "  " << src << "\n";
    }
  }
  const bool lower = !o.missing_link_energy.empty();
  out << fmt::format("per batch: {:.6g} s, {}{:.6g} J (boards above idle {:.6g} J, idle {:.6g} J, links {:.6g} J)\n",
                     p.makespan_s, lower ? ">= " : "", p.energy_j(), p.compute_j, p.idle_j, p.link_j);
  for (const auto& m : o.missing_link_energy)
    out << "warning: " << m << ": the energy above is a lower bound by that link's own power\n";
  out << fmt::format("costed {} stages on their boards ({} planned beyond store-all's bound) and simulated {} splits "
                     "in {:.2f} s{}\n",
                     o.stages_evaluated, o.stages_refined, o.splits_simulated, o.wall_s, o.stopped_early ? " (stopped by --time-limit: the best split among those costed)" : "");
}

}  // namespace

namespace {

int validate_pipeline(const app::PipelineArgs& args, const PipelineOutput& output, std::ostream& out) {
  if (output.split != "best") throw InputError("--validate runs the best split: drop --split");
  if (output.execute && output.ports.empty())
    throw InputError("--execute runs each stage on an ergon-agent: give one --port per board");
  app::PipelineRunRequest request;
  request.ports = output.ports;
  request.speed = output.speed;
  request.db = args.db.empty() ? "ergon.db" : args.db;
  request.execute = output.execute;
  request.interrupts = &install_interrupt_counter();
  const bool tty = !output.json && ::isatty(STDERR_FILENO) == 1;
  const auto r = app::run_pipeline(args, request, [&](app::PipelineRunPhase p) {
    if (!tty) return;
    std::cerr << (p == app::PipelineRunPhase::kPlanning  ? "planning the pipeline\n"
                  : p == app::PipelineRunPhase::kRunning ? "running it on the boards (activations and gradients relayed "
                                                           "through this host)\n"
                                                         : "attributing each board's run\n");
  });
  auto pct = [](double measured, double predicted) {
    return predicted > 0 ? fmt::format("{:+.2f} %", 100 * (measured / predicted - 1)) : std::string("-");
  };
  if (output.json) {
    nlohmann::json j;
    j["plan"] = to_json(r.plan);
    j["boards"] = nlohmann::json::array();
    for (const auto& b : r.boards)
      j["boards"].push_back({{"board", b.board},
                             {"run", b.run_id},
                             {"predicted_busy_s", b.predicted_busy_s},
                             {"measured_busy_s", b.measured_busy_s},
                             {"predicted_dynamic_j", b.predicted_dynamic_j},
                             {"measured_dynamic_j", b.measured_dynamic_j ? nlohmann::json(*b.measured_dynamic_j)
                                                                         : nlohmann::json(nullptr)},
                             {"measured_transfer_s", b.measured_transfer_s},
                             {"measured_link_j", b.measured_link_j},
                             {"idle_w", b.idle_w},
                             {"steps", b.steps},
                             {"steps_arrived", b.steps_arrived}});
    j["predicted_makespan_s"] = r.predicted_makespan_s;
    j["measured_makespan_s"] = r.measured_makespan_s;
    j["predicted_energy_j"] = r.predicted_energy_j;
    j["measured_energy_j"] = r.measured_energy_j ? nlohmann::json(*r.measured_energy_j) : nlohmann::json(nullptr);
    j["incomplete"] = r.incomplete;
    if (output.execute) {
      j["gradients_equal"] = nlohmann::json::array();
      for (const auto& g : r.gradients_equal) j["gradients_equal"].push_back(g ? nlohmann::json(*g) : nlohmann::json(nullptr));
    }
    out << j.dump(2) << "\n";
    return r.incomplete.empty() && (!output.execute || r.all_gradients_equal()) ? 0 : 1;
  }
  print_text(r.plan, out);
  out << fmt::format("\n{:<6} {:<9} {:>5} {:>12} {:>12} {:>9} {:>12} {:>12} {:>9} {:>11}\n", "stage", "board", "run",
                     "busy pred", "measured", "error", "J pred", "measured", "error", "link s");
  for (std::size_t s = 0; s < r.boards.size(); ++s) {
    const auto& b = r.boards[s];
    out << fmt::format("{:<6} {:<9} {:>5} {:>10.4g} s {:>10.4g} s {:>9} {:>10.4g} J {:>12} {:>9} {:>9.4g} s\n", s,
                       b.board, b.run_id, b.predicted_busy_s, b.measured_busy_s,
                       pct(b.measured_busy_s, b.predicted_busy_s), b.predicted_dynamic_j,
                       b.measured_dynamic_j ? fmt::format("{:.4g} J", *b.measured_dynamic_j) : "unknown",
                       b.measured_dynamic_j ? pct(*b.measured_dynamic_j, b.predicted_dynamic_j) : "-",
                       b.measured_transfer_s);
  }
  const bool lower = !r.plan.missing_link_energy.empty();
  out << fmt::format("per batch: {:.6g} s predicted, {:.6g} s measured ({}); energy {}{:.6g} J predicted, {}\n",
                     r.predicted_makespan_s, r.measured_makespan_s, pct(r.measured_makespan_s, r.predicted_makespan_s),
                     lower ? ">= " : "", r.predicted_energy_j,
                     r.measured_energy_j ? fmt::format("{:.6g} J measured ({})", *r.measured_energy_j,
                                                       pct(*r.measured_energy_j, r.predicted_energy_j))
                                         : std::string("measured energy unknown (a board without power samples)"));
  out << "  busy: each board's compute steps; J: their energy above idle; link s: its transfer spans, waits for "
         "the other board included\n";
  if (!r.incomplete.empty()) out << "incomplete: " << r.incomplete << "\n";
  if (output.execute) {
    for (std::size_t s = 0; s < r.gradients_equal.size(); ++s) {
      const auto& g = r.gradients_equal[s];
      out << fmt::format("gradients of stage {} over {} micro-batches, on real tensors: {}\n", s, r.plan.microbatches,
                         !g   ? "no report from its board"
                         : *g ? "equal a single-process store-all run bit for bit"
                              : "DIFFER from a single-process store-all run");
    }
  }
  return r.incomplete.empty() && (!output.execute || r.all_gradients_equal()) ? 0 : 1;
}

}  // namespace

int run_pipeline(const app::PipelineArgs& args, const PipelineOutput& output, std::ostream& out) {
  if (output.validate) return validate_pipeline(args, output, out);
  if (!output.ports.empty()) throw InputError("--port is for --validate");
  if (output.execute) throw InputError("--execute is for --validate --port");
  app::PipelineOutcome o;
  if (output.split == "best") {
    app::PipelineProgress progress;
    if (!output.json && ::isatty(STDERR_FILENO) == 1)
      progress.on_stage = [](std::size_t done, std::size_t total) {
        if (done % 8 == 0 || done == total)
          std::cerr << fmt::format("\r  costing stages on their boards: {} of {}", done, total)
                    << (done == total ? "\n" : "") << std::flush;
      };
    o = app::plan_pipeline(args, progress);
  } else {
    o = app::predict_pipeline(args, output.split == "equal" ? app::equal_starts(args) : parse_split(output.split));
  }
  if (!output.out_dir.empty()) {
    std::filesystem::create_directories(output.out_dir);
    for (std::size_t s = 0; s < o.stages.size(); ++s) {
      const auto& st = o.stages[s];
      const auto base = std::filesystem::path(output.out_dir) / fmt::format("stage{}", s);
      planner::write_graph_json(st.graph, base.string() + ".json");
      write_schedule(planner::encode_schedule(st.schedule, st.graph.size()), base.string() + ".sched");
    }
    std::cerr << fmt::format("wrote {} stages' graphs and schedules to {}\n", o.stages.size(), output.out_dir);
  }
  std::optional<app::GradientCheck> check;
  if (output.check_gradients) {
    const auto scratch = std::filesystem::temp_directory_path() / fmt::format("ergon-pipeline-{}", ::getpid());
    check = app::check_gradients(o, scratch.string());
  }
  if (output.json) {
    nlohmann::json j = to_json(o);
    if (check)
      j["gradient_check"] = {{"microbatches", check->microbatches},       {"stages", check->stages},
                             {"parameter_tensors", check->parameter_tensors}, {"mismatches", check->mismatches},
                             {"first_mismatch", check->first_mismatch},       {"equal", check->equal()},
                             {"wall_s", check->wall_s}};
    out << j.dump(2) << "\n";
  } else {
    print_text(o, out);
    if (check)
      out << (check->equal()
                  ? fmt::format("gradients: {} micro-batches through {} stages on real tensors, each stage on its own "
                                "schedule, equal a single-process store-all run bit for bit ({} parameter tensors, "
                                "{:.1f} s)\n",
                                check->microbatches, check->stages, check->parameter_tensors, check->wall_s)
                  : fmt::format("gradients: {} of {} parameter tensors differ from a single-process store-all run "
                                "(first: {})\n",
                                check->mismatches, check->parameter_tensors, check->first_mismatch));
  }
  return check && !check->equal() ? 1 : 0;
}

}  // namespace ergon::cli
