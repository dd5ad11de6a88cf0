# SPDX-License-Identifier: Apache-2.0
# A class is defined in at most two files: its own header, and one more for
# a body too long for it (Shard: shard/writes.hpp). Every out-of-class
# member definition in include/offheap/ (a line that starts in column 0
# with `Class::member(` or `Class<...>::member(`, after its return type) is
# grouped by class; a class whose members are defined in three or more
# files fails the test, with the files named. A concern that grows out of
# a class becomes a component of its own (shard/shard.hpp lists them).
#
# Run: cmake -DINCLUDE_DIR=<repo>/include -P tests/definitions.cmake
cmake_minimum_required(VERSION 3.20)

file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/offheap/*.hpp)
set(classes "")
set(definitions 0)
foreach(header IN LISTS headers)
  file(STRINGS ${INCLUDE_DIR}/${header} lines
       REGEX "^[A-Za-z_][^(]*[^A-Za-z0-9_:][A-Z][A-Za-z0-9_]*(<[^()]*>)?::~?[A-Za-z_][A-Za-z0-9_]*\\(|^[A-Z][A-Za-z0-9_]*(<[^()]*>)?::~?[A-Za-z_][A-Za-z0-9_]*\\(")
  foreach(line IN LISTS lines)
    # The last `Name<...>::member(` before the parameter list names the class.
    string(REGEX MATCH "([A-Z][A-Za-z0-9_]*)(<[^()]*>)?::~?[A-Za-z_][A-Za-z0-9_]*\\(" hit "${line}")
    set(class ${CMAKE_MATCH_1})
    if(class STREQUAL "")
      continue()
    endif()
    math(EXPR definitions "${definitions} + 1")
    list(APPEND classes ${class})
    list(APPEND files_of_${class} ${header})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES classes)
set(problems "")
foreach(class IN LISTS classes)
  list(REMOVE_DUPLICATES files_of_${class})
  list(LENGTH files_of_${class} n)
  if(n GREATER 2)
    list(JOIN files_of_${class} ", " where)
    string(APPEND problems "\n  ${class}: members defined in ${n} files: ${where}")
  endif()
endforeach()
list(LENGTH classes nclasses)
if(problems)
  message(FATAL_ERROR "A class's member definitions are spread over more than two files:${problems}")
endif()
message(STATUS "${definitions} out-of-class member definitions of ${nclasses} classes: none spread over more than two files")
