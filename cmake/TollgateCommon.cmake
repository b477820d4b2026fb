# One INTERFACE target carries the language standard, warnings and defines for every
# target of the project, so no target can drift to its own flags.
add_library(tollgate_options INTERFACE)
target_compile_features(tollgate_options INTERFACE cxx_std_20)
set(CMAKE_CXX_EXTENSIONS OFF)
target_compile_options(tollgate_options INTERFACE -Wall -Wextra -pedantic)
target_compile_definitions(tollgate_options INTERFACE
    QT_NO_KEYWORDS
    QT_NO_CAST_FROM_ASCII
    QT_DISABLE_DEPRECATED_BEFORE=0x060400
    _FILE_OFFSET_BITS=64)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
    set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

# Sanitizer builds: -DTOLLGATE_SANITIZE=address,undefined (or thread).
set(TOLLGATE_SANITIZE "" CACHE STRING "Comma-separated -fsanitize= list, empty for none")
if(TOLLGATE_SANITIZE)
    target_compile_options(tollgate_options INTERFACE -fsanitize=${TOLLGATE_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(tollgate_options INTERFACE -fsanitize=${TOLLGATE_SANITIZE})
endif()
