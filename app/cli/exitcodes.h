#pragma once

// The CLI's exit codes are part of its contract with scripts.
namespace tollgate::cli {

constexpr int EXIT_OK = 0;
constexpr int EXIT_REFUSED = 1; // held, timed out, not the owner
constexpr int EXIT_USAGE = 2;
constexpr int EXIT_IO = 3; // I/O error, corrupt file, unsafe file

} // namespace tollgate::cli
