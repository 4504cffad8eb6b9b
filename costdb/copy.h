#pragma once

// Merging one cost database into another (ergon copy): a laptop's SQLite file into the lab's
// PostgreSQL database, or any engine into any other.

#include <cstdint>
#include <functional>
#include <string>

#include "costdb/database.h"

namespace ergon::costdb {

/// What a copy inserted and what it found already there.
struct CopyCounts {
  int runs_copied = 0;
  int runs_present = 0;  ///< the same run (board, start time, source) was already there
  int plans_copied = 0;
  int plans_present = 0;
  int validations_copied = 0;
  uint64_t samples = 0;  ///< of the runs copied
  uint64_t spans = 0;
};

/// One run copied (or found present), for progress.
struct CopyProgress {
  int run_index = 0;  ///< 1-based
  int run_count = 0;
  int64_t source_run_id = 0;
  bool present = false;
  uint64_t samples = 0;
};

/// Copies every run (board, probes, power mode, ops, spans, samples, sync points, events,
/// attribution and op costs, power-logger links), plan and validation of `from` that `to` does
/// not hold yet, with `to`'s own ids, and rebuilds `to`'s derived paging and link costs of the
/// boards that got runs. A run is the same run when its board (kind, name), start time and
/// source are; a plan when its board kind, request (graph digest, planner, objective, budget,
/// deadline, power mode, cost source) and creation time are; so copying again inserts nothing.
/// A run copied while it was still recording is not brought up to date by a later copy.
/// Each run is committed on its own: an interrupted copy resumes where it stopped.
CopyCounts copy_database(Database& from, Database& to,
                         const std::function<void(const CopyProgress&)>& progress = {});

}  // namespace ergon::costdb
