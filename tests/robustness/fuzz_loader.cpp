// libFuzzer target for the model loader (built with -DMMINFER_FUZZ=ON and clang):
//   build-fuzz/tests/robustness/fuzz_loader corpus/ -max_len=65536
// Each input is a serialized ModelProto; it is loaded and, when its inputs are small, run.
// A one-line error is the expected outcome; anything else aborts so libFuzzer keeps the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "robust_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  robust::Outcome o = robust::load_and_run(bytes, ".");
  if (!o.problem.empty()) {
    std::fprintf(stderr, "rule broken: %s\n", o.problem.c_str());
    std::abort();
  }
  return 0;
}
