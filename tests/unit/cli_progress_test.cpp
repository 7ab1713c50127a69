// The progress bar of the CLI (src/cli/progress.h): its text, and that it stays silent where no
// one watches unless asked.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/progress.h"
#include "mminfer/status.h"

namespace mminfer::cli {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

TEST(CliProgress, RendersCountsAndTimeLeft) {
  // 3 of 12 in 6 s: 2 s a step, 9 steps left.
  EXPECT_EQ(render_progress("calibrating", 3, 12, 6.0, 12), "calibrating [###.........] 3/12  eta 0:18");
  EXPECT_EQ(render_progress("loading", 0, 4, 1.0, 4), "loading [....] 0/4  eta --:--");
  EXPECT_EQ(render_progress("runs", 5, 5, 75.4, 5), "runs [#####] 5/5  done in 1:15");
  EXPECT_EQ(render_progress("runs", 9, 5, 1.0, 5), "runs [#####] 5/5  done in 0:01");  // never past the total
}

TEST(CliProgress, ClockText) {
  EXPECT_EQ(clock_text(0), "0:00");
  EXPECT_EQ(clock_text(59.6), "1:00");
  EXPECT_EQ(clock_text(3723), "1:02:03");
}

TEST(CliProgress, SilentOnAFileUnlessAsked) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("passes", 3, ProgressMode::kAuto, f);
    EXPECT_FALSE(p.drawing());
    p.step();
    p.finish();
  }
  EXPECT_EQ(contents(f), "");
  {
    Progress p("passes", 3, ProgressMode::kNever, f);
    p.step();
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(CliProgress, DrawsInPlaceWhenForced) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  double now = 0;
  {
    Progress p("passes", 2, ProgressMode::kAlways, f, [&] { return now; });
    EXPECT_TRUE(p.drawing());
    now = 4;
    p.step();
    now = 8;
    p.finish();
  }
  std::string out = contents(f);
  EXPECT_EQ(out,
            "\rpasses [....................] 0/2  eta --:--"
            "\rpasses [##########..........] 1/2  eta 0:04 "  // a space covers the longer line before
            "\rpasses [####################] 2/2  done in 0:08\n");
  std::fclose(f);
}

TEST(CliProgress, Flags) {
  auto mode = [](std::vector<std::string> words) {
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    Args a(static_cast<int>(argv.size()), argv.data(), 0, {}, {"--progress", "--no-progress", "--quiet"});
    return progress_flag(a);
  };
  EXPECT_EQ(mode({}), ProgressMode::kAuto);
  EXPECT_EQ(mode({"--progress"}), ProgressMode::kAlways);
  EXPECT_EQ(mode({"--no-progress"}), ProgressMode::kNever);
  EXPECT_EQ(mode({"--quiet"}), ProgressMode::kNever);
  EXPECT_THROW(mode({"--progress", "--quiet"}), Error);
}

}  // namespace
}  // namespace mminfer::cli
