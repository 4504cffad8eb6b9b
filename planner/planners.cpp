#include "planner/planners.h"

#include "common/error.h"
#include "planner/baselines.h"

namespace ergon::planner {

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = {"poet", "checkmate", "paging"};
    for (const auto& n : baseline_names()) all.push_back(n);
    return all;
  }();
  return names;
}

PlanResult run_planner(const std::string& name, const TrainingGraph& graph,
                       const PlanRequest& request, MilpSolver& solver) {
  PlanRequest req = request;
  if (name == "poet") {
    req.allowed = {.recompute = true, .paging = true};
  } else if (name == "checkmate") {
    req.allowed = {.recompute = true, .paging = false};
  } else if (name == "paging") {
    req.allowed = {.recompute = false, .paging = true};
  } else {
    for (const auto& n : baseline_names()) {
      if (n == name) return plan_baseline(name, graph, request);
    }
    std::string known;
    for (const auto& n : planner_names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("unknown planner '" + name + "' (known: " + known + ")");
  }
  PlanResult r = plan_poet(graph, req, solver);
  r.planner = name;
  return r;
}

}  // namespace ergon::planner
