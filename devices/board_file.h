#pragma once
// Board descriptor files (docs/boards.md, "Descriptor files"): what a board is and costs, as
// JSON a lab can write for a board Ergon has never seen. The built-in boards are such files
// too (boards/*.json in the repository, compiled into the binary and installed beside it).

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "devices/board_profile.h"

namespace ergon::devices {

/// The schema every descriptor names in its "schema" field.
inline constexpr std::string_view kBoardSchema = "ergon-board/1";

/// Parses a descriptor. `origin` (a path, "built-in boards/pi4.json") names it in errors and
/// becomes the profile's `origin`. Throws InputError with one line naming the field and what
/// was expected: "pi5.json: power.idle_w: expected a number >= 0 (watts), got \"2,7\"".
BoardProfile parse_board_descriptor(std::string_view json_text, const std::string& origin);
/// Reads and parses a descriptor file; InputError when it cannot be read.
BoardProfile load_board_file(const std::filesystem::path& path);
/// The profile as a descriptor that parse_board_descriptor() reads back equal (what
/// `ergon characterize` writes with its measured figures). `notes` go into its "notes".
std::string board_descriptor_json(const BoardProfile& board, const std::vector<std::string>& notes = {});

/// The folders searched for NAME.json, first match first: each of $ERGON_BOARD_PATH
/// (colon-separated), then $XDG_CONFIG_HOME/ergon/boards (~/.config/ergon/boards).
std::vector<std::filesystem::path> board_search_dirs();

/// One built-in descriptor: its file name under boards/ and its text, as compiled in.
struct BuiltinBoardFile {
  std::string_view file;
  std::string_view text;
};
/// The repository's boards/*.json as this binary was built with them (generated at build
/// time from the files; the order is the CLI's: tx2, pi4, nrf52840, mkr1000).
const std::vector<BuiltinBoardFile>& builtin_board_files();

}  // namespace ergon::devices
