# P2P_CHECK_PMIX: PMIx through pkg-config (pmix.h is not on the default
# include path on Debian). --with-pmix=yes|no|guess.
AC_DEFUN([P2P_CHECK_PMIX], [
  AC_ARG_WITH([pmix],
    [AS_HELP_STRING([--with-pmix=yes|no|guess], [PMIx bootstrap (default: guess)])],
    [], [with_pmix=guess])
  p2p_have_pmix=no
  AS_IF([test "x$with_pmix" != xno], [
    PKG_CHECK_MODULES([PMIX], [pmix >= 3], [p2p_have_pmix=yes], [p2p_have_pmix=no])
    AS_IF([test "x$p2p_have_pmix" = xyes], [
      PMIX_VERSION=`$PKG_CONFIG --modversion pmix`
      p2p_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $PMIX_CFLAGS"
      AC_CHECK_HEADER([pmix.h], [], [p2p_have_pmix=no])
      CPPFLAGS="$p2p_save_CPPFLAGS"])
    AS_IF([test "x$p2p_have_pmix" = xno && test "x$with_pmix" = xyes],
          [AC_MSG_ERROR([PMIx requested but not found: install libpmix-dev])])
    AS_IF([test "x$p2p_have_pmix" = xno],
          [AC_MSG_WARN([PMIx not found: srun/mpirun bootstrap disabled])])
  ])
  AS_IF([test "x$p2p_have_pmix" = xyes], [AC_DEFINE([HAVE_PMIX], [1], [PMIx available])])
  AM_CONDITIONAL([HAVE_PMIX], [test "x$p2p_have_pmix" = xyes])
  AC_SUBST([PMIX_VERSION])
])
