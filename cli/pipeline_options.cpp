// ergon pipeline: its options and run.

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "cli/options.h"
#include "cli/commands.h"
#include "cli/pipeline_cmd.h"
#include "devices/board_profile.h"

namespace ergon::cli {

namespace {

/// "pi4: 1500MHz, 1000MHz, 600MHz; tx2: ...": the boards with a choice of modes.
std::string mode_names() {
  std::string out;
  for (const auto& b : devices::board_profiles())
    if (b.power_modes.size() > 1)
      out += (out.empty() ? "" : "; ") + std::string(b.name) + ": " + devices::power_mode_names(b);
  return out;
}

}  // namespace

void add_pipeline_command(CLI::App& app, Commands& commands) {
  static app::PipelineArgs args;
  static PipelineOutput output;
  static double link_energy = -1;
  auto* c = app.add_subcommand("pipeline",
                               "split a model's training over several boards (1F1B or GPipe micro-batches), plan "
                               "each stage's schedule on its board, and predict time and energy per batch");
  c->add_option("--model", args.model, "zoo model (see ergon models)");
  c->add_option("--onnx", args.onnx_file, "ONNX model file")->check(CLI::ExistingFile);
  c->add_option("--onnx-input", args.onnx_inputs, "the ONNX file's data inputs, where weights are graph inputs too");
  c->add_option("--batch", args.batch, "samples per micro-batch")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--boards", args.boards,
                "the boards in pipeline order, e.g. pi4,pi4,tx2 (" + devices::board_names() +
                    ", a descriptor file, or a board with measured costs in --db)")
      ->required()
      ->delimiter(',')
      ->transform(board_name_or_file());
  c->add_option("--links", args.links,
                "the link after each board but the last: ethernet, usb-cdc, uart-115200, uart-1m (default: "
                "ethernet between Linux boards, uart-1m to a microcontroller)")
      ->delimiter(',');
  c->add_option("--microbatches", args.microbatches, "micro-batches per batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  c->add_option("--schedule", args.order, "1f1b (PipeDream-Flush) or gpipe")->capture_default_str();
  c->add_option("--budget", args.budgets,
                "memory per board: one for all or one per board, bytes (512KiB) or a percentage of the board's "
                "RAM (default: all of it)")
      ->delimiter(',');
  c->add_option("--power-mode", args.power_modes,
                "each board's power mode: one for all or one per board (" + mode_names() +
                    "); auto: each board in the mode that costs the batch least (default: each board's default "
                    "mode)")
      ->delimiter(',');
  c->add_option("--deadline", args.deadline, "time per batch, e.g. 2.5s, or none")->capture_default_str();
  c->add_flag("--throughput", args.throughput, "least time per batch instead of least energy");
  c->add_option("--stage-planner", args.planner,
                "each stage's schedule: poet (recompute and page where store-all does not fit) or store-all")
      ->capture_default_str();
  c->add_option("--split", output.split,
                "best (default), equal (equal op counts: a baseline), or the ops where stages 1.. begin (34,67)")
      ->capture_default_str();
  c->add_option("--db", args.db, "cost database: boards with measured costs in it are planned on them");
  c->add_option("--link-energy", link_energy,
                "J per byte at each end, for links with no published figure (measure it first)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--time-limit", args.time_limit_s, "seconds for the whole search")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--threads", args.threads, "solver threads")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_flag("--check-gradients", output.check_gradients,
              "run the planned pipeline on real tensors in this process and compare its gradients with a "
              "single-process store-all run (zoo models)");
  c->add_option("--out", output.out_dir,
                "a folder for each stage's training graph (stageN.json) and encoded schedule (stageN.sched)");
  c->add_flag("--validate", output.validate,
              "run the planned pipeline on boards (simulated ones on ptys unless --port names one per stage), "
              "relaying activations and gradients through this host, record them into --db (default ergon.db) "
              "and print predicted against measured, per board and in total");
  c->add_flag("--execute", output.execute,
              "with --validate --port: each ergon-agent executes its stage on real tensors (activations and "
              "gradients themselves relayed), and every stage's gradients are compared with a single-process "
              "store-all run");
  c->add_option("--port", output.ports, "with --validate: a board running the agent, one per stage in --boards order");
  c->add_option("--speed", output.speed,
                "with --validate on simulated boards: their simulated seconds per real second (above 0: one "
                "board's wait for another is real time)")
      ->capture_default_str();
  c->add_flag("--json", output.json, "print JSON: stages, links, prediction and the timeline");
  commands.add(c, [] {
    if (link_energy >= 0) args.link_energy_j_per_byte = link_energy;
    return run_pipeline(args, output, std::cout);
  });
}

}  // namespace ergon::cli
