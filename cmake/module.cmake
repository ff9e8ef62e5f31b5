# The Lmod modulefile: HPCTRAIN_MODULEDIR/hpctrain/VERSION.lua (from cmake/hpctrain.lua.in),
# setting PATH, MANPATH and HPCTRAIN_DATA_DIR. It is written at install time, so that it names the
# prefix given to `cmake --install --prefix`, not the one configured.
set(HPCTRAIN_MODULEDIR "modulefiles" CACHE STRING
    "Directory of the Lmod modulefile (hpctrain/VERSION.lua below it), relative to the prefix or absolute")

if(TARGET hpctrain-worker)
  get_filename_component(_torch_lib "${TORCH_LIBRARY}" DIRECTORY)
  set(HPCTRAIN_MODULE_RUNTIME_NOTE
      "hpctrain-worker loads libtorch ${HPCTRAIN_TORCH_VERSION} from\n  ${_torch_lib}\n"
      "(the RUNPATH it was installed with): every compute node must see that directory.\n")
  string(CONCAT HPCTRAIN_MODULE_RUNTIME_NOTE ${HPCTRAIN_MODULE_RUNTIME_NOTE})
else()
  set(HPCTRAIN_MODULE_RUNTIME_NOTE "This installation has no worker (built without libtorch).\n")
endif()

set(_module_code [==[
  # Written by cmake/module.cmake: the modulefile, for the prefix of this install.
  function(hpctrain_install_dir out dir)
    if(IS_ABSOLUTE "${dir}")
      set(${out} "${dir}" PARENT_SCOPE)
    else()
      set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
    endif()
  endfunction()
  set(HPCTRAIN_VERSION "@PROJECT_VERSION@")
  set(HPCTRAIN_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(HPCTRAIN_MODULE_RUNTIME_NOTE [=[@HPCTRAIN_MODULE_RUNTIME_NOTE@]=])
  hpctrain_install_dir(HPCTRAIN_BINDIR "@CMAKE_INSTALL_BINDIR@")
  hpctrain_install_dir(HPCTRAIN_MANDIR "@CMAKE_INSTALL_MANDIR@")
  hpctrain_install_dir(HPCTRAIN_DATADIR "@CMAKE_INSTALL_DATADIR@/hpctrain")
  hpctrain_install_dir(HPCTRAIN_MODULE_ROOT "@HPCTRAIN_MODULEDIR@")
  configure_file("@PROJECT_SOURCE_DIR@/cmake/hpctrain.lua.in"
                 "@PROJECT_BINARY_DIR@/modulefile/@PROJECT_VERSION@.lua" @ONLY)
  file(INSTALL DESTINATION "${HPCTRAIN_MODULE_ROOT}/hpctrain" TYPE FILE
       FILES "@PROJECT_BINARY_DIR@/modulefile/@PROJECT_VERSION@.lua")
]==])
string(CONFIGURE "${_module_code}" _module_code @ONLY)
install(CODE "${_module_code}")
