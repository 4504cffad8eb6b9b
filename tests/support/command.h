#pragma once

// Runs a shell command (an ergon binary, sigrok-cli, a Slurm client) and keeps what it printed
// and how it ended, for tests that drive the real programs.

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ergon::testing {

struct CommandOutput {
  int status = -1;   ///< the exit status; -1 when it did not exit (a signal) or did not start
  std::string text;  ///< what it printed on the streams the command line sends to stdout
};

inline CommandOutput run_shell(const std::string& command) {
  CommandOutput out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.text.append(buffer, n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace ergon::testing
