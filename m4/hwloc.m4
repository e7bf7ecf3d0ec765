# P2P_CHECK_HWLOC: hwloc >= 2 through pkg-config. --with-hwloc=yes|no|guess.
AC_DEFUN([P2P_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--with-hwloc=yes|no|guess], [topology discovery with hwloc (default: guess)])],
    [], [with_hwloc=guess])
  p2p_have_hwloc=no
  AS_IF([test "x$with_hwloc" != xno], [
    PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [p2p_have_hwloc=yes], [p2p_have_hwloc=no])
    AS_IF([test "x$p2p_have_hwloc" = xyes], [HWLOC_VERSION=`$PKG_CONFIG --modversion hwloc`])
    AS_IF([test "x$p2p_have_hwloc" = xno && test "x$with_hwloc" = xyes],
          [AC_MSG_ERROR([hwloc requested but not found: install libhwloc-dev])])
    AS_IF([test "x$p2p_have_hwloc" = xno],
          [AC_MSG_WARN([hwloc not found: topology-aware placement disabled])])
  ])
  AS_IF([test "x$p2p_have_hwloc" = xyes], [AC_DEFINE([HAVE_HWLOC], [1], [hwloc available])])
  AM_CONDITIONAL([HAVE_HWLOC], [test "x$p2p_have_hwloc" = xyes])
  AC_SUBST([HWLOC_VERSION])
])
