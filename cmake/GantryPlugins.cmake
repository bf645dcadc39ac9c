# gantry_add_plugin(<name> SOURCES <files...> LIBS <targets...>)
# Builds the plugin libgantry_plugin_<name>.so (include/gantry/core/plugin.h):
# a shared module that links the vendor libraries of one optional feature
# normally, while the `gantry` binary links none of them and dlopens the plugin
# on first use. The Gantry code it needs comes from the static libraries in
# LIBS, kept private: a version script exports only the entry point
# gantry_plugin_<name>_v1, so the plugin's copies never interpose on the
# binary's. Output: <build>/lib/gantry/, installed to <prefix>/lib/gantry/,
# the folders the loader looks in next to bin/.
set(GANTRY_PLUGIN_OUTPUT_DIR ${CMAKE_BINARY_DIR}/lib/gantry)

function(gantry_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  set(target gantry_plugin_${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE ${P_LIBS} gantry_options)
  set(map ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
  file(WRITE ${map} "{\n  global: gantry_plugin_${name}_v1;\n  local: *;\n};\n")
  target_link_options(${target} PRIVATE -Wl,--version-script=${map} -Wl,--no-undefined
                      -Wl,--as-needed)
  set_target_properties(${target} PROPERTIES
    PREFIX lib
    LIBRARY_OUTPUT_DIRECTORY ${GANTRY_PLUGIN_OUTPUT_DIR}
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    # Installed plugins keep the paths of vendor libraries outside the system
    # folders (a CUDA toolkit in /usr/local/cuda), as the build tree's do.
    INSTALL_RPATH_USE_LINK_PATH ON
    LINK_DEPENDS ${map})
  install(TARGETS ${target} LIBRARY DESTINATION lib/gantry)
  set_property(GLOBAL APPEND PROPERTY GANTRY_PLUGINS ${target})
endfunction()

# gantry_plugin_dependencies(<targets...>): every plugin is built before them
# (the binary and the tests that run it). Call after all plugins are added.
function(gantry_plugin_dependencies)
  get_property(plugins GLOBAL PROPERTY GANTRY_PLUGINS)
  if(plugins)
    foreach(t ${ARGN})
      if(TARGET ${t})
        add_dependencies(${t} ${plugins})
      endif()
    endforeach()
  endif()
endfunction()
