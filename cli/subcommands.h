// The first word of a command line, checked before CLI11 parses it: an unknown subcommand is named, with the
// nearest known one, instead of CLI11's "A subcommand is required".
#pragma once

#include <CLI/CLI.hpp>

namespace fwlab::cli {

// True (after printing the message) when argv[1] is a word that names no subcommand of `app`.
bool unknown_subcommand(const CLI::App& app, int argc, char** argv);

}  // namespace fwlab::cli
