# SPDX-License-Identifier: Apache-2.0
# How users take offheap, each built and run against tests/consumer/main.cpp
# (MODE):
#   find_package   the build tree installed into a scratch prefix, then
#                  find_package(offheap CONFIG REQUIRED);
#   pkg-config     the same install, compiled by hand with
#                  `pkg-config --cflags --libs offheap`;
#   subdirectory   the source tree through add_subdirectory (FetchContent's
#                  way): only the library comes in;
#   no_test_deps   the source tree configured with -DBUILD_TESTING=OFF and
#                  Catch2 and Google Benchmark hidden from find_package, then
#                  installed: what packagers do.
cmake_minimum_required(VERSION 3.20)  # (IN_LIST and the rest, in script mode)
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${OFFHEAP_BUILD_DIR} --prefix ${prefix})
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  run(${WORK_DIR}/build/consumer)
elseif(MODE STREQUAL "pkg-config")
  run(${CMAKE_COMMAND} --install ${OFFHEAP_BUILD_DIR} --prefix ${prefix})
  set(ENV{PKG_CONFIG_PATH} ${prefix}/share/pkgconfig)
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs offheap OUTPUT_VARIABLE flags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config found no offheap.pc under ${prefix}/share/pkgconfig")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  if(NOT "-I${prefix}/include" IN_LIST flags)
    # (pkg-config may print the prefix as the .pc file's directory/../..)
    file(REAL_PATH ${prefix}/include want)
    set(found FALSE)
    foreach(f IN LISTS flags)
      if(f MATCHES "^-I(.*)$")
        file(REAL_PATH ${CMAKE_MATCH_1} got)
        if(got STREQUAL want)
          set(found TRUE)
        endif()
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "pkg-config's flags (${flags}) do not name ${prefix}/include")
    endif()
  endif()
  file(MAKE_DIRECTORY ${WORK_DIR}/build)
  run(${CXX_COMPILER} -std=c++20 ${CONSUMER_SOURCE_DIR}/main.cpp ${flags} -o ${WORK_DIR}/build/consumer)
  run(${WORK_DIR}/build/consumer)
elseif(MODE STREQUAL "subdirectory")
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build
      -DOFFHEAP_SOURCE_DIR=${OFFHEAP_SOURCE_DIR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  run(${WORK_DIR}/build/consumer)
elseif(MODE STREQUAL "no_test_deps")
  run(${CMAKE_COMMAND} -S ${OFFHEAP_SOURCE_DIR} -B ${WORK_DIR}/build -DBUILD_TESTING=OFF
      -DOFFHEAP_BUILD_EXAMPLES=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/build --prefix ${prefix})
  if(NOT EXISTS ${prefix}/include/offheap/offheap.hpp OR NOT EXISTS ${prefix}/share/pkgconfig/offheap.pc
     OR NOT EXISTS ${prefix}/share/cmake/offheap/offheapConfig.cmake)
    message(FATAL_ERROR "the install under ${prefix} lacks the headers, offheap.pc or offheapConfig.cmake")
  endif()
else()
  message(FATAL_ERROR "MODE must be find_package, pkg-config, subdirectory or no_test_deps")
endif()
