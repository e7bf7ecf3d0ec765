# P2P_CHECK_GTEST: GoogleTest for `make check`. --with-gtest=yes|no|guess.
AC_DEFUN([P2P_CHECK_GTEST], [
  AC_ARG_WITH([gtest],
    [AS_HELP_STRING([--with-gtest=yes|no|guess], [GoogleTest for make check (default: guess)])],
    [], [with_gtest=guess])
  p2p_have_gtest=no
  AS_IF([test "x$with_gtest" != xno], [
    PKG_CHECK_MODULES([GTEST], [gtest], [p2p_have_gtest=yes], [
      p2p_save_LIBS="$LIBS"; LIBS="$LIBS -lgtest -pthread"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>]], [[testing::InitGoogleTest();]])],
        [p2p_have_gtest=yes; GTEST_CFLAGS=""; GTEST_LIBS="-lgtest -pthread"])
      LIBS="$p2p_save_LIBS"])
    AS_IF([test "x$p2p_have_gtest" = xno && test "x$with_gtest" = xyes],
          [AC_MSG_ERROR([GoogleTest requested but not found: install libgtest-dev])])
    AS_IF([test "x$p2p_have_gtest" = xno],
          [AC_MSG_WARN([GoogleTest not found: make check will fail])])
  ])
  AM_CONDITIONAL([HAVE_GTEST], [test "x$p2p_have_gtest" = xyes])
])
