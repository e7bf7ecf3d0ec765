# AX_CXX_STD17: make sure the C++ compiler accepts -std=c++17.
AC_DEFUN([AX_CXX_STD17], [
  AC_LANG_PUSH([C++])
  p2p_save_CXXFLAGS="$CXXFLAGS"
  CXXFLAGS="$CXXFLAGS -std=c++17"
  AC_MSG_CHECKING([whether $CXX supports -std=c++17])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <optional>]],
                                     [[std::optional<int> x; (void)x;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([a C++17 compiler is required])])
  CXXFLAGS="$p2p_save_CXXFLAGS"
  AC_LANG_POP([C++])
])
