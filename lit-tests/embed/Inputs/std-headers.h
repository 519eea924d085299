// The standard headers whose macros truenoc embed avoids (compiler/StdMacroNames.h), included
// ahead of generated code as a caller's translation unit would (names.test).
#include <cassert>
#include <cerrno>
#include <cfloat>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
