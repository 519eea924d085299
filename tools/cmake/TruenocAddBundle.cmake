# truenoc_add_bundle(<target> SPEC <spec.toml> [TARGETS <sm_XY>...] [NAME <namespace>]
#                    [PTX_ONLY] [JOBS <n>])
#
# At build time runs `truenoc build` on the spec and `truenoc embed` on the bundle, then compiles
# the generated <name>.cpp (the bundle bytes and one typed launch function per kernel) into
# <target> and puts <name>.hpp on its include path. NAME is the C++ namespace (default: the
# spec's file name); TARGETS overrides the spec's architectures. The step reruns when the spec
# or a .tir file it names changes (truenoc writes a depfile), and for nothing else.
# When the truenoc runtime is part of the package (target truenoc::truenort), <target> links it
# and gets TRUENOC_HAVE_RUNTIME.
function(truenoc_add_bundle target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "PTX_ONLY" "SPEC;NAME;JOBS" "TARGETS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "truenoc_add_bundle: unexpected arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "truenoc_add_bundle: '${target}' is not a target")
  endif()
  if(NOT arg_SPEC)
    message(FATAL_ERROR "truenoc_add_bundle: SPEC <file.toml> is required")
  endif()
  get_filename_component(spec "${arg_SPEC}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT arg_NAME)
    get_filename_component(arg_NAME "${spec}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${arg_NAME}" arg_NAME)
  endif()
  string(REPLACE "::" "-" base "${arg_NAME}")

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/truenoc_bundles/${target}")
  set(tnb "${dir}/${base}.tnb")
  set(depfile "${dir}/${base}.d")
  set(build_args)
  if(arg_TARGETS)
    list(JOIN arg_TARGETS "," targets)
    list(APPEND build_args --targets ${targets})
  endif()
  if(arg_PTX_ONLY)
    list(APPEND build_args --ptx-only)
  endif()
  if(arg_JOBS)
    list(APPEND build_args -j ${arg_JOBS})
  endif()

  file(MAKE_DIRECTORY "${dir}")
  add_custom_command(
    OUTPUT "${tnb}" "${dir}/${base}.hpp" "${dir}/${base}.cpp"
    COMMAND truenoc::truenoc build "${spec}" -o "${tnb}" --depfile "${depfile}" ${build_args}
    COMMAND truenoc::truenoc embed "${tnb}" --name "${arg_NAME}" -o "${dir}"
    DEPENDS "${spec}"
    DEPFILE "${depfile}"
    COMMENT "truenoc: building bundle ${arg_NAME} from ${arg_SPEC}"
    VERBATIM)
  target_sources(${target} PRIVATE "${dir}/${base}.cpp" "${dir}/${base}.hpp")
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${dir}>")
  if(TARGET truenoc::truenort)
    target_link_libraries(${target} PUBLIC truenoc::truenort)
    target_compile_definitions(${target} PUBLIC TRUENOC_HAVE_RUNTIME)
  endif()
endfunction()

# truenoc_add_sim_test(NAME <name> COMMAND <command> [<arg>...])
#
# add_test() whose command runs against the simulated driver (TRUENORT_DRIVER pointing at
# truenoc::truenort_sim): a program using libtruenort runs its kernels on the CPU, with
# out-of-bounds, race and barrier checks, in a CI without a GPU (docs/simulator.md).
function(truenoc_add_sim_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "COMMAND")
  if(NOT arg_NAME OR NOT arg_COMMAND OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "truenoc_add_sim_test: usage: truenoc_add_sim_test(NAME <name> COMMAND <command> [<arg>...])")
  endif()
  if(NOT TARGET truenoc::truenort_sim)
    message(FATAL_ERROR "truenoc_add_sim_test: this truenoc package has no simulated driver (truenoc::truenort_sim)")
  endif()
  add_test(NAME ${arg_NAME} COMMAND ${arg_COMMAND})
  set_tests_properties(${arg_NAME} PROPERTIES ENVIRONMENT "TRUENORT_DRIVER=$<TARGET_FILE:truenoc::truenort_sim>")
endfunction()
