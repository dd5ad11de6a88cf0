# SPDX-License-Identifier: Apache-2.0
# Compiles and runs the example shown in README.md (between its markers), so
# the README cannot drift from the API.
file(READ ${README} text)
string(REGEX MATCH "<!-- readme-example -->\n```cpp\n(.*)```\n<!-- /readme-example -->" _ "${text}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "no readme-example block in ${README}")
endif()
file(WRITE ${WORK_DIR}/readme_example.cpp "${CMAKE_MATCH_1}")
execute_process(COMMAND ${CXX_COMPILER} -std=c++20 -Wall -Wextra -Werror -I${INCLUDE_DIR}
                        ${WORK_DIR}/readme_example.cpp -o ${WORK_DIR}/readme_example -pthread
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the README example does not compile")
endif()
execute_process(COMMAND ${WORK_DIR}/readme_example RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the README example exits with ${rc}")
endif()
