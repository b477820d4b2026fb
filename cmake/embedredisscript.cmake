# Run at build time (cmake -P) by core/CMakeLists.txt: splices the generated prelude (the
# constants redisquota.lua shares with the C++ headers, printed by redisquotaprelude) into the
# script at its marker line, and writes the C++ source that embeds the result.
#   -DSCRIPT=redisquota.lua -DPRELUDE=generated prelude -DTEMPLATE=redisquotascript.cpp.in
#   -DOUTPUT=redisquotascript.cpp
# The script must hold the marker exactly once and must not define a generated name itself
# (a hand-written copy would shadow the generated one and could drift again).
set(MARKER "-- @TOLLGATE_GENERATED_CONSTANTS@")
file(READ "${SCRIPT}" SCRIPT_TEXT)
file(READ "${PRELUDE}" PRELUDE_TEXT)
string(FIND "${SCRIPT_TEXT}" "${MARKER}\n" first)
string(FIND "${SCRIPT_TEXT}" "${MARKER}\n" last REVERSE)
if(first EQUAL -1 OR NOT first EQUAL last)
    message(FATAL_ERROR "${SCRIPT} must hold the line '${MARKER}' exactly once")
endif()
string(REGEX MATCHALL "(^|\n)local [A-Za-z_][A-Za-z0-9_]* =" generated "${PRELUDE_TEXT}")
foreach(definition IN LISTS generated)
    string(STRIP "${definition}" definition)
    string(REGEX MATCH "(^|\n)${definition}" again "${SCRIPT_TEXT}")
    if(again)
        message(FATAL_ERROR "${SCRIPT} defines '${definition}' itself: it is generated from the C++ headers "
            "(core/backend/redisquotaprelude.cpp); use the generated one")
    endif()
endforeach()
string(REPLACE "${MARKER}\n" "${PRELUDE_TEXT}" TOLLGATE_REDIS_SCRIPT_TEXT "${SCRIPT_TEXT}")
# configure_file leaves an unchanged output untouched: the library is not rebuilt for nothing.
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
