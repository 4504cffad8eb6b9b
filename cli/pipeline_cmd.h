#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "app/pipeline.h"

namespace ergon::cli {

/// `ergon pipeline`'s choice of split: the best (default), "equal" (equal op counts, a
/// baseline), or the forward ops where stages 1.. begin ("34,67").
struct PipelineOutput {
  bool json = false;
  std::string split = "best";
  /// Runs the planned pipeline on real tensors in this process and compares its gradients
  /// with a single-process store-all run.
  bool check_gradients = false;
  /// A folder to write each stage's training graph (stageN.json, ergon.training-graph/1) and
  /// encoded schedule (stageN.sched) to; empty: none.
  std::string out_dir;
  /// Runs the plan on boards (simulated ones, paced at `speed`, unless `ports` names one per
  /// stage) and prints predicted against measured, per board and in total.
  bool validate = false;
  std::vector<std::string> ports;
  double speed = 1;
  /// With validate and ports: each agent executes its stage on real tensors, and the stages'
  /// gradients are compared with a single-process store-all run.
  bool execute = false;
};

/// Plans (or predicts the split asked for) and prints the stages, links and per-batch
/// prediction as text or JSON; returns the process exit code.
int run_pipeline(const app::PipelineArgs& args, const PipelineOutput& output, std::ostream& out);

}  // namespace ergon::cli
