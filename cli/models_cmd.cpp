// ergon models: the model zoo.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "planner/zoo.h"

namespace ergon::cli {
void add_models_command(CLI::App& app, Commands& commands) {
  auto* models_cmd = app.add_subcommand("models", "list the model zoo");
  commands.add(models_cmd, [] {
    for (const auto& m : planner::zoo_models())
      std::cout << fmt::format("{:<18} {}\n", m.name, m.description);
    return 0;
  });
}

}  // namespace ergon::cli
