// Child processes for the compiler drivers (host C++ compiler, nvcc): run a command with
// its output captured, and show a command line in messages.
#pragma once
#include <string>
#include <vector>

namespace tl {

struct ProcessResult {
  int exit_code = -1;       // exit status; -1 when it could not start or was killed
  std::string output;       // stdout and stderr together, in the order written
  std::string spawn_error;  // why it could not be run; empty when it ran
};

// Runs argv (argv[0] is the program) with stdout and stderr captured into one string and
// waits for it. No shell is involved, so paths and flags are passed exactly as given.
// With search_path, an argv[0] without a '/' is looked up in PATH; otherwise it is used as
// a path as it stands. A process killed by a signal gets exit_code -1 and a note at the
// end of its output.
ProcessResult run_process(const std::vector<std::string>& argv, bool search_path = true);

// For messages only: argv as one would type it in a shell, with words that need it quoted.
std::string command_line(const std::vector<std::string>& argv);

// The first max_lines lines of a program's output, with a count of those left out.
std::string first_lines(const std::string& text, int max_lines);

}  // namespace tl
