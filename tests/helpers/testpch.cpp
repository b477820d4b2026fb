// The donor of a test precompiled header (tests/CMakeLists.txt, tollgate_add_test_pch): CMake
// compiles the header for a target with a source of its own; this one has nothing else in it.
