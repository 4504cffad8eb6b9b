// `ergon plan` as a user runs it (app::plan: graph build, bounds, heuristics and solver, all
// under one time limit), timed to the gaps that matter: when the plan in hand was first
// proven within 1 % and within 0.1 % of optimal, and the gap it ends with.
//
// Cases, named plan/BOARD/OBJECTIVE/MODEL/BUDGET (BUDGET in % of store-all's activations):
// every zoo model and every ONNX corpus export (tests/data/onnx) on the pi4, tx2 and
// nrf52840 profiles under both objectives at 50 % and 30 %, and POET's own Cortex-M4 case
// (plan/poet-m4/...: its graph and costs, 737,719 B, deadline 1.5x, POET's objective). All of
// them take hours; pick with a filter:
//
//   build/tests/bench/bench_planner --benchmark_filter='plan/pi4/total/(resnet18-cifar|bert-tiny)/50'
//   ERGON_BENCH_TIME_LIMIT=10 build/tests/bench/bench_planner --benchmark_filter=poet-m4
//
// The greedy stage search alone (greedy/BOARD/OBJECTIVE/MODEL/BUDGET: no time limit, no local
// search, from its own start only) on the graphs its lazy candidate measurement was tuned on:
//
//   build/tests/bench/bench_planner --benchmark_filter=greedy/
//
// The same with its local search run until a whole round changes nothing (search/...), on the
// graphs whose 30 % plans it decides:
//
//   build/tests/bench/bench_planner --benchmark_filter=search/
//
// The memory bound alone (bound/...), on a transformer and the largest graphs:
//
//   build/tests/bench/bench_planner --benchmark_filter=bound/
//
// Capuchin with recomputation only (capuchin/...), the one of POET's baseline starts that
// runs longest where it cannot meet the budget:
//
//   build/tests/bench/bench_planner --benchmark_filter=capuchin/
//
// Counters: nodes, energy_vs_one_pass_pct (-1: no plan), gap_pct against the memory bound.
//
// The time limit is 60 s (ERGON_BENCH_TIME_LIMIT overrides), the gap asked the default
// (0.1 % on published profiles), CBC with 2 threads. Counters:
//   nodes               training nodes
//   to_1pct_s           first moment the best plan known was proven within 1 % (-1: never)
//   to_0.1pct_s         the same for 0.1 %
//   gap_pct             the final gap (-1: no schedule)
//   peak_rss_mb         the case's peak resident memory, as GNU time reports it: the largest
//                       of the planner's process and CBC's (forked for each solve). CBC's
//                       shares the planner's pages at the fork, so the two together take at
//                       most the sum of this and planner_rss_mb
//   planner_rss_mb      the planner's process alone (VmHWM); each case runs in a process of
//                       its own
// Times come from the planner's progress reports (each phase as it starts, and the branch
// and bound's about once a second) and from the end of the call; a gap reached inside a
// phase counts from that phase's end.

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/plan.h"
#include "planner/baselines.h"
#include "planner/bounds.h"
#include "planner/milp.h"
#include "planner/stage_plan.h"
#include "planner/zoo.h"

namespace {

using namespace ergon;

double time_limit_s() {
  if (const char* text = std::getenv("ERGON_BENCH_TIME_LIMIT")) return std::stod(text);
  return 60;
}

/// Peak resident memory since the last reset, in MB (Linux's VmHWM).
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      double kb = 0;
      status >> kb;
      return kb / 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return -1;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

/// What a case's process reports back: its counters, and its label or error.
struct CaseReport {
  double nodes = 0, to_1pct_s = -1, to_01pct_s = -1, gap_pct = -1, planner_rss_mb = -1;
  bool failed = false;
  char text[512] = {};  ///< the label, or the error when `failed`
};

/// Runs one `ergon plan` call as the CLI would, and says how it went.
CaseReport run_case(const app::PlanArgs& args) {
  CaseReport report;
  auto say = [&](const std::string& text) { std::snprintf(report.text, sizeof report.text, "%s", text.c_str()); };
  reset_peak_rss();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto reached = [&](double gap, double at_s) {
    if (gap <= 0.01 + 1e-12 && report.to_1pct_s < 0) report.to_1pct_s = at_s;
    if (gap <= 0.001 + 1e-12 && report.to_01pct_s < 0) report.to_01pct_s = at_s;
  };
  app::PlanProgress progress;
  progress.on_solve = [&](const planner::SolveProgress& p) {
    if (p.incumbent && p.bound && *p.incumbent > 0) reached((*p.incumbent - *p.bound) / *p.incumbent, elapsed_s());
  };
  try {
    const app::PlanOutcome outcome = app::plan(args, progress);
    const auto& r = outcome.result;
    if (r.schedule) reached(r.gap, elapsed_s());
    report.nodes = outcome.graph.size();
    report.gap_pct = r.schedule ? 100 * r.gap : -1;
    say(r.schedule ? planner::to_string(r.status) : "no schedule: " + r.why);
  } catch (const std::exception& e) {
    report.failed = true;
    say(e.what());
  }
  report.planner_rss_mb = peak_rss_mb();
  return report;
}

/// Each case runs in a process of its own, forked here, so that its peak resident memory is
/// what a user's `ergon plan` shows: the largest of the planner's process and CBC's (which
/// the planner forks for each solve, and whose memory VmHWM here would not see).
void BM_Plan(benchmark::State& state, app::PlanArgs args) {
  args.time_limit_s = time_limit_s();
  args.threads = 2;
  for (auto _ : state) {
    int fds[2];
    if (::pipe(fds) != 0) {
      state.SkipWithError("pipe failed");
      return;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      const CaseReport report = run_case(args);
      const bool sent = ::write(fds[1], &report, sizeof report) == static_cast<ssize_t>(sizeof report);
      ::_exit(sent ? 0 : 1);
    }
    ::close(fds[1]);
    CaseReport report;
    const bool got = pid > 0 && ::read(fds[0], &report, sizeof report) == static_cast<ssize_t>(sizeof report);
    ::close(fds[0]);
    rusage usage{};
    int wstatus = 0;
    if (pid > 0) ::wait4(pid, &wstatus, 0, &usage);
    if (!got || report.failed) {
      state.SkipWithError(got ? report.text : "the case's process died without a report");
      return;
    }
    state.counters["nodes"] = report.nodes;
    state.counters["to_1pct_s"] = report.to_1pct_s;
    state.counters["to_0.1pct_s"] = report.to_01pct_s;
    state.counters["gap_pct"] = report.gap_pct;
    // ru_maxrss (KiB): the case's process or, where larger, the largest child it waited for.
    state.counters["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024;
    state.counters["planner_rss_mb"] = report.planner_rss_mb;
    state.SetLabel(report.text);
  }
}

// The greedy stage search alone, its local search given `search_time_s` (0: none; infinity:
// until a whole round changes nothing, which is how fast plans are measured decides how far
// it gets within `ergon plan`'s limit).
void BM_Greedy(benchmark::State& state, app::PlanArgs args, double search_time_s) {
  const planner::TrainingGraph graph = app::load_graph(args);
  const planner::PlanRequest req = planner::for_activations(graph, app::make_request(args, graph));
  std::optional<planner::StagePlan> plan;
  for (auto _ : state)
    plan = planner::greedy_stage_plan(graph, req.budget_bytes, req.deadline_s, req.allowed, search_time_s,
                                      req.objective);
  const double one_pass_j = graph.single_pass_energy_j();
  const double bound_j = planner::memory_lower_bound_j(graph, req.budget_bytes, req.objective, req.allowed);
  const double energy_j = plan ? planner::evaluate_stage_plan(graph, *plan, req.objective).energy_j : -1;
  state.counters["nodes"] = graph.size();
  state.counters["energy_vs_one_pass_pct"] = plan ? 100 * (energy_j / one_pass_j - 1) : -1;
  state.counters["gap_pct"] = plan ? 100 * (1 - bound_j / energy_j) : -1;
}

// The memory bound alone (bound/BOARD/OBJECTIVE/MODEL/BUDGET), timed on the largest graphs;
// counter bound_vs_one_pass_pct.
void BM_Bound(benchmark::State& state, app::PlanArgs args) {
  const planner::TrainingGraph graph = app::load_graph(args);
  const planner::PlanRequest req = planner::for_activations(graph, app::make_request(args, graph));
  double bound_j = 0;
  for (auto _ : state) {
    bound_j = planner::memory_lower_bound_j(graph, req.budget_bytes, req.objective, req.allowed);
    benchmark::DoNotOptimize(bound_j);
  }
  state.counters["nodes"] = graph.size();
  state.counters["bound_vs_one_pass_pct"] = 100 * (bound_j / graph.single_pass_energy_j() - 1);
}

// Capuchin with recomputation only (capuchin/BOARD/total/MODEL/BUDGET), one of the starts POET
// takes from its baselines (there with 5 % of its limit; here with the request's default):
// milliseconds where it meets the budget, and until its cap on evictions where it cannot.
// Counter found (1: a schedule); the label says why where there is none.
void BM_Capuchin(benchmark::State& state, app::PlanArgs args) {
  const planner::TrainingGraph graph = app::load_graph(args);
  planner::PlanRequest req = app::make_request(args, graph);
  req.allowed.paging = false;
  planner::PlanResult result;
  for (auto _ : state) result = planner::plan_baseline("capuchin", graph, req);
  state.counters["nodes"] = graph.size();
  state.counters["found"] = result.schedule ? 1 : 0;
  state.SetLabel(result.why);
}

void add(const std::string& name, const app::PlanArgs& args) {
  benchmark::RegisterBenchmark(name.c_str(), BM_Plan, args)
      ->Iterations(1)
      ->Unit(benchmark::kSecond)
      ->UseRealTime();
}

const bool registered = [] {
  std::vector<std::pair<std::string, app::PlanArgs>> sources;
  for (const auto& entry : planner::zoo_models()) {
    app::PlanArgs a;
    a.model = entry.name;
    sources.emplace_back(entry.name, a);
  }
  // Every export of the corpus, each with the data input its manifest names where it lists the
  // file: vit_b_16_inputs.onnx takes its class token and position embedding as graph inputs
  // that no op reads as a weight, and the importer rightly refuses to guess (ergon plan
  // --onnx-input input, as scripts/onnx_corpus_table.sh passes).
  const std::filesystem::path corpus = std::filesystem::path(ERGON_TEST_DATA_DIR) / "onnx";
  std::map<std::string, std::string> data_input;
  if (std::ifstream manifest{corpus / "manifest.json"}) {
    const nlohmann::json listed = nlohmann::json::parse(manifest);
    for (const auto& m : listed.at("models"))
      data_input[m.at("file").get<std::string>()] = m.at("data_input").get<std::string>();
  }
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(corpus))
    for (const auto& entry : std::filesystem::directory_iterator(corpus))
      if (entry.path().extension() == ".onnx") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    app::PlanArgs a;
    a.onnx_file = file.string();
    if (const auto it = data_input.find(file.filename().string()); it != data_input.end()) a.onnx_inputs = {it->second};
    sources.emplace_back(file.filename().string(), a);
  }
  for (const char* board : {"pi4", "tx2", "nrf52840"})
    for (const char* objective : {"total", "poet"})
      for (const auto& [name, source] : sources)
        for (const char* budget : {"50", "30"}) {
          app::PlanArgs a = source;
          a.board = board;
          a.objective = objective;
          a.budget = std::string(budget) + "%";
          add(std::string("plan/") + board + "/" + objective + "/" + name + "/" + budget, a);
        }
  // POET's README case on its own graph and costs (docs/research/poet_repo.md).
  app::PlanArgs m4;
  m4.graph_file = (std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "poet_resnet18_cifar_m4.json").string();
  m4.budget = "737719";
  m4.deadline = "1.5x";
  m4.objective = "poet";
  add("plan/poet-m4/poet/resnet18-cifar/737719B", m4);
  for (const auto& [board, name] : {std::pair{"nrf52840", "bert-base"}, std::pair{"pi4", "efficientnet_b0.onnx"},
                                    std::pair{"pi4", "densenet121.onnx"}}) {
    const auto source = std::find_if(sources.begin(), sources.end(), [&](const auto& s) { return s.first == name; });
    if (source == sources.end()) continue;
    app::PlanArgs a = source->second;
    a.board = board;
    a.budget = "50%";
    benchmark::RegisterBenchmark((std::string("greedy/") + board + "/total/" + name + "/50").c_str(), BM_Greedy, a,
                                 0.0)
        ->Iterations(1)
        ->Unit(benchmark::kSecond)
        ->UseRealTime();
  }
  for (const char* objective : {"total", "poet"})
    for (const char* name : {"transformer_encoder.onnx", "bert-base", "densenet121.onnx", "gpt2"}) {
      const auto source = std::find_if(sources.begin(), sources.end(), [&](const auto& s) { return s.first == name; });
      if (source == sources.end()) continue;
      app::PlanArgs a = source->second;
      a.board = "pi4";
      a.objective = objective;
      a.budget = "30%";
      benchmark::RegisterBenchmark((std::string("bound/pi4/") + objective + "/" + name + "/30").c_str(), BM_Bound, a)
          ->Unit(benchmark::kMillisecond);
    }
  for (const char* name : {"resnet18-cifar", "resnet50", "mobilenetv2", "bert-base", "densenet121.onnx",
                           "googlenet.onnx", "regnet_y_400mf.onnx", "vit_b_16.onnx"}) {
    const auto source = std::find_if(sources.begin(), sources.end(), [&](const auto& s) { return s.first == name; });
    if (source == sources.end()) continue;
    for (const char* budget : {"50", "30"}) {
      app::PlanArgs a = source->second;
      a.board = "pi4";
      a.objective = "total";
      a.budget = std::string(budget) + "%";
      benchmark::RegisterBenchmark((std::string("capuchin/pi4/total/") + name + "/" + budget).c_str(), BM_Capuchin, a)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (const char* name : {"resnet18-cifar", "resnet50"}) {
    app::PlanArgs a;
    a.model = name;
    a.board = "pi4";
    a.budget = "30%";
    benchmark::RegisterBenchmark((std::string("search/pi4/total/") + name + "/30").c_str(), BM_Greedy, a,
                                 std::numeric_limits<double>::infinity())
        ->Iterations(1)
        ->Unit(benchmark::kSecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
