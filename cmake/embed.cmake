# hpctrain_embed(TARGET NAME FILE): compiles FILE's text into TARGET as
# `std::string_view hpctrain::embedded::NAME()`, rebuilt whenever FILE changes.
function(hpctrain_embed target name file)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/embedded_${name}.cpp")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DIN=${file} -DOUT=${out}
            -P "${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake"
    DEPENDS "${file}" "${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake"
    COMMENT "Embedding ${name}")
  target_sources(${target} PRIVATE "${out}")
endfunction()
