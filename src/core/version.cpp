#include "mminfer/version.h"

#include "mminfer_commit.h"  // generated at build time: MMINFER_COMMIT

// The version and build type come from CMake, the commit from each build's git rev-parse.
namespace mminfer {

const char* version() { return MMINFER_VERSION; }
const char* build_commit() { return MMINFER_COMMIT; }
const char* build_type() { return MMINFER_BUILD_TYPE; }

}  // namespace mminfer
