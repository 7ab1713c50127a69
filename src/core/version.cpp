#include "mminfer/version.h"

// The values come from CMake (project version, git describe at configure time, build type).
namespace mminfer {

const char* version() { return MMINFER_VERSION; }
const char* build_commit() { return MMINFER_COMMIT; }
const char* build_type() { return MMINFER_BUILD_TYPE; }

}  // namespace mminfer
