#pragma once

#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/milp.h"
#include "planner/poet.h"

namespace ergon::planner {

/// The planners `ergon plan --planner` and `ergon pareto --planners` know, by name:
/// poet (recompute and page, POET's MILP), checkmate (the same MILP, recompute only),
/// paging (the same MILP, page only), and the baselines of planner/baselines.h (store-all,
/// chen, capuchin, rotor, pofo).
const std::vector<std::string>& planner_names();

/// Runs the planner called `name` on a request (the MILP planners use `solver`).
/// Throws InputError listing the known names for an unknown one.
PlanResult run_planner(const std::string& name, const TrainingGraph& graph,
                       const PlanRequest& request, MilpSolver& solver);

}  // namespace ergon::planner
