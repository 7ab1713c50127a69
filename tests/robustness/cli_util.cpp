#include "cli_util.h"

#include <sys/wait.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace robust {

CliResult run_cli(const std::string& args, const TempDir& dir) {
  std::string out_path = dir.file("stdout.txt"), err_path = dir.file("stderr.txt");
  // A sanitizer report exits with its own code so it cannot pass for an ordinary error.
  std::string cmd = "ASAN_OPTIONS=exitcode=86 UBSAN_OPTIONS=exitcode=87:halt_on_error=1 timeout 120 '" +
                    std::string(MMINFER_CLI) + "' " + args + " >'" + out_path + "' 2>'" + err_path + "'";
  int status = std::system(cmd.c_str());
  CliResult r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

void expect_clean_failure(const CliResult& r, const std::string& mention, const std::string& what) {
  EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << what << ": exit code " << r.exit_code << ", stderr: " << r.err;
  ASSERT_FALSE(r.err.empty()) << what;
  std::string body = r.err.back() == '\n' ? r.err.substr(0, r.err.size() - 1) : r.err;
  if (r.exit_code == 1) {  // usage text (exit 2) may span lines; an error is one line
    EXPECT_EQ(body.find('\n'), std::string::npos) << what << ": several lines: " << r.err;
    EXPECT_NE(body.find("error"), std::string::npos) << what << ": " << r.err;
  }
  if (!mention.empty()) {
    EXPECT_NE(body.find(mention), std::string::npos) << what << ": " << r.err;
  }
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace robust
