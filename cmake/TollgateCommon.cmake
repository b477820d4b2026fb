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
    # A target may compile its own code with fewer of them (its TOLLGATE_SANITIZE_COMPILE
    # property, a comma-separated list, or "none": the test programs, tests/CMakeLists.txt);
    # every target links every runtime.
    # A host tool that only runs during the build (TOLLGATE_HOST_TOOL: core's
    # redisquotaprelude) is built without any: its output is checked by the tests instead.
    string(REPLACE "," "$<COMMA>" tollgateSanitizeAll "${TOLLGATE_SANITIZE}")
    set(tollgateSanitizeOwn "$<TARGET_PROPERTY:TOLLGATE_SANITIZE_COMPILE>")
    set(tollgateSanitized "$<NOT:$<BOOL:$<TARGET_PROPERTY:TOLLGATE_HOST_TOOL>>>")
    set(tollgateInstrumented "$<AND:${tollgateSanitized},$<NOT:$<STREQUAL:${tollgateSanitizeOwn},none>>>")
    target_compile_options(tollgate_options INTERFACE
        "$<${tollgateInstrumented}:-fsanitize=$<IF:$<BOOL:${tollgateSanitizeOwn}>,${tollgateSanitizeOwn},${tollgateSanitizeAll}>>"
        -fno-omit-frame-pointer)
    target_link_options(tollgate_options INTERFACE "$<${tollgateSanitized}:-fsanitize=${TOLLGATE_SANITIZE}>")
    if(TOLLGATE_SANITIZE MATCHES "undefined")
        # UBSan without its type-mismatch checks (null, alignment: checked together at every
        # pointer and reference use). They doubled the compile time of this tree's code, and
        # each check site's record is a global that ASan registers at every process start:
        # 286,000 of the CLI's 308,000 globals, half of its 80 ms start, and the tests start
        # the CLI thousands of times. A null dereference is still reported, by ASan (SEGV, with
        # its stack); the fuzz targets (fuzz/, clang) keep both checks on the parsers of lock
        # files, state files and history. Every other UBSan check stays (docs/RELIABILITY.md §5).
        target_compile_options(tollgate_options INTERFACE -fno-sanitize=null,alignment)
    endif()
    if(TOLLGATE_SANITIZE MATCHES "address")
        # Linked as position-dependent executables: UBSan's check records each hold a pointer,
        # so a PIE CLI carries ~850,000 relative relocations that the loader applies at every
        # start (a third of each of the thousands of CLI runs in the tests). -no-pie resolves
        # them at link time; the code itself is compiled as before (Qt needs it PIC/PIE).
        target_link_options(tollgate_options INTERFACE -no-pie)
    endif()
endif()

# Debug info: line tables by default (-g1: enough for backtraces, sanitizer reports and
# perf), because full -g made the -O2 build 20-40 % slower to compile and its links slower
# still, and scripts/test.sh builds everything three times. -DTOLLGATE_DEBUG_INFO=full for gdb
# sessions that need local variables.
set(TOLLGATE_DEBUG_INFO "lines" CACHE STRING "Debug info in Debug/RelWithDebInfo builds: lines or full")
set_property(CACHE TOLLGATE_DEBUG_INFO PROPERTY STRINGS lines full)
if(TOLLGATE_DEBUG_INFO STREQUAL "lines")
    target_compile_options(tollgate_options INTERFACE $<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
elseif(NOT TOLLGATE_DEBUG_INFO STREQUAL "full")
    message(FATAL_ERROR "TOLLGATE_DEBUG_INFO must be lines or full (got '${TOLLGATE_DEBUG_INFO}')")
endif()

# gold links the ~45 test programs (each with Qt) 2-3x faster than the default bfd linker; it
# ships with binutils, so it is there wherever g++ is.
include(CheckLinkerFlag)
check_linker_flag(CXX -fuse-ld=gold TOLLGATE_HAVE_GOLD)
if(TOLLGATE_HAVE_GOLD)
    target_link_options(tollgate_options INTERFACE -fuse-ld=gold)
endif()
