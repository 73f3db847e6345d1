#include "contract/version.h"

#include "contract/git_commit.h"  // generated at every build (cmake/git_commit.cmake)

namespace fwlab {

const char* const kFwlabGitCommit = FWLAB_GIT_COMMIT;

}  // namespace fwlab
