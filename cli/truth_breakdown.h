#pragma once

#include <iosfwd>
#include <optional>

#include "devices/board_profile.h"
#include "devices/truth_model.h"

namespace ergon::cli {

/// What a validation's error against a simulated board is made of, as a table for time and
/// (when both are known) energy: the costs planned on against the board's published profile,
/// each effect of its truth model, and the measurement against the truth
/// (devices::break_down_error over the run's TruthLedger, SimRunStats::truth).
void print_error_breakdown(const devices::BoardProfile& board, const devices::TruthLedger& truth,
                           double predicted_time_s, double measured_time_s,
                           std::optional<double> predicted_energy_j, std::optional<double> measured_energy_j,
                           std::ostream& out);

}  // namespace ergon::cli
