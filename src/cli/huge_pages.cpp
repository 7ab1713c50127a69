#include "cli/huge_pages.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace mminfer::cli {

namespace {

constexpr const char* kTunable = "glibc.malloc.hugetlb";

// "always [madvise] never": glibc's request (madvise) is honoured unless the choice is "never".
bool kernel_offers_huge_pages() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(f, line) && line.find("[never]") == std::string::npos;
}

}  // namespace

void restart_with_huge_pages(char** argv) {
  const char* opt_out = std::getenv("MMINFER_HUGE_PAGES");
  if (opt_out && std::strcmp(opt_out, "0") == 0) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, kTunable)) return;  // set by the user, or by our restart
  if (!kernel_offers_huge_pages()) return;
  std::string value = std::string(tunables && *tunables ? tunables : "");
  value += (value.empty() ? "" : ":") + std::string(kTunable) + "=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  // The binary's own path, not /proc/self/exe: the process name (ps, top) comes from it.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  execv(self, argv);
  // Still here: the restart failed; go on with small pages.
}

}  // namespace mminfer::cli
