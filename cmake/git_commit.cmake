# Writes OUT (generated/contract/git_commit.h) with the commit the source tree is at, at every build (a configure
# would leave the commit of its own time), and only when it changed, so that nothing is rebuilt otherwise.
#   cmake -DSRC=<source dir> -DOUT=<header> -P cmake/git_commit.cmake
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit unknown)
endif()
set(text "// Generated at each build by cmake/git_commit.cmake: the commit the sources were at.\n#pragma once\n#define FWLAB_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
