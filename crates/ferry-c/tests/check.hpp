// CHECK(cond), the assertion of the C++ test programs (hpp_*.cpp): a condition that does not
// hold is printed with its file and line on standard error, and the program exits 1.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "%s: line %d: %s failed\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)
