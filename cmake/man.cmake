# Man pages, generated at build time from each program's --help and --version by help2man
# (cmake/help2man.cmake): hpctrain(1), hpctrain-worker(1), hpctrain-data(1), and one page per
# subcommand, named as git names its own: hpctrain-submit(1), hpctrain-data-inspect(1). The
# subcommands are read from the program's --help, so a new one gets its page without a line here.
# docs/man/PAGE.h2m, where present, adds hand-written sections (help2man's include format).
# Installed under ${CMAKE_INSTALL_MANDIR}/man1. Without help2man the build goes on without them.
find_program(HPCTRAIN_HELP2MAN help2man DOC "help2man, for the man pages")
if(NOT HPCTRAIN_HELP2MAN)
  message(STATUS "help2man not found: no man pages (apt-get install help2man, then reconfigure)")
  set(HPCTRAIN_MAN_PAGES OFF)
  return()
endif()
set(HPCTRAIN_MAN_PAGES ON)

# hpctrain_man_pages(TARGET DESCRIPTION): the pages of executable TARGET, built with `all`.
function(hpctrain_man_pages target description)
  set(out "${PROJECT_BINARY_DIR}/man/${target}")
  file(GLOB includes CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/man/${target}*.h2m")
  add_custom_command(
    OUTPUT "${out}.stamp"
    COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${HPCTRAIN_HELP2MAN} "-DPROGRAM=$<TARGET_FILE:${target}>"
            "-DDESCRIPTION=${description}" -DVERSION=${PROJECT_VERSION} -DOUT=${out}
            -DINCLUDES=${PROJECT_SOURCE_DIR}/docs/man -DSTAMP=${out}.stamp
            -P "${PROJECT_SOURCE_DIR}/cmake/help2man.cmake"
    DEPENDS ${target} "${PROJECT_SOURCE_DIR}/cmake/help2man.cmake" ${includes}
    COMMENT "Man pages of ${target}")
  add_custom_target(${target}_man ALL DEPENDS "${out}.stamp")
  install(DIRECTORY "${out}/" DESTINATION ${CMAKE_INSTALL_MANDIR})
endfunction()

hpctrain_man_pages(hpctrain "train image classifiers data-parallel on Slurm")
hpctrain_man_pages(hpctrain-data "convert image datasets into the hpctrain HDF5 layout")
if(TARGET hpctrain-worker)
  hpctrain_man_pages(hpctrain-worker "one rank of an hpctrain job, started by srun")
endif()
