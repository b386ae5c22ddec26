# Checks that every #include in the layered folders points down the stack (docs/ARCHITECTURE.md):
#
#   0 sim/   1 runtime/   2 profiler/   3 ops/   4 model/   5 reference/   6 tools/   7 python/
#
# Every include form is resolved to a file of the tree: "x/y.h" from the project root, "../y.h"
# (or "y.h") from the including file's folder, <x/y.h> when x/ is one of the project's folders.
# A file may include headers of its own layer and the layers below it, and in addition:
#   - sim/ includes nothing of blockscope but sim/ (it stands in for libcudart and sits below all);
#   - three seams reach into sim/: ops/common/cuda/tensor_core.cuh (PTX: the one place kernels
#     differ between a GPU build and a simulated one; everything else is plain CUDA),
#     runtime/cuda/kernel_counters.cpp (the simulated GPU's counters, where a GPU has CUPTI's),
#     and sim/occupancy.h, which any layer may include (the occupancy rules, header-only, for the
#     simulator and the GPU model alike);
#   - runtime/'s core (runtime/*.h, *.cpp) names no backend (runtime/cpu/, runtime/cuda/);
#   - profiler/ includes no backend header (runtime/cpu/, runtime/cuda/): what it needs of the
#     hardware comes through Backend::info();
#   - ops/common/ includes no op header (ops/<op>/): the helpers sit under every op;
#   - reference/ includes nothing from ops/ but the path and activation enums
#     (ops/common/paths.h, activations.h — the enum and names only; the activation table's host
#     definitions are what the reference checks): the oracles are written independently of the
#     code they check;
#   - no library includes bench/ or test/ (nor sim/test/, the simulator's tests: like test/,
#     they are not checked and may include any layer).
# Run by the build before anything compiles (CMakeLists.txt), and by a test on planted files:
#   cmake -DSOURCE_DIR=<root> -P tools/ci/check_layers.cmake
# Exits non-zero, listing every offending file and include, when one breaks a rule.
cmake_minimum_required(VERSION 3.24)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers.cmake: pass -DSOURCE_DIR=<project root>")
endif()

set(layers sim runtime profiler ops model reference tools python)
set(project_folders ${layers} bench test)

function(layer_of path out)
  string(REGEX MATCH "^[^/]+" top "${path}")
  list(FIND layers "${top}" index)
  set(${out} ${index} PARENT_SCOPE)
endfunction()

# The project-relative path an include names, or "" for a system or third-party header.
function(resolve file form included out)
  set(${out} "" PARENT_SCOPE)
  get_filename_component(dir "${file}" DIRECTORY)
  string(REGEX MATCH "^[^/]+" top "${included}")
  if(form STREQUAL "\"" AND EXISTS "${SOURCE_DIR}/${dir}/${included}")
    get_filename_component(full "${SOURCE_DIR}/${dir}/${included}" ABSOLUTE)
    file(RELATIVE_PATH relative "${SOURCE_DIR}" "${full}")
    if(NOT relative MATCHES "^\\.\\.")
      set(${out} "${relative}" PARENT_SCOPE)
    endif()
    return()
  endif()
  list(FIND project_folders "${top}" known)
  if(known GREATER -1 AND EXISTS "${SOURCE_DIR}/${included}")
    get_filename_component(full "${SOURCE_DIR}/${included}" ABSOLUTE)
    file(RELATIVE_PATH relative "${SOURCE_DIR}" "${full}")
    set(${out} "${relative}" PARENT_SCOPE)
  endif()
endfunction()

set(globs "")
foreach(layer ${layers})
  list(APPEND globs ${SOURCE_DIR}/${layer}/*)
endforeach()
file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${globs})
list(FILTER files INCLUDE REGEX "\\.(h|cpp|cu|cuh)$")
list(FILTER files EXCLUDE REGEX "^sim/test/")

set(violations "")
set(checked 0)
foreach(file ${files})
  layer_of("${file}" from)
  file(STRINGS ${SOURCE_DIR}/${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  math(EXPR checked "${checked} + 1")
  foreach(line ${lines})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">].*$" "\\1" form "${line}")
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">].*$" "\\2" included "${line}")
    resolve("${file}" "${form}" "${included}" target)
    if(target STREQUAL "")
      continue()  # a system, toolkit or third-party header
    endif()
    layer_of("${target}" to)
    set(reason "")
    if(target MATCHES "^(bench|test|sim/test)/")
      set(reason "libraries never include bench/ or test/")
    elseif(file MATCHES "^sim/" AND NOT target MATCHES "^sim/")
      set(reason "the simulator includes nothing of blockscope but sim/")
    elseif(to GREATER from)
      list(GET layers ${from} from_name)
      list(GET layers ${to} to_name)
      set(reason "${from_name}/ is below ${to_name}/")
    elseif(target MATCHES "^sim/" AND NOT file MATCHES "^sim/" AND NOT file STREQUAL "ops/common/cuda/tensor_core.cuh"
           AND NOT file STREQUAL "runtime/cuda/kernel_counters.cpp" AND NOT target STREQUAL "sim/occupancy.h")
      set(reason "only ops/common/cuda/tensor_core.cuh and runtime/cuda/kernel_counters.cpp reach into the simulator (and sim/occupancy.h is everyone's)")
    elseif(file MATCHES "^runtime/[^/]+$" AND target MATCHES "^runtime/(cpu|cuda)/")
      set(reason "runtime's core types name no backend")
    elseif(file MATCHES "^profiler/" AND target MATCHES "^runtime/(cpu|cuda)/")
      set(reason "the profiler uses no backend header (Backend::info() instead)")
    elseif(file MATCHES "^ops/common/" AND target MATCHES "^ops/" AND NOT target MATCHES "^ops/common/")
      set(reason "ops/common/ sits under every op")
    elseif(file MATCHES "^reference/" AND target MATCHES "^ops/" AND NOT target STREQUAL "ops/common/paths.h"
           AND NOT target STREQUAL "ops/common/activations.h")
      set(reason "the oracles are written independently of ops/ (only ops/common/paths.h and activations.h)")
    endif()
    if(reason)
      if(form STREQUAL "<")
        set(shown "<${included}>")
      else()
        set(shown "\"${included}\"")
      endif()
      list(APPEND violations "  ${file} includes ${shown}: ${reason}")
    endif()
  endforeach()
endforeach()

if(violations)
  list(LENGTH violations count)
  string(REPLACE ";" "\n" text "${violations}")
  message(FATAL_ERROR "check_layers: ${count} include(s) break the layers (docs/ARCHITECTURE.md):\n${text}")
endif()
message(STATUS "check_layers: ${checked} files, every include points down")
