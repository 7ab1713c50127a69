// Running the mminfer binary from tests: exit code, stdout and stderr, and the rule every
// failure must follow (status 1 or 2, one line on stderr naming the problem, no crash).
#pragma once
#include <string>

#include "robust_util.h"

#ifndef MMINFER_CLI
#error "MMINFER_CLI must name the mminfer binary"
#endif

namespace robust {

struct CliResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string out, err;
};

// `args` is pasted into a shell command line: quote paths with quote().
CliResult run_cli(const std::string& args, const TempDir& dir);
// Exit code 1 or 2, an error of one line (exit 1) containing "error" and `mention` when given.
void expect_clean_failure(const CliResult& r, const std::string& mention, const std::string& what);
std::string quote(const std::string& s);

}  // namespace robust
