# truenoc_add_bundle(<target> SPEC <spec.toml> [TARGETS <sm_XY>...] [NAME <namespace>]
#                    [PTX_ONLY] [JOBS <n>] [GENERATOR <generator target>])
#
# At build time runs `truenoc build` on the spec and `truenoc embed` on the bundle, then compiles
# the generated <name>.cpp (the bundle bytes and one typed launch function per kernel) into
# <target> and puts <name>.hpp on its include path. NAME is the C++ namespace; by default it is
# the bundle's name (the spec's [bundle] name), as for `truenoc embed`. TARGETS overrides the
# spec's architectures; JOBS is `truenoc build -j` (default: one per CPU). The step reruns when the spec or a .tir file it names changes (truenoc
# writes a depfile), when the truenoc executable changes and when ptxas changes. GENERATOR names
# a target of truenoc_add_generator: it runs in place of truenoc, so the spec may instantiate the
# generator's own templates, and the bundle is rebuilt when the generator is.
#
# Which programs run (cache variables, so a project or the command line can override them):
#   TRUENOC_EXECUTABLE  the truenoc compiler (default: the package's, truenoc_EXECUTABLE)
#   TRUENOC_PTXAS       ptxas (default: ${CUDAToolkit_BIN_DIR}/ptxas from find_package(CUDAToolkit),
#                       else ptxas in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin);
#                       not needed for PTX_ONLY bundles
# When the truenoc runtime is part of the package (target truenoc::truenort), <target> links it
# and gets TRUENOC_HAVE_RUNTIME.

# The bundle name a spec declares ([bundle] name = "..."), read at configure time; empty when
# the spec spells it in a way this simple reader does not follow (then pass NAME).
function(_truenoc_spec_bundle_name spec out)
  file(STRINGS "${spec}" lines)
  set(table "")
  set(name "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*\\[([^]]*)\\]")
      string(STRIP "${CMAKE_MATCH_1}" table)
    elseif(table STREQUAL "bundle" AND line MATCHES "^[ \t]*name[ \t]*=[ \t]*[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']")
      set(name "${CMAKE_MATCH_1}")
      break()
    endif()
  endforeach()
  set(${out} "${name}" PARENT_SCOPE)
endfunction()

# ptxas for truenoc build: TRUENOC_PTXAS if set, else the CUDA toolkit's.
function(_truenoc_find_ptxas out)
  if(NOT TRUENOC_PTXAS)
    if(NOT DEFINED CUDAToolkit_BIN_DIR)
      find_package(CUDAToolkit QUIET)
    endif()
    set(hints)
    if(CUDAToolkit_BIN_DIR)
      list(APPEND hints "${CUDAToolkit_BIN_DIR}")
    endif()
    foreach(var CUDA_HOME CUDA_PATH)
      if(DEFINED ENV{${var}})
        list(APPEND hints "$ENV{${var}}/bin")
      endif()
    endforeach()
    find_program(TRUENOC_PTXAS NAMES ptxas HINTS ${hints} PATHS /usr/local/cuda/bin
                 DOC "ptxas for truenoc_add_bundle (the CUDA toolkit's by default)")
  endif()
  set(${out} "${TRUENOC_PTXAS}" PARENT_SCOPE)
endfunction()

function(truenoc_add_bundle target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "PTX_ONLY" "SPEC;NAME;JOBS;GENERATOR" "TARGETS")
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
  if(NOT EXISTS "${spec}")
    message(FATAL_ERROR "truenoc_add_bundle: spec '${spec}' does not exist")
  endif()
  if(NOT arg_NAME)
    _truenoc_spec_bundle_name("${spec}" arg_NAME)
    if(NOT arg_NAME)
      message(FATAL_ERROR "truenoc_add_bundle: cannot read the bundle's name ([bundle] name = \"...\") from "
                          "'${spec}'; pass NAME <namespace>")
    endif()
    # A renamed bundle renames the generated files: configure again when the spec changes.
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${spec}")
  endif()
  string(REPLACE "::" "-" base "${arg_NAME}")

  set(TRUENOC_EXECUTABLE "${truenoc_EXECUTABLE}" CACHE FILEPATH "the truenoc compiler truenoc_add_bundle runs")
  if(arg_GENERATOR)
    if(NOT TARGET ${arg_GENERATOR})
      message(FATAL_ERROR "truenoc_add_bundle: GENERATOR '${arg_GENERATOR}' is not a target (truenoc_add_generator)")
    endif()
    set(compiler "$<TARGET_FILE:${arg_GENERATOR}>")
    set(tools ${arg_GENERATOR})  # a target: the bundle depends on the generator's executable
  else()
    if(NOT EXISTS "${TRUENOC_EXECUTABLE}")
      message(FATAL_ERROR "truenoc_add_bundle: the truenoc executable '${TRUENOC_EXECUTABLE}' does not exist "
                          "(set TRUENOC_EXECUTABLE)")
    endif()
    set(compiler "${TRUENOC_EXECUTABLE}")
    set(tools "${TRUENOC_EXECUTABLE}")
  endif()

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
  else()
    _truenoc_find_ptxas(ptxas)
    if(NOT ptxas)
      message(FATAL_ERROR "truenoc_add_bundle: ptxas was not found (no CUDA toolkit through find_package(CUDAToolkit), "
                          "CUDA_HOME, CUDA_PATH, PATH or /usr/local/cuda/bin): set TRUENOC_PTXAS, or pass PTX_ONLY")
    endif()
    list(APPEND build_args --ptxas "${ptxas}")
    list(APPEND tools "${ptxas}")
  endif()
  if(arg_JOBS)
    list(APPEND build_args -j ${arg_JOBS})
  endif()

  file(MAKE_DIRECTORY "${dir}")
  add_custom_command(
    OUTPUT "${tnb}" "${dir}/${base}.hpp" "${dir}/${base}.cpp"
    COMMAND "${compiler}" build "${spec}" -o "${tnb}" --depfile "${depfile}" ${build_args}
    COMMAND "${compiler}" embed "${tnb}" --name "${arg_NAME}" -o "${dir}"
    DEPENDS "${spec}" ${tools}
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
# truenoc_add_generator(<name> SOURCES <source>...)
#
# An executable <name> built from the sources, linking the compiler as a library
# (truenoc::builder): truenoc with the project's own templates, whose main calls
# tn::generator::run(argc, argv, {templates...}) (compiler/Generator.h, docs/generators.md).
# Pass it to truenoc_add_bundle(... GENERATOR <name>) so that specs can instantiate them.
function(truenoc_add_generator name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES")
  if(NOT arg_SOURCES OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "truenoc_add_generator: usage: truenoc_add_generator(<name> SOURCES <source>...)")
  endif()
  if(NOT TARGET truenoc::builder)
    message(FATAL_ERROR "truenoc_add_generator: this truenoc package has no builder library (truenoc::builder): "
                        "it needs ${truenoc_BUILDER_MISSING}")
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE truenoc::builder)
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
