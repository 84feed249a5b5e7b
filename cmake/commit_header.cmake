# Writes OUT, a header defining TWINPIPE_COMMIT as the source tree's commit
# (git rev-parse --short=12 HEAD; "unknown" outside a git checkout), only
# where it changed: run at every build (the twinpipe_commit target), so a
# calibration names the commit its binary was built from, not the one the
# build was configured at.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
set(text "#pragma once\n#define TWINPIPE_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
