# Checks that every #include in the layered folders points down the stack (docs/ARCHITECTURE.md):
#
#   1 runtime/   2 profiler/   3 ops/   4 model/   5 reference/   6 tools/
#
# A file may include headers of its own layer and the layers below it, and in addition:
#   - profiler/ includes no backend header (runtime/cpu/, runtime/cuda/, runtime/sim/): what it
#     needs of the hardware comes through Backend::info();
#   - ops/common/ includes no op header (ops/<op>/): the helpers sit under every op;
#   - reference/ includes nothing from ops/ but the path enums (ops/common/paths.h): the
#     oracles are written independently of the code they check.
# Run by the build before anything compiles (CMakeLists.txt), and by a test on planted files:
#   cmake -DSOURCE_DIR=<root> -P tools/check_layers.cmake
# Exits non-zero, listing every offending file:line and include, when one points up.
cmake_minimum_required(VERSION 3.24)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers.cmake: pass -DSOURCE_DIR=<project root>")
endif()

set(layers runtime profiler ops model reference tools)

function(layer_of path out)
  string(REGEX MATCH "^[^/]+" top "${path}")
  list(FIND layers "${top}" index)
  set(${out} ${index} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR}
  ${SOURCE_DIR}/runtime/* ${SOURCE_DIR}/profiler/* ${SOURCE_DIR}/ops/* ${SOURCE_DIR}/model/*
  ${SOURCE_DIR}/reference/* ${SOURCE_DIR}/tools/*)
list(FILTER files INCLUDE REGEX "\\.(h|cpp|cu|cuh)$")

set(violations "")
set(checked 0)
foreach(file ${files})
  layer_of("${file}" from)
  file(STRINGS ${SOURCE_DIR}/${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  math(EXPR checked "${checked} + 1")
  foreach(line ${lines})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" included "${line}")
    layer_of("${included}" to)
    if(to EQUAL -1)
      continue()  # a generated or third-party header, or one of test/
    endif()
    set(reason "")
    if(to GREATER from)
      list(GET layers ${from} from_name)
      list(GET layers ${to} to_name)
      set(reason "${from_name}/ is below ${to_name}/")
    elseif(file MATCHES "^profiler/" AND included MATCHES "^runtime/(cpu|cuda|sim)/")
      set(reason "the profiler uses no backend header (Backend::info() instead)")
    elseif(file MATCHES "^ops/common/" AND included MATCHES "^ops/" AND NOT included MATCHES "^ops/common/")
      set(reason "ops/common/ sits under every op")
    elseif(file MATCHES "^reference/" AND included MATCHES "^ops/" AND NOT included STREQUAL "ops/common/paths.h")
      set(reason "the oracles are written independently of ops/ (only ops/common/paths.h)")
    endif()
    if(reason)
      list(APPEND violations "  ${file} includes \"${included}\": ${reason}")
    endif()
  endforeach()
endforeach()

if(violations)
  list(LENGTH violations count)
  string(REPLACE ";" "\n" text "${violations}")
  message(FATAL_ERROR "check_layers: ${count} include(s) point up the layers (docs/ARCHITECTURE.md):\n${text}")
endif()
message(STATUS "check_layers: ${checked} files, every include points down")
