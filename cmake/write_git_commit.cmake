# Run at build time (cmake -P): writes OUTPUT, a C++ source defining pipebal::git_commit(), from
# the checkout's current commit ("+dirty" when tracked files differ from it). The file is
# rewritten only when the text changes, so an unchanged commit rebuilds nothing.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND commit "+dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/write_git_commit.cmake.\n#include \"pipebal/common/git_commit.h\"\n\nconst char* pipebal::git_commit() { return \"${commit}\"; }\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
