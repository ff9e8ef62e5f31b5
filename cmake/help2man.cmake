# Writes the man pages of one program with help2man, run by cmake/man.cmake:
#   cmake -DHELP2MAN=EXE -DPROGRAM=EXE -DDESCRIPTION=TEXT -DVERSION=X.Y.Z -DOUT=DIR
#         -DINCLUDES=DIR -DSTAMP=FILE -P help2man.cmake
# DIR/man1/NAME.1 from `NAME --help` and `NAME --version`, and DIR/man1/NAME-SUB.1 from
# `NAME SUB --help` for every subcommand listed under "Subcommands:" in NAME's help. DIR is emptied
# first, so a removed subcommand loses its page. INCLUDES/PAGE.h2m, where present, adds sections.
cmake_minimum_required(VERSION 3.25)
foreach(var HELP2MAN PROGRAM DESCRIPTION VERSION OUT INCLUDES STAMP)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "help2man.cmake: -D${var}=... is required")
  endif()
endforeach()
get_filename_component(name "${PROGRAM}" NAME)
get_filename_component(bindir "${PROGRAM}" DIRECTORY)

# help2man takes the program's name and version from the first line of --version.
execute_process(COMMAND "${PROGRAM}" --version RESULT_VARIABLE rc
                OUTPUT_VARIABLE version_line ERROR_VARIABLE error OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0 OR NOT version_line STREQUAL "${name} ${VERSION}")
  message(FATAL_ERROR "${PROGRAM} --version: status ${rc}, printed '${version_line}' ${error}"
                      "(the man page needs '${name} ${VERSION}')")
endif()
execute_process(COMMAND "${PROGRAM}" --help RESULT_VARIABLE rc
                OUTPUT_VARIABLE help ERROR_VARIABLE error)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --help: status ${rc}: ${error}")
endif()

# "Subcommands:" then one "  NAME   DESCRIPTION" line each, up to a blank line (CLI11's layout).
set(subcommands "")
string(REGEX MATCH "\nSubcommands:\n([^\n]+\n)*" block "${help}")
string(REPLACE ";" "," block "${block}")
string(REPLACE "\n" ";" block "${block}")
foreach(line IN LISTS block)
  if(line MATCHES "^  +([a-z][a-z0-9-]*)  +([^ ].*)$")
    list(APPEND subcommands "${CMAKE_MATCH_1}")
    set(description_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()

file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}/man1")

# help2man runs "PROGRAM OPTION" through the shell: run it as ./NAME from its directory, so that
# the build directory's path needs no quoting.
function(run_help2man page)
  execute_process(
    COMMAND "${HELP2MAN}" --no-info "--output=${OUT}/man1/${page}.1" ${ARGN}
            "--opt-include=${INCLUDES}/${page}.h2m" "./${name}"
    WORKING_DIRECTORY "${bindir}" RESULT_VARIABLE rc ERROR_VARIABLE error)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${OUT}/man1/${page}.1")
    message(FATAL_ERROR "help2man for ${page}(1): status ${rc}: ${error}")
  endif()
  # CLI11's "Subcommands:" and "Positionals:" headings come out as subsections; make them
  # sections, each subcommand naming its page.
  file(READ "${OUT}/man1/${page}.1" roff)
  string(REPLACE ".SS \"Subcommands:\"\n" ".SH SUBCOMMANDS\n" roff "${roff}")
  string(REPLACE ".SS \"Positionals:\"\n" ".SH ARGUMENTS\n" roff "${roff}")
  if(page STREQUAL name)
    foreach(sub IN LISTS subcommands)
      string(REPLACE "\n.TP\n${sub}\n" "\n.TP\n\\fB${sub}\\fR (\\fB${name}\\-${sub}\\fR(1))\n"
                     roff "${roff}")
    endforeach()
  endif()
  file(WRITE "${OUT}/man1/${page}.1" "${roff}")
endfunction()

set(see_also "${OUT}/see-also.h2m")
set(text "[SEE ALSO]\n")
foreach(sub IN LISTS subcommands)
  string(APPEND text ".BR ${name}-${sub} (1),\n")
endforeach()
file(WRITE "${see_also}" "${text}")
if(subcommands)
  file(APPEND "${see_also}" "[>DESCRIPTION]\n.PP\nEach subcommand has a page of its own, "
                            "as \\fBman ${name}\\-\\fISUBCOMMAND\\fR, and prints the same text with "
                            "\\fB${name} \\fISUBCOMMAND\\fB \\-\\-help\\fR.\n")
endif()
run_help2man(${name} "--name=${DESCRIPTION}" "--include=${see_also}")

foreach(sub IN LISTS subcommands)
  file(WRITE "${see_also}" "[SEE ALSO]\n.BR ${name} (1)\n")
  run_help2man(${name}-${sub} "--name=${description_${sub}}" "--help-option=${sub} --help"
               "--version-string=${name}-${sub} ${VERSION}" "--include=${see_also}")
endforeach()
file(REMOVE "${see_also}")
file(TOUCH "${STAMP}")
