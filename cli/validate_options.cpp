// ergon validate: its options and run.

#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/options.h"
#include "cli/pipeline_cmd.h"
#include "cli/validate_cmd.h"
#include "common/error.h"

namespace ergon::cli {
void add_validate_command(CLI::App& app, Commands& commands) {
  static app::ValidateRequest validate_args;
  static bool validate_json = false;
  static std::vector<std::string> validate_ports, pipeline_boards, pipeline_links;
  static int pipeline_output_microbatches = 4;
  static double pipeline_speed = 1;
  auto* validate_cmd = app.add_subcommand(
      "validate", "plan, run the schedule on a board (default: a simulated one), and compare "
                  "predicted with measured energy and time");
  {
    auto* c = validate_cmd;
    add_graph_source(*c, validate_args.plan, /*graph_file=*/false);
    add_board_and_mode(*c, validate_args.plan,
                       "the board's power mode: costs of that mode, and the simulator runs in it "
                       "(FWD/BWD: per phase, the board switching where the backward pass begins)");
    add_budget_and_deadline(*c, validate_args.plan);
    add_solver(*c, validate_args.plan);
    c->add_option("--db", validate_args.db,
                  "measured costs come from here; plan, run and validation are stored here")
        ->capture_default_str();
    c->add_option("--port", validate_ports,
                  "a board running the agent (default: simulator); with --pipeline, one per board in order");
    c->add_option("--plan", validate_args.plan_id,
                  "validate this stored plan (an id from ergon pareto or an earlier validate)");
    c->add_flag("--execute", validate_args.execute,
                "run the schedule on real tensors of the zoo model (ergon-agent; without --port, "
                "in this process), then store-all, and check the gradients are identical");
    c->add_option("--iterations", validate_args.iterations,
                  "timed iterations, compared by their median (default: 5 on a board or with --execute, "
                  "1 on the simulated board; a per-phase plan runs 1)")
        ->check(CLI::Range(1, 1000));
    c->add_flag("--json", validate_json, "print the result as JSON");
    c->add_option("--pipeline", pipeline_boards,
                  "validate a pipeline over these boards instead (as ergon pipeline --validate): "
                  "--budget is then per board (bytes, or a percentage of its RAM; default: its RAM)")
        ->delimiter(',')
        ->transform(board_name_or_file());
    c->add_option("--microbatches", pipeline_output_microbatches, "with --pipeline: micro-batches per batch")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    c->add_option("--links", pipeline_links, "with --pipeline: the link kinds between consecutive boards")
        ->delimiter(',');
    c->add_option("--speed", pipeline_speed, "with --pipeline on simulated boards: their speed (above 0)")
        ->capture_default_str();
  }
  commands.add(validate_cmd, [validate_cmd] {
    if (!pipeline_boards.empty()) {
      // The pipeline's own validation, with this command's spelling of its options.
      if (validate_args.plan_id) throw InputError("--pipeline plans anew: drop --plan");
      app::PipelineArgs args;
      args.model = validate_args.plan.model;
      args.onnx_file = validate_args.plan.onnx_file;
      args.onnx_inputs = validate_args.plan.onnx_inputs;
      args.batch = validate_args.plan.batch;
      args.boards = pipeline_boards;
      args.links = pipeline_links;
      args.microbatches = pipeline_output_microbatches;
      if (validate_cmd->get_option("--budget")->count() > 0) args.budgets = {validate_args.plan.budget};
      args.deadline = validate_args.plan.deadline;
      args.db = validate_args.db;
      if (!validate_args.plan.power_mode.empty()) args.power_modes = {validate_args.plan.power_mode};
      args.time_limit_s = validate_args.plan.time_limit_s;
      PipelineOutput output;
      output.validate = true;
      output.ports = validate_ports;
      output.speed = pipeline_speed;
      output.execute = validate_args.execute;
      output.json = validate_json;
      return run_pipeline(args, output, std::cout);
    }
    if (validate_ports.size() > 1) throw InputError("one --port, unless --pipeline names several boards");
    if (!validate_ports.empty()) validate_args.port = validate_ports.front();
    if (!validate_args.plan_id)
      for (const std::string& line : app::fill_defaults(validate_args.plan, validate_args.db))
        std::cerr << line << "\n";
    return run_validate(validate_args, validate_json, std::cout);
  });
}

}  // namespace ergon::cli
