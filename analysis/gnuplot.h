// Writing and running gnuplot scripts safely (analysis/plot.cpp): strings from experiment files and databases
// never become gnuplot commands, and gnuplot runs without a shell.
#pragma once

#include <string>

namespace fwlab {

// A gnuplot string literal that stays text whatever it holds (single-quoted; control characters as spaces; with
// `text`, the enhanced-mode markup characters escaped).
std::string gp_quote(const std::string& s, bool text = true);
// Letters, digits and '-' kept, the rest '_': a file stem.
std::string safe_name(const std::string& s);
// Runs `program script` in `dir`, stdout and stderr to `log` (relative to `dir`); the exit code, 127 when the
// program cannot be started.
int run_in(const std::string& dir, const std::string& program, const std::string& script, const std::string& log);

// Writes OUT_DIR/NAME.gp and runs it there (its outputs are named relative to it); throws PlotError (analysis/plot.h)
// when gnuplot is missing or fails, with its messages.
void write_and_run(const std::string& script, const std::string& name, const std::string& out_dir,
                   const std::string& gnuplot);

}  // namespace fwlab
