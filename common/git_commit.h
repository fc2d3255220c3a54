// The commit pipebal was built from, for the environment block of every report and for
// `pipebal --version`. Written at build time, not at configure time, so that a rebuild after a
// commit never reports the old one.
#pragma once

namespace pipebal {

// Short hash of the checkout's HEAD, "+dirty" when tracked files differed from it, or "unknown"
// outside a git checkout.
const char* git_commit();

}  // namespace pipebal
