#include "cli/commands.h"

#include <CLI/CLI.hpp>

namespace ergon::cli {

const CommandRun* Commands::chosen() const {
  for (const auto& [command, run] : all_)
    if (command->parsed()) return &run;
  return nullptr;
}

}  // namespace ergon::cli
