#pragma once
// The board card's plots (ergon characterize): Qt Charts drawn offscreen to PNG files.

#include <filesystem>
#include <vector>

#include "app/characterize.h"

namespace ergon::gui {

/// Draws the card's plots into `dir` and returns the files written, in the card's order:
/// time against FLOPs per op kind (with the fitted line), energy per FLOP per op kind (when
/// power was measured), power by phase per mode, paging time against bytes (with the fits),
/// and the modes' curve of compute rate against power. Needs no display (QT_QPA_PLATFORM=
/// offscreen is set when there is none). Throws Error when a file cannot be written.
std::vector<std::filesystem::path> render_board_card_plots(const app::CharacterizeResult& result,
                                                           const std::filesystem::path& dir);

}  // namespace ergon::gui
